package shard

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/internal/tartest"
)

// The tests in this file read shards as the tools users bring write them
// (Python's tarfile behind webdataset's TarWriter, GNU tar, archive/tar)
// and compare the samples with what WebDataset's tariterators yields for
// them: regular members only, names under __NAME__ skipped, the key up to
// the first dot of the base name, extensions lower-cased, adjacent members
// grouped. Where datahelix differs on purpose, the case says so.

// openTestShard writes data as a shard and opens it.
func openTestShard(t *testing.T, data []byte) *Shard {
	t.Helper()
	s, err := Open(tartest.WriteFile(t, t.TempDir(), "s.tar", data), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// shardSummaries reads every sample of s as sampleSummary strings.
func shardSummaries(t *testing.T, s *Shard) []string {
	t.Helper()
	var got []string
	for i := 0; i < s.Len(); i++ {
		smp, err := s.ReadSample(i)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, sampleSummary(smp))
	}
	return got
}

// checkWarnings fails unless the warnings contain the wanted substrings,
// one each, in order.
func checkWarnings(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("warnings %q, want %d containing %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("warning %d = %q, want it to contain %q", i, got[i], w)
		}
	}
}

func TestShardWebDatasetGrouping(t *testing.T) {
	tests := []struct {
		name  string
		files []tartest.File
		want  []string // the samples WebDataset yields
		warns []string
	}{
		{"dots in directory", []tartest.File{{Name: "a.b/c.jpg", Data: "i"}, {Name: "a.b/c.txt", Data: "t"}, {Name: "a.b/d.jpg", Data: "j"}},
			[]string{"a.b/c: jpg=i txt=t", "a.b/d: jpg=j"}, nil},
		{"dots in base name", []tartest.File{{Name: "x.seg.mp4", Data: "v"}, {Name: "x.seg.txt", Data: "t"}, {Name: "y.0.jpg", Data: "0"}, {Name: "y.1.jpg", Data: "1"}},
			[]string{"x: seg.mp4=v seg.txt=t", "y: 0.jpg=0 1.jpg=1"}, nil},
		{"upper-case extensions", []tartest.File{{Name: "000.JPG", Data: "i"}, {Name: "000.Txt", Data: "t"}, {Name: "001.jpeg", Data: "j"}},
			[]string{"000: jpg=i txt=t", "001: jpeg=j"}, nil},
		{"./ prefix and directories", []tartest.File{{Name: "./", Type: tar.TypeDir}, {Name: "./000.jpg", Data: "i"}, {Name: "./sub/", Type: tar.TypeDir}, {Name: "./sub/000.txt", Data: "t"}},
			[]string{"./000: jpg=i", "./sub/000: txt=t"}, nil},
		{"zero-size members", []tartest.File{{Name: "000.jpg", Data: ""}, {Name: "000.txt", Data: "t"}, {Name: "001.txt", Data: ""}},
			[]string{"000: jpg= txt=t", "001: txt="}, nil},
		// tar cf shard.tar *.jpg *.txt: WebDataset yields the four
		// halves too, silently.
		{"members not adjacent", []tartest.File{{Name: "000.jpg", Data: "a"}, {Name: "001.jpg", Data: "b"}, {Name: "000.txt", Data: "c"}, {Name: "001.txt", Data: "d"}},
			[]string{"000: jpg=a", "001: jpg=b", "000: txt=c", "001: txt=d"}, []string{`"000" at offset 2560 reuses the key`, `"001" at offset 3584 reuses the key`}},
		// WebDataset fails with "duplicate file name"; datahelix keeps the
		// first member, as README says. The old index kept both, which
		// made a one-image sample a two-image document.
		{"repeated extension", []tartest.File{{Name: "000.jpg", Data: "a"}, {Name: "000.txt", Data: "t"}, {Name: "000.jpg", Data: "b"}, {Name: "000.TXT", Data: "u"}, {Name: "000.json", Data: "j"}},
			[]string{"000: jpg=a txt=t json=j"}, []string{`"000.jpg" at offset 2560 skipped: it repeats extension "jpg" of member "000.jpg"`, `"000.TXT" at offset 3584 skipped: it repeats extension "txt" of member "000.txt"`}},
		{"links", []tartest.File{{Name: "000.jpg", Data: "i"}, {Name: "000.txt", Type: tar.TypeSymlink}, {Name: "001.jpg", Type: tar.TypeLink}, {Name: "001.txt", Data: "t"}},
			[]string{"000: jpg=i", "001: txt=t"}, []string{`"000.txt" at offset 1536 skipped: not a regular file but a symbolic link to "target"`, `"001.jpg" at offset 2048 skipped: not a regular file but a hard link to "target"`}},
		// Type '7', a contiguous file, is a regular file to tar and to
		// Python's tarfile; the old index skipped it.
		{"contiguous file", []tartest.File{{Name: "000.jpg", Data: "i", Type: tar.TypeCont}, {Name: "000.txt", Data: "t"}},
			[]string{"000: jpg=i txt=t"}, nil},
		// WebDataset skips names under __NAME__/ as metadata; the old
		// index trained on them as text samples.
		{"metadata names", []tartest.File{{Name: "__meta__/info.json", Data: "{}"}, {Name: "__key__.txt", Data: "k"}, {Name: "000.txt", Data: "t"}},
			[]string{"__key__: txt=k", "000: txt=t"}, []string{`"__meta__/info.json" at offset 512 skipped: WebDataset keeps names`}},
	}
	for _, tt := range tests {
		for _, format := range []tar.Format{tar.FormatPAX, tar.FormatGNU} {
			t.Run(tt.name+"/"+format.String(), func(t *testing.T) {
				s := openTestShard(t, tartest.Write(t, format, tt.files))
				if got := shardSummaries(t, s); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("samples %q, want %q", got, tt.want)
				}
				checkWarnings(t, s.Warnings(), tt.warns...)
			})
		}
	}
}

