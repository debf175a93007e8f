package mvcc

import (
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
