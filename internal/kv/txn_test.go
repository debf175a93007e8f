package kv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
)

func obj(k string) []byte { return keys.Object(1, nil, []byte(k)) }

func txnCmds() []interface{ Encode() []byte } {
	muts := []mvcc.Mutation{
		{Obj: obj("a"), Kind: mvcc.LockWrite, Rec: &mvcc.Record{Size: 1, Inline: []byte("x")}, Retention: mvcc.Retention{Mode: mvcc.KeepLast, KeepLast: 2}},
		{Obj: obj("b"), Kind: mvcc.LockRead, HasExpect: true, Expect: 7},
	}
	return []interface{ Encode() []byte }{
		&PrewriteCmd{StartTS: 10, Primary: obj("a"), Expires: 1234, Muts: muts},
		&CommitCmd{StartTS: 10, CommitTS: 12, Objs: [][]byte{obj("a"), obj("b")}, Record: true},
		&RollbackCmd{StartTS: 10, Objs: [][]byte{obj("a")}, Primary: true},
		&CheckTxnCmd{Primary: obj("a"), StartTS: 10, Policy: mvcc.CheckPolicy{Now: 99, RollbackExpired: true, RollbackMissing: true}},
		&HeartbeatCmd{Primary: obj("a"), StartTS: 10, Expires: -5},
		&OnePhaseCmd{StartTS: 10, CommitTS: 11, Muts: muts},
		&ResolveCmd{Commits: []ResolveCommit{{Obj: obj("a"), StartTS: 10, CommitTS: 12}, {Obj: obj("b"), StartTS: 11, CommitTS: 13}},
			Clears: []ResolveClear{{Primary: obj("c"), StartTS: 9}}},
	}
}

func TestTxnCommandRoundTrip(t *testing.T) {
	for _, c := range txnCmds() {
		b := c.Encode()
		got, err := decode(b)
		if err != nil {
			t.Fatalf("%T: %v", c, err)
		}
		// Records decode with their checksummed encoding only; compare the
		// re-encoding, which is canonical.
		if g := got.(interface{ Encode() []byte }).Encode(); string(g) != string(b) {
			t.Fatalf("%T: round trip changed it: %+v", c, got)
		}
		if reflect.TypeOf(got) != reflect.TypeOf(c) {
			t.Fatalf("%T decoded as %T", c, got)
		}
		if _, err := decode(b[:len(b)-1]); !errors.Is(err, ErrBadCommand) {
			t.Fatalf("%T truncated: %v", c, err)
		}
	}
	dup := &CommitCmd{StartTS: 1, CommitTS: 2, Objs: [][]byte{obj("a"), obj("a")}}
	if _, err := decode(dup.Encode()); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("a key twice: %v", err)
	}
	none := &RollbackCmd{StartTS: 1}
	if _, err := decode(none.Encode()); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("no keys: %v", err)
	}
}

func TestFootprint(t *testing.T) {
	put := &PutCmd{Obj: obj("a"), Rec: &mvcc.Record{Version: 77}}
	if ts, ok := Footprint(put.Encode()); !ok || ts != 77 {
		t.Fatalf("put: %d %v", ts, ok)
	}
	one := &OnePhaseCmd{StartTS: 5, CommitTS: 9, Muts: []mvcc.Mutation{{Obj: obj("a"), Kind: mvcc.LockRead}}}
	if ts, ok := Footprint(one.Encode()); !ok || ts != 9 {
		t.Fatalf("one-phase: %d %v", ts, ok)
	}
	for _, c := range []interface{ Encode() []byte }{&CommitCmd{StartTS: 1, CommitTS: 2, Objs: [][]byte{obj("a")}}, &DeleteVersionCmd{Obj: obj("a"), Version: 3}} {
		if _, ok := Footprint(c.Encode()); ok {
			t.Fatalf("%T has no footprint", c)
		}
	}
}

