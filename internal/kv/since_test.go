package kv

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/storage"
)

// TestListSinceReadsTheChange: a listing of what changed after a
// timestamp reads the few blocks that hold newer versions, not the
// space: its cost follows the change. It lists exactly the keys written
// (or deleted) after the timestamp, with their newest version.
func TestListSinceReadsTheChange(t *testing.T) {
	e, err := storage.Open(storage.Options{FS: vfs.NewMem(), Dir: "db"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	db := e.DB()
	const n = 20000
	obj := func(i int) []byte { return keys.Object(1, nil, fmt.Appendf(nil, "key-%06d", i)) }
	write := func(ts uint64, is []int, del bool) {
		t.Helper()
		b := db.NewIndexedBatch()
		for _, i := range is {
			rec := &mvcc.Record{Version: ts, StartTS: ts, Size: 100, Inline: make([]byte, 100), DeleteMarker: del}
			if del {
				rec.Size, rec.Inline = 0, nil
			}
			if _, err := mvcc.Put(&BatchRW{B: b}, obj(i), rec, mvcc.Retention{}, ts); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	write(10, all, false)
	if err := db.Compact(t.Context(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	write(20, []int{7, 9000, 19999}, false)
	write(30, []int{12345}, true)

	rd := Reader{R: db}
	o := mvcc.ListOptions{Lower: keys.SpaceStart(1), Upper: keys.SpaceEnd(1), Since: 15, Markers: true}
	ents, more, err := mvcc.List(rd, o)
	if err != nil || more {
		t.Fatal(err, more)
	}
	var got []string
	for _, en := range ents {
		_, _, k, _ := keys.DecodeObject(en.Obj)
		got = append(got, fmt.Sprintf("%s@%d/%t", k, en.Rec.Version, en.Rec.DeleteMarker))
	}
	if want := "[key-000007@20/false key-009000@20/false key-012345@30/true key-019999@20/false]"; fmt.Sprint(got) != want {
		t.Fatalf("changed since 15: %v, want %s", got, want)
	}
	o.Since, o.AsOf = 15, 25 // as of 25: the delete at 30 is not yet
	if ents, _, err = mvcc.List(rd, o); err != nil || len(ents) != 3 {
		t.Fatalf("changed in (15, 25]: %d entries, %v", len(ents), err)
	}

	// The cost: the keys the filtered iterator visits, against every key.
	lower, upper := keys.VersionSpan(keys.SpaceStart(1), keys.SpaceEnd(1))
	count := func(since uint64) int {
		var it mvcc.Iterator
		if since == 0 {
			it, err = rd.NewIter(lower, upper)
		} else {
			it, err = rd.NewIterSince(lower, upper, since)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		c := 0
		for ok := it.SeekGE(lower); ok; ok = it.Next() {
			c++
		}
		return c
	}
	full, since := count(0), count(15)
	t.Logf("a listing since 15 visits %d of %d version keys", since, full)
	if full < n || since > full/20 {
		t.Fatalf("a listing of 4 changes visits %d of %d keys", since, full)
	}
}
