// Package shardindex indexes WebDataset tar shards and caches the
// indexes on disk. Build reads a shard's tar headers and groups its
// members into samples by key, as WebDataset does, noting what it skips;
// a Location loads and saves the index of one shard, beside it or in a
// cache directory, where Scan and Prune find the indexes no job reads
// any more (datahelix cache); Paths lists the shard files a dataset
// path or glob names. Package decode's Shard and Dataset read samples
// through it.
package shardindex

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
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

// UncompressedOnly says why a compressed shard is refused.
const UncompressedOnly = "shards must be uncompressed tar files, which allow random access to samples"

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
	return fmt.Sprintf("%s; decompress it first, e.g. %s %s > NEW.tar", UncompressedOnly, e.undo, e.path)
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

// Member locates one member of a sample inside its shard.
type Member struct {
	Name   string // full member name, e.g. "clips/000123.mp4"
	Ext    string // extension after the key, lower case, e.g. "mp4" or "0.jpg"
	Offset int64  // absolute offset of the member's data in the shard file
	Size   int64  // member data size in bytes
}

// Entry locates one sample inside its shard: the members sharing a
// key, and the contiguous byte span [Offset, Offset+Size) that covers all
// of their data (tar headers between members included), so that the whole
// sample is fetched with one read.
type Entry struct {
	Key     string
	Offset  int64
	Size    int64
	Members []Member
}

// Index is the content of a shard's index: its samples in file order
// and what was noticed while building it.
type Index struct {
	Entries  []Entry
	Warnings []string // members skipped and other oddities, one line each
}

// splitKey splits a tar member name into its WebDataset key and extension:
// the key is the name up to the first dot of the base name (the directory
// part is kept) and the extension is the rest, lower-cased. A base name
// without a dot, or starting with one, has no key: ok is false and the
// member belongs to no sample (WebDataset skips such members too). So do
// the names WebDataset keeps for metadata (isWebDatasetMeta).
func splitKey(name string) (key, ext string, ok bool) {
	dir, base := path.Split(name)
	i := strings.IndexByte(base, '.')
	if i <= 0 || i == len(base)-1 || isWebDatasetMeta(name) {
		return "", "", false
	}
	return dir + base[:i], strings.ToLower(base[i+1:]), true
}

// isWebDatasetMeta reports whether WebDataset skips the member name as
// metadata rather than sample data: a name whose first component is
// "__NAME__" (such as "__meta__/info.json"), or a top-level "__NAME__".
func isWebDatasetMeta(name string) bool {
	first, _, nested := strings.Cut(name, "/")
	return strings.HasPrefix(first, "__") && strings.HasSuffix(first, "__") && (len(first) >= 4 || !nested)
}

// posReader tracks the position of a ReadSeeker so that the data offset of
// each tar member can be read off after tar.Reader.Next. It seeks instead
// of reading when archive/tar skips member data.
type posReader struct {
	r   io.ReadSeeker
	pos int64
}

// Read reads from the underlying reader, counting the bytes.
// Read reads from the underlying reader, counting the bytes.
func (p *posReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.pos += int64(n)
	return n, err
}

// Seek seeks the underlying reader, keeping the position.
// Seek seeks the underlying reader, keeping the position.
func (p *posReader) Seek(off int64, whence int) (int64, error) {
	n, err := p.r.Seek(off, whence)
	if err == nil {
		p.pos = n
	}
	return n, err
}

const tarBlock = 512

