package mvcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/internal/keys"
)

// TestTxnModel drives the transaction rules with random interleavings of
// many transactions — two-phase ones whose keys are prewritten one by one
// (as if each were in its own range), one-phase ones, coordinators that
// stop after the prewrite or after the primary's commit, prewrites that
// reach the primary last (a late one after a reader gave the transaction
// up must fail), readers that
// resolve the locks they meet, a clock that moves — and checks, once every
// lock left has been resolved, what a serial model of the committed
// transactions says: each transaction applied all its writes or none, no
// two committed transactions that overlapped wrote the same key (first
// committer wins), a read at any timestamp sees exactly the committed
// writes at or before it, and no lock is left.
func TestTxnModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { txnModelRun(t, seed) })
	}
}

type modelTxn struct {
	start, commit uint64
	keys          []int
	values        map[int]string
	onePhase      bool
	stage         int // 0 begun, 1 prewriting, 2 prewritten, 3 primary committed, 4 done
	prewritten    []int
	order         []int // the order its keys are prewritten in (the primary, keys[0], not always first)
	stopAt        int   // the stage at which its coordinator stops (a crash), or -1
	failed        bool
}

func txnModelRun(t *testing.T, seed uint64) {
	const nkeys, ttl = 5, 50
	rng := rand.New(rand.NewPCG(seed, 77))
	kv := NewMemKV()
	obj := func(i int) []byte { return keys.Object(1, nil, []byte(fmt.Sprintf("k%d", i))) }
	var ts, now uint64 = 100, 1000
	next := func() uint64 { ts++; return ts }
	var txns []*modelTxn

	resolve := func(o []byte, l *Lock, p CheckPolicy) {
		st, err := CheckTxn(kv, l.Primary, l.StartTS, p)
		if err != nil {
			t.Fatal(err)
		}
		switch st.State {
		case TxnCommitted:
			if _, _, err := Commit(kv, o, l.StartTS, st.CommitTS, false); err != nil && !errors.Is(err, ErrTxnAborted) {
				t.Fatal(err)
			}
		case TxnRolledBack:
			if _, err := Rollback(kv, o, l.StartTS, l.IsPrimary(o)); err != nil {
				t.Fatal(err)
			}
		}
	}
	abort := func(tx *modelTxn) {
		tx.failed, tx.stage = true, 4
		for _, k := range tx.prewritten {
			if _, err := Rollback(kv, obj(k), tx.start, k == tx.keys[0]); err != nil {
				t.Fatal(err)
			}
		}
		// The primary's record, even if its lock never arrived.
		if _, err := Rollback(kv, obj(tx.keys[0]), tx.start, true); err != nil {
			t.Fatal(err)
		}
	}

	for step := 0; step < 400; step++ {
		now += uint64(rng.IntN(10))
		switch r := rng.IntN(10); {
		case r < 2 || len(txns) == 0: // begin
			tx := &modelTxn{start: next(), values: map[int]string{}, stopAt: -1, onePhase: rng.IntN(3) == 0}
			tx.keys = rng.Perm(nkeys)[:1+rng.IntN(3)]
			tx.order = rng.Perm(len(tx.keys))
			for _, k := range tx.keys {
				tx.values[k] = fmt.Sprintf("t%d", tx.start)
			}
			if rng.IntN(5) == 0 {
				tx.stopAt = 2 + rng.IntN(2)
			}
			txns = append(txns, tx)
		case r < 7: // a coordinator's next step
			tx := txns[rng.IntN(len(txns))]
			if tx.stage == 4 || tx.stage == tx.stopAt {
				continue
			}
			if tx.onePhase {
				var muts []Mutation
				for _, k := range tx.keys {
					muts = append(muts, Mutation{Obj: obj(k), Kind: LockWrite, Rec: &Record{Inline: []byte(tx.values[k])}})
				}
				c := next()
				if _, _, err := CommitOnePhase(kv, tx.start, c, muts); err != nil {
					tx.failed = true
				} else {
					tx.commit = c
				}
				tx.stage = 4
				continue
			}
			switch tx.stage {
			case 0, 1: // prewrite the next key (in the order order says)
				tx.stage = 1
				k := tx.keys[tx.order[len(tx.prewritten)]]
				m := []Mutation{{Obj: obj(k), Kind: LockWrite, Rec: &Record{Inline: []byte(tx.values[k])}}}
				err := Prewrite(kv, tx.start, obj(tx.keys[0]), int64(now+ttl), m)
				var le *LockedError
				switch {
				case err == nil:
					tx.prewritten = append(tx.prewritten, k)
					if len(tx.prewritten) == len(tx.keys) {
						tx.stage = 2
					}
				case errors.As(err, &le) && le.Lock.StartTS > tx.start:
					// Wait-die: a younger holder; try again later.
				default:
					abort(tx)
				}
			case 2: // commit the primary
				c := next()
				if _, _, err := Commit(kv, obj(tx.keys[0]), tx.start, c, len(tx.keys) > 1); err != nil {
					abort(tx) // rolled back by a reader meanwhile
					continue
				}
				tx.commit, tx.stage = c, 3
			case 3: // resolve the secondaries
				for _, k := range tx.keys[1:] {
					if _, _, err := Commit(kv, obj(k), tx.start, tx.commit, false); err != nil && !errors.Is(err, ErrTxnAborted) {
						t.Fatal(err)
					}
				}
				if err := ClearTxn(kv, obj(tx.keys[0]), tx.start); err != nil {
					t.Fatal(err)
				}
				tx.stage = 4
			}
		default: // a reader meets what locks there are and resolves them
			k := rng.IntN(nkeys)
			l, err := GetLock(kv, obj(k))
			if err != nil {
				t.Fatal(err)
			}
			if l != nil && l.Blocks(0) {
				resolve(obj(k), l, CheckPolicy{Now: int64(now), RollbackExpired: true, RollbackMissing: int64(now) >= l.Expires})
			}
		}
	}
	// Every coordinator gone: readers long after resolve what is left.
	for k := range nkeys {
		if l, err := GetLock(kv, obj(k)); err != nil {
			t.Fatal(err)
		} else if l != nil {
			resolve(obj(k), l, CheckPolicy{Now: 1 << 62, RollbackExpired: true, RollbackMissing: true})
		}
	}
	if ls, err := Locks(kv, keys.SpaceStart(1), keys.SpaceEnd(1), 0, 0); err != nil || len(ls) > 0 {
		t.Fatalf("locks left: %d, %v", len(ls), err)
	}

	// The outcome of each transaction, from its primary.
	type write struct {
		ts    uint64
		value string
	}
	committed := map[int][]write{} // key -> committed writes
	var done []*modelTxn
	for _, tx := range txns {
		st, err := CheckTxn(kv, obj(tx.keys[0]), tx.start, CheckPolicy{})
		if err != nil {
			t.Fatal(err)
		}
		if tx.onePhase && tx.commit != 0 || !tx.onePhase && st.State == TxnCommitted {
			c := tx.commit
			if !tx.onePhase {
				c = st.CommitTS
			}
			if tx.commit != 0 && c != tx.commit {
				t.Fatalf("txn %d committed at %d, its primary says %d", tx.start, tx.commit, c)
			}
			tx.commit = c
			done = append(done, tx)
			for _, k := range tx.keys {
				committed[k] = append(committed[k], write{c, tx.values[k]})
			}
			continue
		}
		if tx.commit != 0 {
			t.Fatalf("txn %d committed at %d, but its primary says %v", tx.start, tx.commit, st.State)
		}
		// Not committed: none of its writes exists.
		for _, k := range tx.keys {
			if rec, err := committedVersion(kv, obj(k), tx.start); err != nil || rec != nil {
				t.Fatalf("txn %d did not commit but %d holds its version %v (%v)", tx.start, k, rec, err)
			}
		}
	}
	// First committer wins.
	for i, a := range done {
		for _, b := range done[i+1:] {
			if a.start < b.commit && b.start < a.commit {
				for _, k := range a.keys {
					if slices.Contains(b.keys, k) {
						t.Fatalf("txns %d..%d and %d..%d overlap and both wrote k%d", a.start, a.commit, b.start, b.commit, k)
					}
				}
			}
		}
	}
	// Reads at every timestamp: the newest committed write at or before it.
	for k := range nkeys {
		ws := committed[k]
		slices.SortFunc(ws, func(a, b write) int { return int(a.ts) - int(b.ts) })
		for at := uint64(100); at <= ts+1; at++ {
			want := ""
			for _, w := range ws {
				if w.ts <= at {
					want = w.value
				}
			}
			rec, err := At(kv, obj(k), at)
			got := ""
			if err == nil {
				got = string(rec.Inline)
			} else if !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("k%d at %d reads %q, the committed transactions say %q", k, at, got, want)
			}
		}
	}
}
