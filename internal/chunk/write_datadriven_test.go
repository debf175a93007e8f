package chunk

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestWriteDataDriven shows how byte-range writes and appends re-cut a
// manifest. Commands:
//
//	object size=N [fixed=F]        a new object of N bytes cut into F-byte pieces
//	writeat off=O len=L [fixed=F]  overwrite L bytes at O (with the next letter)
//	append len=L [fixed=F]         append L bytes
//
// Each prints the entries as id:size for a whole chunk or id@off:size for
// a slice of one, "=" marking an entry shared with the parent and "+" a new
// one, and checks the content against a byte-slice model; then the bytes
// stored.
func TestWriteDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := newMemChunks()
		var (
			m     Manifest
			model []byte
			fill  = byte('a')
			ids   = map[Hash]int{}
		)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			fixed := 0
			td.MaybeScanArgs(t, "fixed", &fixed)
			parent := m
			s.stored = 0
			var err error
			switch td.Cmd {
			case "object":
				var size int
				td.ScanArgs(t, "size", &size)
				model = make([]byte, size)
				for i := range model {
					model[i] = byte(i * 7 % 251)
				}
				parent = Manifest{}
				m, err = Append(Manifest{}, model, fixed, s.load, s.store)
			case "writeat":
				var off, n int
				td.ScanArgs(t, "off", &off)
				td.ScanArgs(t, "len", &n)
				data := bytes.Repeat([]byte{fill}, n)
				fill++
				m, err = WriteAt(m, int64(off), data, fixed, s.load, s.store)
				if n > 0 {
					if off+n > len(model) {
						model = append(model, make([]byte, off+n-len(model))...)
					}
					copy(model[off:], data)
				}
			case "append":
				var n int
				td.ScanArgs(t, "len", &n)
				data := bytes.Repeat([]byte{fill}, n)
				fill++
				m, err = Append(m, data, fixed, s.load, s.store)
				model = append(model, data...)
			default:
				td.Fatalf(t, "unknown command %q", td.Cmd)
			}
			if err != nil {
				return "error: " + err.Error()
			}
			if got := s.content(t, m); !bytes.Equal(got, model) {
				td.Fatalf(t, "content differs from the model:\n got %q\nwant %q", got, model)
			}
			return describe(s, parent, m, ids) + fmt.Sprintf("stored %d\n", s.stored)
		})
	})
}

// describe names each distinct chunk by a number in order of first
// appearance, so sharing is visible across steps.
func describe(s *memChunks, parent, m Manifest, ids map[Hash]int) string {
	old := map[Ref]bool{}
	for _, r := range parent.Chunks {
		old[r] = true
	}
	var b strings.Builder
	for i, r := range m.Chunks {
		if i > 0 {
			b.WriteByte(' ')
		}
		mark := "+"
		if old[r] {
			mark = "="
		}
		id, ok := ids[r.Hash]
		if !ok {
			id = len(ids) + 1
			ids[r.Hash] = id
		}
		if r.Off != 0 || r.Size != s.chunkSize(r.Hash) {
			fmt.Fprintf(&b, "%d@%d:%d%s", id, r.Off, r.Size, mark)
		} else {
			fmt.Fprintf(&b, "%d:%d%s", id, r.Size, mark)
		}
	}
	fmt.Fprintf(&b, "\nsize %d, %d chunks\n", m.Size(), len(m.Chunks))
	return b.String()
}