// Build reads the tar headers of a shard of the given size and groups
// its members into samples by key, as WebDataset does: adjacent members with
// the same key form one sample. Members WebDataset skips (not regular
// files, names without a key, metadata names) are skipped, and so are
// sparse members, which it reads, and a member repeating an extension of
// its sample, on which it fails (the first one stays); data after the
// end-of-archive marker is ignored, as WebDataset ignores it. Each of these
// is a warning. It returns a *ShardError for a bad header, a member running
// past the end of the file or a missing end-of-archive marker; a shard
// that is gzip, zstd, xz or bzip2 data is a *ShardError that also matches
// ErrCompressedShard.
func Build(name string, r io.ReadSeeker, size int64) (*Index, error) {
	if size == 0 {
		return nil, &ShardError{Path: name, Reason: "empty file, not a tar archive"}
	}
	pr := &posReader{r: r}
	tr := tar.NewReader(pr)
	idx := &Index{}
	seen := map[string]int64{} // key → offset of the sample that used it
	var exts extIndex          // the extensions of the last sample
	var next int64             // expected offset of the next header
	warnf := func(format string, args ...any) {
		idx.Warnings = append(idx.Warnings, fmt.Sprintf(format, args...))
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			if pr.pos <= next {
				return nil, &ShardError{Path: name, Offset: next, Reason: "archive ends without end-of-archive marker (truncated?)"}
			}
			if w := afterEnd(r, pr.pos, size); w != "" {
				warnf("%s", w)
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
			case errors.Is(err, tar.ErrFieldTooLong):
				// Python's tarfile writes any size; archive/tar reads
				// PAX records and GNU long names of up to 1 MiB.
				reason = "extended header (PAX records or a GNU long name) larger than the 1 MiB limit"
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
		case tar.TypeReg, tar.TypeCont: // a contiguous file is a regular file to tar and Python's tarfile
		case tar.TypeDir, tar.TypeXGlobalHeader:
			continue
		default:
			warnf("member %q at offset %d skipped: not a regular file but %s", hdr.Name, off, memberType(hdr))
			continue
		}
		if isWebDatasetMeta(hdr.Name) {
			warnf("member %q at offset %d skipped: WebDataset keeps names starting with __NAME__ for metadata", hdr.Name, off)
			continue
		}
		key, ext, ok := splitKey(hdr.Name)
		if !ok {
			warnf("member %q at offset %d skipped: its name has no WebDataset key.extension", hdr.Name, off)
			continue
		}
		m := Member{Name: hdr.Name, Ext: ext, Offset: off, Size: hdr.Size}
		if n := len(idx.Entries); n > 0 && idx.Entries[n-1].Key == key {
			e := &idx.Entries[n-1]
			if j := exts.find(e.Members, ext); j >= 0 {
				// WebDataset stops with "duplicate file name"; the first
				// member stays, so that the sample is what it was before
				// a second copy was appended (tar -r).
				warnf("sample %q: member %q at offset %d skipped: it repeats extension %q of member %q", key, hdr.Name, off, ext, e.Members[j].Name)
				continue
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
		idx.Entries = append(idx.Entries, Entry{Key: key, Offset: off, Size: hdr.Size, Members: []Member{m}})
		exts = extIndex{}
	}
}

// extIndex finds the member of a sample that has a given extension in
// constant time however many members the sample has — a scan while it
// has few, a map of their extensions beyond — so that a shard whose
// sample has a million members is indexed in linear time. The zero
// value is ready for a new sample.
type extIndex struct{ m map[string]int }

// find returns the index in ms, the sample's members so far, of the one
// with extension ext, or -1, in which case ext is noted as that of
// member len(ms), which the caller appends next.
func (x *extIndex) find(ms []Member, ext string) int {
	if x.m == nil {
		if len(ms) < 16 {
			return slices.IndexFunc(ms, func(o Member) bool { return o.Ext == ext })
		}
		x.m = make(map[string]int, 2*len(ms))
		for i, o := range ms {
			x.m[o.Ext] = i
		}
	}
	if i, ok := x.m[ext]; ok {
		return i
	}
	x.m[ext] = len(ms)
	return -1
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

// memberType names the type of a member that is not a regular file, for
// the warning that skips it.
func memberType(hdr *tar.Header) string {
	switch hdr.Typeflag {
	case tar.TypeLink:
		// GNU tar and Python's tarfile store the second name of a file
		// with several links so, without its data.
		return fmt.Sprintf("a hard link to %q (tar --hard-dereference stores the data instead)", hdr.Linkname)
	case tar.TypeSymlink:
		return fmt.Sprintf("a symbolic link to %q (tar -h stores the file instead)", hdr.Linkname)
	case tar.TypeChar:
		return "a character device"
	case tar.TypeBlock:
		return "a block device"
	case tar.TypeFifo:
		return "a FIFO"
	case 'V':
		return "a GNU tar volume label"
	case 'D':
		return "a GNU tar directory dump"
	case 'M':
		return "a GNU tar multi-volume continuation"
	}
	return fmt.Sprintf("a member of type %q", hdr.Typeflag)
}

// maxAfterEnd bounds how far afterEnd looks past the end-of-archive
// marker for data: tar pads an archive to its record size, 10 KiB by
// default and 1 MiB with GNU tar's largest common blocking factors.
const maxAfterEnd = 4 << 20

// afterEnd says what follows the end-of-archive marker that ends at
// offset end of a shard of the given size, or "" when it is zero padding
// (looked at up to maxAfterEnd bytes). Neither WebDataset (Python's
// tarfile) nor tar without --ignore-zeros reads past the marker, so the
// members of a second archive appended with cat are lost to every
// reader; datahelix says so.
func afterEnd(r io.ReadSeeker, end, size int64) string {
	nz := firstNonZero(r, end, min(size, end+maxAfterEnd))
	if nz < 0 {
		return ""
	}
	if at := nz / tarBlock * tarBlock; readTarHeaderAt(r, at) {
		return fmt.Sprintf("another tar archive starts at offset %d, after the end-of-archive marker (shards joined with cat?): "+
			"its members are not read, as WebDataset and tar without --ignore-zeros do not read them", at)
	}
	return fmt.Sprintf("%d bytes of data after the end-of-archive marker, from offset %d, ignored", size-nz, nz)
}

// firstNonZero returns the offset of the first byte of r in [from, to)
// that is not zero, or -1.
func firstNonZero(r io.ReadSeeker, from, to int64) int64 {
	if from >= to {
		return -1
	}
	if _, err := r.Seek(from, io.SeekStart); err != nil {
		return -1
	}
	buf := make([]byte, min(64<<10, to-from))
	for pos := from; pos < to; {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), to-pos)])
		if i := slices.IndexFunc(buf[:n], func(c byte) bool { return c != 0 }); i >= 0 {
			return pos + int64(i)
		}
		if err != nil {
			return -1
		}
		pos += int64(n)
	}
	return -1
}

// readTarHeaderAt reports whether the block at offset at of r is a tar
// header.
func readTarHeaderAt(r io.ReadSeeker, at int64) bool {
	var blk [tarBlock]byte
	if _, err := r.Seek(at, io.SeekStart); err != nil {
		return false
	}
	if _, err := io.ReadFull(r, blk[:]); err != nil {
		return false
	}
	return isTarHeader(blk[:])
}

// isTarHeader reports whether a 512-byte block is a tar header: its
// checksum field matches the sum of its bytes.
func isTarHeader(b []byte) bool {
	want, err := strconv.ParseUint(strings.Trim(string(b[148:156]), " \x00"), 8, 64)
	if err != nil {
		return false
	}
	var sum uint64
	for i, c := range b[:tarBlock] {
		if i >= 148 && i < 156 {
			c = ' '
		}
		sum += uint64(c)
	}
	return sum == want
}
