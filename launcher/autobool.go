package launcher

import (
	"errors"
	"strconv"
)

// autoBool is the value of a boolean flag with a third value, auto
// (--pin, --resume): a bare flag means true, and --flag=auto,
// --flag=true or --flag=false (or any form strconv.ParseBool reads) set it
// explicitly. A value must be joined with "=": in "--pin false" the
// "false" is an argument, which parseFlagsHint refuses with a hint to
// write --pin=false. The zero value is false; a flag whose default is
// auto sets it before registering.
type autoBool int

// The autoBool values.
const (
	autoFalse autoBool = iota
	autoTrue
	autoAuto
)

// String returns the value as the flag accepts it.
func (a *autoBool) String() string {
	if a != nil {
		switch *a {
		case autoTrue:
			return "true"
		case autoAuto:
			return "auto"
		}
	}
	return "false"
}

// Set parses a value of the flag.
func (a *autoBool) Set(s string) error {
	if s == "auto" {
		*a = autoAuto
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want auto, true or false")
	}
	*a = autoFalse
	if b {
		*a = autoTrue
	}
	return nil
}

// IsBoolFlag makes a bare flag mean true.
func (a *autoBool) IsBoolFlag() bool { return true }
