//go:build unix

package kv

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/testenv"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// BenchmarkApplyOnePhase applies TODS's transaction (four new objects of
// 512 B, one range: a one-phase commit) the way a replica's apply step
// does — in an indexed batch committed without sync, then Committed — on
// a store on disk preloaded with 200,000 objects (in batches of 16
// commands). Each timed operation is one command in its own batch.
// cpu-ns/op is the process's CPU time per transaction.
func BenchmarkApplyOnePhase(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 512)
	ts := tstamp.Make(1, 0)
	next := 0
	txn := func() []byte {
		c := &OnePhaseCmd{StartTS: ts, CommitTS: ts + 1}
		ts += 2
		for j := range 4 {
			obj := keys.Object(1, nil, fmt.Appendf(nil, "%c-txn-%d-%d", 'a'+next%26, next, j))
			c.Muts = append(c.Muts, mvcc.Mutation{Obj: obj, Kind: mvcc.LockWrite, Rec: &mvcc.Record{Size: int64(len(body)), ETag: "9b2cf535f27731c974343645a3985328", Inline: body}})
		}
		next++
		return c.Encode()
	}
	_, applyBatch := benchApplier(b, txn)
	for range 200000 / 4 / 16 {
		applyBatch(16)
	}
	b.ReportAllocs()
	cpu0 := testenv.CPUTime(b)
	for b.Loop() {
		applyBatch(1)
	}
	b.ReportMetric(float64(testenv.CPUTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// benchApplier opens a store on disk with a state machine (and a record
// cache) over it, and returns the store and a function that applies n
// commands made by cmd the way a replica's apply step does: in an indexed
// batch committed without sync, then Committed.
func benchApplier(b *testing.B, cmd func() []byte) (*pebble.DB, func(n int)) {
	e, err := storage.Open(storage.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	db := e.DB()
	sm := &StateMachine{Cache: NewCache(64 << 20)}
	return db, func(n int) {
		batch := db.NewIndexedBatch()
		for range n {
			if res, ok := sm.Apply(batch, cmd()).(error); ok {
				b.Fatal(res)
			}
		}
		if err := batch.Commit(pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		sm.Committed()
	}
}

// BenchmarkApplyFirstWrites applies 1 KiB PUTs of keys never written
// before (each a seek of pebble for the key's newest version: the record
// cache has none), in batches of 16 commands as a follower's apply step
// meets them, on a store on disk: fresh (pebble's first memtables, before
// its first flush) or after 80 MB of such writes. Run with -benchtime
// 20000x: the fresh case is about the first 25 MB written after an open.
func BenchmarkApplyFirstWrites(b *testing.B) {
	for _, preload := range []int{0, 64000} {
		name := "fresh"
		if preload > 0 {
			name = "after-80MB"
		}
		b.Run(name, func(b *testing.B) {
			body := bytes.Repeat([]byte("x"), 1024)
			ts := tstamp.Make(1, 0)
			next := 0
			put := func() []byte {
				ts++
				next++
				obj := keys.Object(1, nil, fmt.Appendf(nil, "bench-%09d", next*7919%1000000007))
				return (&PutCmd{Obj: obj, Rec: &mvcc.Record{Version: ts, Size: int64(len(body)), ETag: "9b2cf535f27731c974343645a3985328", Inline: body}}).Encode()
			}
			db, applyBatch := benchApplier(b, put)
			for range preload / 16 {
				applyBatch(16)
			}
			b.ReportAllocs()
			cpu0 := testenv.CPUTime(b)
			for i := 0; b.Loop(); i++ {
				if i%16 == 0 {
					applyBatch(16)
				}
			}
			b.ReportMetric(float64(testenv.CPUTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(db.Metrics().MemTable.Count), "memtables")
		})
	}
}
