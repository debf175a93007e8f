package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// TestLockSetAnswersLikePebble drives lock writes (values the set keeps
// and values too large to keep), deletions and reads through an apply
// batch with the range's lock set, in batches committed or not yet, across
// reloads (a restart, a snapshot, new bounds), and asserts that every read
// of a lock answers what pebble holds, value included.
func TestLockSetAnswersLikePebble(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		db := openMem(t)
		objs := make([][]byte, 12)
		for i := range objs {
			objs[i] = keys.Object(1, nil, []byte(fmt.Sprintf("k%02d", i)))
		}
		bounds := rangedesc.Range{Start: objs[0], End: keys.Object(1, nil, []byte("z"))}
		var set lockSet
		set.reset(bounds)
		for step := range 200 {
			b := db.NewIndexedBatch()
			rw := BatchRW{B: b, locks: &set}
			for range 1 + rng.IntN(6) {
				obj := objs[rng.IntN(len(objs))]
				k := keys.Lock(obj)
				switch op := rng.IntN(10); {
				case op < 3:
					v := []byte{byte(step)}
					if rng.IntN(4) == 0 {
						v = bytes.Repeat(v, maxHeldLock+1) // too large to keep: read from pebble
					}
					if err := rw.Set(k, v); err != nil {
						t.Fatal(err)
					}
				case op < 6:
					if err := rw.Delete(k); err != nil {
						t.Fatal(err)
					}
				case op < 7:
					// A transaction record shares the 'l' keyspace and is no lock.
					if err := rw.Set(keys.TxnRecord(obj, uint64(step)), []byte{1}); err != nil {
						t.Fatal(err)
					}
				default:
					got, gotOK, err := rw.Get(k)
					if err != nil {
						t.Fatal(err)
					}
					want, wantOK, err := get(b, k)
					if err != nil {
						t.Fatal(err)
					}
					if gotOK != wantOK || !bytes.Equal(got, want) {
						t.Fatalf("seed %d step %d: lock of %x read %x %v through the set, %x %v from pebble", seed, step, obj, got, gotOK, want, wantOK)
					}
				}
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			b.Close()
			set.committed()
			if rng.IntN(25) == 0 {
				set.reset(bounds) // a restart, a snapshot or new bounds
			}
		}
	}
}
