package gen

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ErrInterleave reports shards that Interleave cannot deal: an unreadable
// tar, or a sample whose members do not lie together.
var ErrInterleave = errors.New("gen: cannot interleave")

// InterleavedName returns the file name of shard k of the interleaved
// layout (Interleave) of a preset's dataset.
func InterleavedName(preset string, k int) string {
	return fmt.Sprintf("%s-interleaved-%06d.tar", preset, k)
}

// Interleave writes into the directory out the samples of the WebDataset
// shards at paths, dealt in turn into as many shards as paths: sample n
// of the shards' concatenation, in their order, goes to shard n mod K,
// named InterleavedName(preset, k). Every sample keeps its members and
// their bytes; only the layout changes. Source-homogeneous shards of
// equal sizes (a mixture preset's) so become shards that each hold an
// equal share of every source: the uniform layout of the same samples,
// against which the source-homogeneous one shows what lasting skew
// costs. A sample is the run of consecutive members that share a key
// (the member's base name up to its first dot); a key met again after
// another's is refused, naming the shard and the key, as it would split
// a sample. It returns the paths written.
func Interleave(paths []string, out, preset string) (written []string, err error) {
	k := len(paths)
	if k == 0 {
		return nil, fmt.Errorf("%w: no shards", ErrInterleave)
	}
	outs := make([]*tar.Writer, k)
	files := make([]*os.File, k)
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i := range k {
		p := filepath.Join(out, InterleavedName(preset, i))
		f, err := os.Create(p)
		if err != nil {
			return nil, fmt.Errorf("gen: %w", err)
		}
		files[i], outs[i] = f, tar.NewWriter(f)
		written = append(written, p)
	}
	n := 0 // samples dealt so far
	for _, p := range paths {
		if n, err = dealShard(p, outs, n); err != nil {
			return nil, err
		}
	}
	for i, tw := range outs {
		if err := tw.Close(); err != nil {
			return nil, fmt.Errorf("gen: %s: %w", written[i], err)
		}
		if err := files[i].Close(); err != nil {
			return nil, fmt.Errorf("gen: %s: %w", written[i], err)
		}
		files[i] = nil
	}
	return written, nil
}

// dealShard copies the samples of the shard at p into outs in turn, the
// first into outs[n mod len(outs)], and returns n plus its samples.
func dealShard(p string, outs []*tar.Writer, n int) (int, error) {
	f, err := os.Open(p)
	if err != nil {
		return n, fmt.Errorf("gen: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	seen := map[string]bool{}
	key := ""
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			if key != "" {
				n++ // the shard's last sample
			}
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("%w: %s: %v", ErrInterleave, p, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue // directories and links carry no sample bytes
		}
		base := path.Base(hdr.Name)
		k, _, _ := strings.Cut(base, ".")
		if k != key {
			if seen[k] {
				return n, fmt.Errorf("%w: %s: sample %q has members apart from each other", ErrInterleave, p, k)
			}
			seen[k] = true
			if key != "" {
				n++
			}
			key = k
		}
		tw := outs[n%len(outs)]
		if err := tw.WriteHeader(hdr); err != nil {
			return n, fmt.Errorf("gen: %w", err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return n, fmt.Errorf("%w: %s: %s: %v", ErrInterleave, p, hdr.Name, err)
		}
	}
}
