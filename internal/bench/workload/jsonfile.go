package workload

import (
	"encoding/json"
	"errors"
	"io"
)

// decodeOneObject decodes the one JSON value r holds into v, refusing
// fields v does not have (another kind of file given by mistake) and any
// data after the value, a stray '}' or ']' included.
func decodeOneObject(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the object")
	}
	return nil
}
