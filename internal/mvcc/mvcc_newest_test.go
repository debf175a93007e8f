package mvcc

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/tstamp"
)

func TestPutNewest(t *testing.T) {
	for _, pol := range []Retention{{Mode: KeepAll}, {Mode: KeepLast, KeepLast: 3}} {
		kv := NewMemKV()
		obj := keys.Object(1, nil, []byte("k"))
		if _, err := PutNewest(kv, obj, &Record{Version: 20}, pol, 20); err != nil {
			t.Fatal(err)
		}
		before := kv.Len()
		if _, err := PutNewest(kv, obj, &Record{Version: 10}, pol, 20); !errors.Is(err, ErrStaleVersion) {
			t.Fatalf("%v: older than the newest: %v", pol, err)
		}
		if kv.Len() != before {
			t.Fatalf("%v: a stale put wrote", pol)
		}
		if _, err := PutNewest(kv, obj, &Record{Version: 20}, pol, 20); !errors.Is(err, ErrVersionExists) {
			t.Fatalf("%v: equal to the newest: %v", pol, err)
		}
		rec := &Record{Version: 30}
		if _, err := PutNewest(kv, obj, rec, pol, 30); err != nil || rec.Parent != 20 {
			t.Fatalf("%v: newer: parent %d, %v", pol, rec.Parent, err)
		}
		// Plain Put still accepts the out-of-order write.
		if _, err := Put(kv, obj, &Record{Version: 15}, pol, 30); err != nil {
			t.Fatalf("%v: Put out of order: %v", pol, err)
		}
	}
}

// TestPutNewestOverMatchesPutNewest checks that telling Put the newest
// version (as a cache does) changes nothing: same errors, same records, same
// stored bytes as PutNewest reading it.
func TestPutNewestOverMatchesPutNewest(t *testing.T) {
	for _, pol := range []Retention{{Mode: KeepAll}, {Mode: KeepLast, KeepLast: 2}} {
		read, told := NewMemKV(), NewMemKV()
		obj := keys.Object(1, nil, []byte("k"))
		newest := uint64(0)
		for i, v := range []uint64{10, 20, 15, 20, 30, 31, 5, 40} {
			a, b := &Record{Version: v, ETag: "e"}, &Record{Version: v, ETag: "e"}
			_, errA := PutNewest(read, obj, a, pol, v)
			_, errB := PutNewestOver(told, obj, b, newest, pol, v)
			if (errA == nil) != (errB == nil) || errors.Is(errA, ErrStaleVersion) != errors.Is(errB, ErrStaleVersion) ||
				errors.Is(errA, ErrVersionExists) != errors.Is(errB, ErrVersionExists) {
				t.Fatalf("%v step %d (version %d): PutNewest %v, PutNewestOver %v", pol, i, v, errA, errB)
			}
			if a.Parent != b.Parent || a.StartTS != b.StartTS {
				t.Fatalf("%v step %d: records differ: %+v vs %+v", pol, i, a, b)
			}
			if errA == nil {
				newest = v
			}
		}
		ra, _, _ := Versions(read, obj, 0, 0)
		rb, _, _ := Versions(told, obj, 0, 0)
		if len(ra) != len(rb) {
			t.Fatalf("%v: %d versions vs %d", pol, len(ra), len(rb))
		}
		for i := range ra {
			if !bytes.Equal(ra[i].Marshal(), rb[i].Marshal()) || ra[i].Version != rb[i].Version {
				t.Fatalf("%v: version %d differs", pol, i)
			}
		}
	}
}

// TestPrune applies policies to a history written under KeepAll, as the
// version collector does for keys no one writes again: the newest version
// always stays, KeepLast keeps its count, KeepFor drops what has been
// noncurrent longer than its duration at the given time.
func TestPrune(t *testing.T) {
	obj := keys.Object(1, nil, []byte("k"))
	ms := func(m int64) uint64 { return tstamp.Make(m, 0) }
	write := func() *MemKV {
		kv := NewMemKV()
		for _, v := range []uint64{ms(1000), ms(2000), ms(3000), ms(4000)} {
			if _, err := Put(kv, obj, &Record{Version: v}, Retention{}, v); err != nil {
				t.Fatal(err)
			}
		}
		return kv
	}
	left := func(kv *MemKV) []uint64 {
		recs, _, err := Versions(kv, obj, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, r := range recs {
			out = append(out, uint64(tstamp.Physical(r.Version)))
		}
		return out
	}
	for _, c := range []struct {
		pol  Retention
		now  uint64
		want []uint64
	}{
		{Retention{}, ms(9000), []uint64{4000, 3000, 2000, 1000}},
		{Retention{Mode: KeepLast, KeepLast: 2}, ms(9000), []uint64{4000, 3000}},
		{Retention{Mode: KeepLast, KeepLast: 1}, ms(9000), []uint64{4000}},
		// Version 3000 became noncurrent at 4000, 2000 at 3000, 1000 at 2000.
		{Retention{Mode: KeepFor, KeepFor: 1500 * time.Millisecond}, ms(4600), []uint64{4000, 3000}},
		{Retention{Mode: KeepFor, KeepFor: time.Second}, ms(100000), []uint64{4000}},
	} {
		// Every now is past the versions: a safe point changes nothing.
		for _, safe := range []bool{false, true} {
			kv := write()
			pruned, err := Prune(kv, obj, c.pol, c.now, safe)
			got := left(kv)
			if err != nil || !slices.Equal(got, c.want) || len(pruned) != 4-len(c.want) {
				t.Fatalf("%v at %d (safe point %v): left %v (pruned %d), %v; want %v", c.pol, tstamp.Physical(c.now), safe, got, len(pruned), err, c.want)
			}
		}
	}
}
