package mvcc

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/keys"
)

// TestListEntriesIndependent: the entries of a listing share memory, but
// a caller that appends to one's key or changes one's record does not
// change another's.
func TestListEntriesIndependent(t *testing.T) {
	kv := NewMemKV()
	for i := range 200 { // more than one block of records
		rec := &Record{Version: 10, Size: int64(i), ETag: fmt.Sprint(i)}
		if _, err := Put(kv, keys.Object(1, nil, fmt.Appendf(nil, "k%03d", i)), rec, Retention{}, 10); err != nil {
			t.Fatal(err)
		}
	}
	for _, all := range []bool{false, true} {
		ents, _, err := List(kv, ListOptions{Lower: keys.SpaceStart(1), Upper: keys.SpaceEnd(1), AllVersions: all})
		if err != nil || len(ents) != 200 {
			t.Fatal(len(ents), err)
		}
		want := bytes.Clone(ents[1].Obj)
		_ = append(ents[0].Obj, "overwrite"...)
		ents[0].Rec.Size = -1
		if !bytes.Equal(ents[1].Obj, want) || ents[1].Rec.Size != 1 || ents[1].Rec.ETag != "1" {
			t.Fatalf("all=%t: entry 1 changed with entry 0: %q %+v", all, ents[1].Obj, ents[1].Rec)
		}
		for i, e := range ents {
			if e.Rec.Size != int64(i) && i != 0 {
				t.Fatalf("all=%t: entry %d has size %d", all, i, e.Rec.Size)
			}
		}
	}
}
