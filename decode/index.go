package decode

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// ErrCorruptShard reports a shard that is not a readable tar archive: a bad
// header, a member running past the end of the file, or a missing
// end-of-archive marker.
var ErrCorruptShard = errors.New("decode: corrupt or truncated shard")

// ErrCompressedShard reports a shard that is a compressed tar archive
// (gzip, zstd, xz or bzip2), found by its name when listing a dataset
// directory or by its first bytes when indexing it. Shards must be
// uncompressed tar files: samples are read by random access.
var ErrCompressedShard = errors.New("decode: compressed shard")

// uncompressedOnly says why a compressed shard is refused.
const uncompressedOnly = "shards must be uncompressed tar files, which allow random access to samples"

// compressions are the signatures of the compressed formats a tar archive
// is commonly wrapped in, and the command that undoes each.
var compressions = []struct {
	magic, format, undo string
}{
	{"\x1f\x8b", "gzip", "gzip -dc"},
	{"\x28\xb5\x2f\xfd", "zstd", "zstd -dc"},
	{"\xfd7zXZ\x00", "xz", "xz -dc"},
	{"BZh", "bzip2", "bzip2 -dc"}, // and a block size digit 1-9
}

// compressedError is the cause of a *ShardError for a compressed shard;
// it matches ErrCompressedShard.
type compressedError struct {
	path, undo string
}

func (e *compressedError) Error() string {
	return fmt.Sprintf("%s; decompress it first, e.g. %s %s > NEW.tar", uncompressedOnly, e.undo, e.path)
}

func (e *compressedError) Is(target error) bool { return target == ErrCompressedShard }

// sniffCompressed returns a *ShardError when the shard starts with the
// signature of a compression format, else nil. It is asked only once the
// first tar header failed, so a tar member named like a signature ("BZh")
// is no problem.
func sniffCompressed(name string, r io.ReadSeeker) error {
	var head [6]byte
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil
	}
	n, _ := io.ReadFull(r, head[:])
	for _, c := range compressions {
		if strings.HasPrefix(string(head[:n]), c.magic) && (c.format != "bzip2" || n > 3 && head[3] >= '1' && head[3] <= '9') {
			return &ShardError{Path: name, Reason: c.format + "-compressed data instead of a tar header",
				Err: &compressedError{path: name, undo: c.undo}}
		}
	}
	return nil
}

// ShardError is a problem with one shard file at one byte offset. It
// unwraps to ErrCorruptShard and to the underlying cause, if any.
type ShardError struct {
	Path   string // shard file
	Offset int64  // byte offset where the problem was found
	Reason string // what is wrong, in words
	Err    error  // underlying cause, or nil
}

// Error names the file, the offset and the reason.
func (e *ShardError) Error() string {
	msg := fmt.Sprintf("decode: shard %s: %s at offset %d", e.Path, e.Reason, e.Offset)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrCorruptShard and the cause, for errors.Is.
func (e *ShardError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrCorruptShard}
	}
	return []error{ErrCorruptShard, e.Err}
}

// MemberEntry locates one member of a sample inside its shard.
type MemberEntry struct {
	Name   string // full member name, e.g. "clips/000123.mp4"
	Ext    string // extension after the key, lower case, e.g. "mp4" or "0.jpg"
	Offset int64  // absolute offset of the member's data in the shard file
	Size   int64  // member data size in bytes
}

// IndexEntry locates one sample inside its shard: the members sharing a
// key, and the contiguous byte span [Offset, Offset+Size) that covers all
// of their data (tar headers between members included), so that the whole
// sample is fetched with one read.
type IndexEntry struct {
	Key     string
	Offset  int64
	Size    int64
	Members []MemberEntry
}

// shardIndex is the content of a shard's index: its samples in file order
// and what was noticed while building it.
type shardIndex struct {
	entries  []IndexEntry
	warnings []string
}

// SplitKey splits a tar member name into its WebDataset key and extension:
// the key is the name up to the first dot of the base name (the directory
// part is kept) and the extension is the rest, lower-cased. A base name
// without a dot, or starting with one, has no key: ok is false and the
// member belongs to no sample (WebDataset skips such members too).
func SplitKey(name string) (key, ext string, ok bool) {
	dir, base := path.Split(name)
	i := strings.IndexByte(base, '.')
	if i <= 0 || i == len(base)-1 {
		return "", "", false
	}
	return dir + base[:i], strings.ToLower(base[i+1:]), true
}