// TestLocksHoldWriters: a plain write waits for a lock (of either kind),
// and a failed multi-key command writes nothing (apply checks the batch).
func TestLocksHoldWriters(t *testing.T) {
	db := openMem(t)
	pw := &PrewriteCmd{StartTS: 10, Primary: obj("a"), Expires: 100, Muts: []mvcc.Mutation{
		{Obj: obj("a"), Kind: mvcc.LockWrite, Rec: &mvcc.Record{Size: 1, Inline: []byte("A")}},
		{Obj: obj("b"), Kind: mvcc.LockRead},
	}}
	if r := apply(t, db, pw.Encode()); !isResult(r) {
		t.Fatalf("prewrite: %v", r)
	}
	for _, k := range []string{"a", "b"} {
		put := &PutCmd{Obj: obj(k), Rec: &mvcc.Record{Version: 20, Size: 1, Inline: []byte("p")}}
		var le *mvcc.LockedError
		if err, _ := apply(t, db, put.Encode()).(error); !errors.As(err, &le) || le.Lock.StartTS != 10 {
			t.Fatalf("put on locked %s: %v", k, err)
		}
	}
	// c was never locked: the commit of a, b, c fails whole.
	bad := &CommitCmd{StartTS: 10, CommitTS: 15, Objs: [][]byte{obj("a"), obj("b"), obj("c")}, Record: true}
	if err, _ := apply(t, db, bad.Encode()).(error); !errors.Is(err, mvcc.ErrTxnAborted) {
		t.Fatalf("commit with a key never locked: %v", err)
	}
	good := &CommitCmd{StartTS: 10, CommitTS: 15, Objs: [][]byte{obj("a"), obj("b")}, Record: true}
	r, ok := apply(t, db, good.Encode()).(*Result)
	if !ok || r.Rec == nil || r.Rec.Version != 15 || r.Recs[1] != nil {
		t.Fatalf("commit: %+v", r)
	}
	put := &PutCmd{Obj: obj("b"), Rec: &mvcc.Record{Version: 20, Size: 1, Inline: []byte("p")}}
	if r := apply(t, db, put.Encode()); !isResult(r) {
		t.Fatalf("put after commit: %v", r)
	}
	st, ok := apply(t, db, (&CheckTxnCmd{Primary: obj("a"), StartTS: 10}).Encode()).(*Result)
	if !ok || st.Status.State != mvcc.TxnCommitted || st.Status.CommitTS != 15 {
		t.Fatalf("status: %+v", st)
	}
	if r := apply(t, db, (&ResolveCmd{Clears: []ResolveClear{{Primary: obj("a"), StartTS: 10}}}).Encode()); !isResult(r) {
		t.Fatalf("clear: %v", r)
	}
}

func isResult(v any) bool { _, ok := v.(*Result); return ok }

type openTxn struct {
	start uint64
	obj   []byte
}

// randomTxnCmd is a transaction command for TestCacheDoesNotChangeApply:
// op 10 prewrites obj, 11 commits and 12 rolls back an open transaction,
// 13 commits obj in one phase.
func randomTxnCmd(rng *rand.Rand, op int, o []byte, next *uint64, txns *[]openTxn) []byte {
	rec := &mvcc.Record{Size: 1, Inline: []byte{byte(*next)}, DeleteMarker: rng.IntN(6) == 0}
	kind := mvcc.LockWrite
	if rng.IntN(4) == 0 {
		kind, rec = mvcc.LockRead, nil
	}
	mut := []mvcc.Mutation{{Obj: o, Kind: kind, Rec: rec}}
	switch {
	case op == 10 || (op < 13 && len(*txns) == 0):
		*txns = append(*txns, openTxn{*next, o})
		return (&PrewriteCmd{StartTS: *next, Primary: o, Expires: 1, Muts: mut}).Encode()
	case op == 11 || op == 12:
		i := rng.IntN(len(*txns))
		tx := (*txns)[i]
		*txns = append((*txns)[:i], (*txns)[i+1:]...)
		if op == 11 {
			return (&CommitCmd{StartTS: tx.start, CommitTS: *next, Objs: [][]byte{tx.obj}, Record: true}).Encode()
		}
		return (&RollbackCmd{StartTS: tx.start, Objs: [][]byte{tx.obj}, Primary: true}).Encode()
	}
	*next++
	return (&OnePhaseCmd{StartTS: *next - 1 - uint64(rng.IntN(3)), CommitTS: *next, Muts: mut}).Encode()
}

func fmtResult(r *Result) string {
	var b strings.Builder
	for _, rec := range append([]*mvcc.Record{r.Rec}, r.Recs...) {
		if rec != nil {
			fmt.Fprintf(&b, "version %d parent %d; ", rec.Version, rec.Parent)
		}
	}
	fmt.Fprintf(&b, "pruned %d status %+v", len(r.Pruned), r.Status)
	return b.String()
}

// TestAppendRecordMatchesAppendBytes checks the in-place encoding of a
// command's records against encoding each apart, across the lengths where
// the length prefix grows a byte (127/128, 16383/16384).
func TestAppendRecordMatchesAppendBytes(t *testing.T) {
	for _, n := range []int{0, 1, 60, 70, 80, 16250, 16300, 16400, 70000} {
		rec := &mvcc.Record{Size: int64(n), ETag: "e", Inline: []byte(strings.Repeat("x", n)), Meta: map[string]string{"k": "v"}}
		prefix := []byte("prefix")
		got := appendRecord(append([]byte(nil), prefix...), rec)
		want := appendBytes(append([]byte(nil), prefix...), rec.Marshal())
		if string(got) != string(want) {
			t.Fatalf("inline %d: appendRecord differs from appendBytes of Marshal (%d vs %d bytes)", n, len(got), len(want))
		}
	}
	if got := appendRecord([]byte("p"), nil); string(got) != "p\x00" {
		t.Fatalf("nil record: %q", got)
	}
}