// TestShardGNUTarLinksSparse reads shards GNU tar 1.34 wrote of a
// directory (--sparse, --format=gnu and --format=posix): "./" names,
// directory entries, a hard link, a symbolic link and a sparse member.
// WebDataset skips the links and reads the sparse file; datahelix skips
// both, as README says, and reports them.
func TestShardGNUTarLinksSparse(t *testing.T) {
	for _, file := range []string{"gnutar-links-sparse.tar", "gnutar-posix-sparse.tar"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", "decode", "testdata", "shards", file))
			if err != nil {
				t.Fatal(err)
			}
			s := openTestShard(t, data)
			want := []string{"./000: jpg=jpegdata txt=cap zero", "./001: jpg=one", "./002: txt=two", "./003: json=three", "./sub.d/004: txt=four"}
			if got := shardSummaries(t, s); !reflect.DeepEqual(got, want) {
				t.Errorf("samples %q, want %q", got, want)
			}
			checkWarnings(t, s.Warnings(), `"./001.txt" at offset 4096 skipped: not a regular file but a hard link to "./000.txt"`,
				`"./002.jpg" at offset 4608 skipped: not a regular file but a symbolic link to "000.jpg"`, `"./003.txt" at offset`)
		})
	}
}

// TestShardAfterEndMarker appends to a shard what users append: a second
// shard (cat a.tar b.tar), other bytes, or more zero padding (a larger
// blocking factor). Neither WebDataset nor tar reads past the first
// end-of-archive marker, so the second shard's samples are lost to every
// reader; the old index lost them without a word.
func TestShardAfterEndMarker(t *testing.T) {
	first := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "000.jpg", Data: "i"}, {Name: "000.txt", Data: "t"}})
	second := tartest.Write(t, tar.FormatGNU, []tartest.File{{Name: "100.jpg", Data: "j"}})
	end := int64(len(first))
	tests := []struct {
		name  string
		after []byte
		warns []string
	}{
		{"second shard", second, []string{"another tar archive starts at offset " + strconv.FormatInt(end, 10) + ", after the end-of-archive marker"}},
		{"second shard after padding", append(make([]byte, 10240), second...), []string{"another tar archive starts at offset " + strconv.FormatInt(end+10240, 10)}},
		{"other bytes", append(make([]byte, 700), "notes\n"...), []string{"6 bytes of data after the end-of-archive marker, from offset " + strconv.FormatInt(end+700, 10) + ", ignored"}},
		{"zero padding", make([]byte, 1<<20), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTestShard(t, append(append([]byte{}, first...), tt.after...))
			if got, want := shardSummaries(t, s), []string{"000: jpg=i txt=t"}; !reflect.DeepEqual(got, want) {
				t.Errorf("samples %q, want %q", got, want)
			}
			checkWarnings(t, s.Warnings(), tt.warns...)
		})
	}
}