// posReader tracks the position of a ReadSeeker so that the data offset of
// each tar member can be read off after tar.Reader.Next. It seeks instead
// of reading when archive/tar skips member data.
type posReader struct {
	r   io.ReadSeeker
	pos int64
}

func (p *posReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.pos += int64(n)
	return n, err
}

func (p *posReader) Seek(off int64, whence int) (int64, error) {
	n, err := p.r.Seek(off, whence)
	if err == nil {
		p.pos = n
	}
	return n, err
}

const tarBlock = 512

// buildIndex reads the tar headers of a shard of the given size and groups
// its members into samples by key, as WebDataset does: adjacent members with
// the same key form one sample. It returns a *ShardError for a bad header,
// a member running past the end of the file or a missing end-of-archive
// marker; a shard that is gzip, zstd, xz or bzip2 data is a *ShardError
// that also matches ErrCompressedShard.
func buildIndex(name string, r io.ReadSeeker, size int64) (*shardIndex, error) {
	if size == 0 {
		return nil, &ShardError{Path: name, Reason: "empty file, not a tar archive"}
	}
	pr := &posReader{r: r}
	tr := tar.NewReader(pr)
	idx := &shardIndex{}
	seen := map[string]int64{} // key → offset of the sample that used it
	var next int64             // expected offset of the next header
	warnf := func(format string, args ...any) {
		idx.warnings = append(idx.warnings, fmt.Sprintf(format, args...))
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			if pr.pos <= next {
				return nil, &ShardError{Path: name, Offset: next, Reason: "archive ends without end-of-archive marker (truncated?)"}
			}
			return idx, nil
		}
		if err != nil {
			if next == 0 {
				if cerr := sniffCompressed(name, r); cerr != nil {
					return nil, cerr
				}
			}
			reason := "invalid tar header"
			switch {
			case next == 0 && size < tarBlock:
				reason = fmt.Sprintf("not a tar archive (%d bytes, shorter than one tar header)", size)
			case next == 0:
				reason = "not a tar archive (invalid tar header)"
			case errors.Is(err, io.ErrUnexpectedEOF):
				reason = "file ends inside a tar header or member (truncated)"
			}
			return nil, &ShardError{Path: name, Offset: next, Reason: reason, Err: err}
		}
		off := pr.pos
		if isSparse(hdr) {
			// The logical size is not what the archive stores; the next
			// header's offset is unknown until archive/tar skips the data.
			next = off
			warnf("member %q at offset %d skipped: sparse files are not supported", hdr.Name, off)
			continue
		}
		if hdr.Size < 0 || off+hdr.Size > size || off+hdr.Size < off {
			return nil, &ShardError{Path: name, Offset: off,
				Reason: fmt.Sprintf("member %q of %d bytes runs past the end of the %d-byte file (truncated)", hdr.Name, hdr.Size, size)}
		}
		next = off + (hdr.Size+tarBlock-1)/tarBlock*tarBlock
		switch hdr.Typeflag {
		case tar.TypeReg:
		case tar.TypeDir, tar.TypeXGlobalHeader:
			continue
		default:
			warnf("member %q at offset %d skipped: not a regular file (type %q)", hdr.Name, off, hdr.Typeflag)
			continue
		}
		key, ext, ok := SplitKey(hdr.Name)
		if !ok {
			warnf("member %q at offset %d skipped: its name has no WebDataset key.extension", hdr.Name, off)
			continue
		}
		m := MemberEntry{Name: hdr.Name, Ext: ext, Offset: off, Size: hdr.Size}
		if n := len(idx.entries); n > 0 && idx.entries[n-1].Key == key {
			e := &idx.entries[n-1]
			for _, old := range e.Members {
				if old.Ext == ext {
					warnf("sample %q: member %q at offset %d repeats extension %q", key, hdr.Name, off, ext)
					break
				}
			}
			e.Members = append(e.Members, m)
			e.Size = off + hdr.Size - e.Offset
			continue
		}
		if first, dup := seen[key]; dup {
			warnf("sample %q at offset %d reuses the key of the sample at offset %d (members are grouped only when adjacent)", key, off, first)
		} else {
			seen[key] = off
		}
		idx.entries = append(idx.entries, IndexEntry{Key: key, Offset: off, Size: hdr.Size, Members: []MemberEntry{m}})
	}
}

// isSparse reports whether a header describes a GNU sparse file, whose data
// is not stored contiguously.
func isSparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}
