package launcher

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/agree"
	"github.com/datahelix/datahelix/internal/transform"
)

// transformSetting is the transform every rank must share.
func transformSetting(s transform.Spec) agree.Setting {
	txt := s.String()
	return agree.Setting{Name: "transforms", Value: agree.HashStrings([]string{txt}), Hashed: true, Text: txt}
}

// printTensorMD5s prints KEY<tab>I<tab>MD5 for each output tensor of
// every sample of path, decoded with dec (--md5 with a transform: the
// tensors after it, which depend on --seed and --epoch alone).
func printTensorMD5s(ctx context.Context, w, stderr io.Writer, path, cache string, dec *decode.Decoder, epoch int) (tally, error) {
	return eachSample(stderr, path, cache, func(s *decode.Sample) error {
		s.Epoch = epoch
		out, err := dec.Decode(ctx, s)
		if err != nil {
			return err
		}
		for i, t := range out.Tensors {
			sum := md5.Sum(t.Data)
			if _, err := fmt.Fprintf(w, "%s\t%d\t%s\n", s.Key, i, hex.EncodeToString(sum[:])); err != nil {
				return fatal(err)
			}
		}
		return nil
	})
}