// withPAXRecord returns a USTAR archive of the members before, then a
// member name carrying a PAX extended header of one record key=value of
// any size (archive/tar writes at most 1 MiB; Python's tarfile writes any
// size), then the members after.
// tarBlock is the size of a tar header block.
const tarBlock = 512

func withPAXRecord(t *testing.T, before []tartest.File, name, key, value string, after []tartest.File) []byte {
	t.Helper()
	rec := " " + key + "=" + value + "\n"
	n := len(rec) + 1
	for len(strconv.Itoa(n))+len(rec) != n {
		n = len(strconv.Itoa(n)) + len(rec)
	}
	rec = strconv.Itoa(n) + rec
	// The extended header is written as a regular member, then retyped.
	files := append(append(append([]tartest.File{}, before...), tartest.File{Name: "PaxHeaders/" + name, Data: rec}, tartest.File{Name: name, Data: "x"}), after...)
	data := tartest.Write(t, tar.FormatUSTAR, files)
	hdr := data[len(tartest.Write(t, tar.FormatUSTAR, before))-2*tarBlock:][:tarBlock]
	hdr[156] = tar.TypeXHeader
	copy(hdr[148:156], "        ")
	sum := 0
	for _, c := range hdr {
		sum += int(c)
	}
	copy(hdr[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return data
}

// TestShardHugeExtendedHeader reads PAX extended headers over the 1 MiB
// archive/tar reads: the shard is refused (WebDataset reads it) with an
// error that says so, not "not a tar archive".
func TestShardHugeExtendedHeader(t *testing.T) {
	small := withPAXRecord(t, nil, "000.txt", "comment", "hello", []tartest.File{{Name: "000.jpg", Data: "i"}})
	if got, want := shardSummaries(t, openTestShard(t, small)), []string{"000: txt=x jpg=i"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("samples %q, want %q (the PAX header is not read)", got, want)
	}
	huge := strings.Repeat("z", 2<<20)
	for _, tt := range []struct {
		name   string
		before []tartest.File
		offset int64
	}{
		{"first member", nil, 0},
		{"second member", []tartest.File{{Name: "000.jpg", Data: "i"}}, 1024},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tartest.WriteFile(t, t.TempDir(), "s.tar", withPAXRecord(t, tt.before, "001.txt", "comment", huge, nil))
			_, err := Open(p, "")
			var se *shardindex.ShardError
			if !errors.As(err, &se) || !errors.Is(err, tar.ErrFieldTooLong) {
				t.Fatalf("err %v, want a *shardindex.ShardError wrapping tar.ErrFieldTooLong", err)
			}
			if se.Offset != tt.offset || !strings.Contains(se.Reason, "extended header (PAX records or a GNU long name) larger than the 1 MiB limit") ||
				strings.Contains(se.Reason, "not a tar archive") {
				t.Errorf("err %q at offset %d, want the extended header over 1 MiB at offset %d", err, se.Offset, tt.offset)
			}
		})
	}
}
