package mvcc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/internal/keys"
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
