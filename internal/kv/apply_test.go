package kv

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/storage"
)

func openMem(t *testing.T) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("db", &pebble.Options{FS: vfs.NewMem(), Comparer: storage.Comparer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// apply runs one command the way a replica does: in an indexed batch that
// is committed only if the command succeeded.
func apply(t *testing.T, db *pebble.DB, cmd []byte) any {
	t.Helper()
	b := db.NewIndexedBatch()
	res := (&StateMachine{}).Apply(b, cmd)
	if _, isErr := res.(error); isErr {
		if !b.Empty() {
			t.Fatalf("rejected command wrote %d bytes to the batch", b.Len())
		}
		b.Close()
		return res
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestPutConditions(t *testing.T) {
	db := openMem(t)
	obj := keys.Object(1, nil, []byte("k"))
	put := func(ver, ifMatch uint64, ifNone bool, marker bool) any {
		c := &PutCmd{Obj: obj, Rec: &mvcc.Record{Version: ver, Size: 1, Inline: []byte("x"), DeleteMarker: marker}, IfMatch: ifMatch, IfNoneMatch: ifNone}
		return apply(t, db, c.Encode())
	}
	if r, ok := put(10, 0, true, false).(*Result); !ok || r.Rec.Parent != 0 {
		t.Fatalf("first put with IfNoneMatch: %v", r)
	}
	if err, _ := put(20, 0, true, false).(error); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("IfNoneMatch on a live key: %v", err)
	}
	if err, _ := put(20, 11, false, false).(error); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("IfMatch on a stale version: %v", err)
	}
	r, ok := put(20, 10, false, false).(*Result)
	if !ok || r.Rec.Parent != 10 {
		t.Fatalf("IfMatch on the latest version: %v", r)
	}
	put(30, 0, false, true) // delete marker
	if r, ok := put(40, 0, true, false).(*Result); !ok || r.Rec.Parent != 30 {
		t.Fatalf("IfNoneMatch after a delete marker must succeed: %v", r)
	}
	rec, err := mvcc.Latest(Reader{R: db}, obj)
	if err != nil || rec.Version != 40 {
		t.Fatalf("latest = %v, %v", rec, err)
	}
	// A version older than the latest is refused: it must not appear below
	// a version readers have already seen as the latest.
	if err, _ := put(35, 0, false, false).(error); !errors.Is(err, mvcc.ErrStaleVersion) {
		t.Fatalf("out-of-order put: %v", err)
	}
	// Removing one version.
	if r, ok := apply(t, db, (&DeleteVersionCmd{Obj: obj, Version: 20}).Encode()).(*Result); !ok || r.Rec.Version != 20 {
		t.Fatalf("delete version: %v", r)
	}
	if _, err := mvcc.Exact(Reader{R: db}, obj, 20); !errors.Is(err, mvcc.ErrNotFound) {
		t.Fatalf("removed version still readable: %v", err)
	}
	// Tags change in place: the same version, the rest of it unchanged.
	tags := map[string]string{"team": "blue"}
	if r, ok := apply(t, db, (&SetTagsCmd{Obj: obj, Version: 10, Tags: tags}).Encode()).(*Result); !ok || r.Rec.Tags["team"] != "blue" {
		t.Fatalf("set tags: %v", r)
	}
	if rec, err := mvcc.Exact(Reader{R: db}, obj, 10); err != nil || rec.Tags["team"] != "blue" || rec.Size != 1 {
		t.Fatalf("tagged version: %+v %v", rec, err)
	}
	if err, _ := apply(t, db, (&SetTagsCmd{Obj: obj, Version: 30, Tags: tags}).Encode()).(error); !errors.Is(err, mvcc.ErrDeleteMarker) {
		t.Fatalf("tagging a delete marker: %v", err)
	}
	if err, _ := apply(t, db, (&SetTagsCmd{Obj: obj, Version: 20, Tags: tags}).Encode()).(error); !errors.Is(err, mvcc.ErrNotFound) {
		t.Fatalf("tagging a removed version: %v", err)
	}
	apply(t, db, (&SetTagsCmd{Obj: obj, Version: 10}).Encode())
	if rec, err := mvcc.Exact(Reader{R: db}, obj, 10); err != nil || rec.Tags != nil {
		t.Fatalf("untagged version: %+v %v", rec, err)
	}
}

func TestCommandRoundTrip(t *testing.T) {
	c := &PutCmd{
		Obj:       keys.Object(7, nil, []byte("a/b")),
		Rec:       &mvcc.Record{Version: 99, StartTS: 99, Size: 3, Inline: []byte("abc"), Meta: map[string]string{"m": "1"}},
		Retention: mvcc.Retention{Mode: mvcc.KeepLast, KeepLast: 3}, IfMatch: 5, IfNoneMatch: true, IfAbsent: true, IfNoVersion: true,
	}
	got, err := decode(c.Encode())
	if err != nil {
		t.Fatal(err)
	}
	g := got.(*PutCmd)
	if string(g.Obj) != string(c.Obj) || g.Rec.Version != 99 || string(g.Rec.Inline) != "abc" || g.Rec.Meta["m"] != "1" ||
		g.Retention != c.Retention || g.IfMatch != 5 || !g.IfNoneMatch || !g.IfAbsent || !g.IfNoVersion {
		t.Fatalf("round trip: %+v", g)
	}
	d := &DeleteVersionCmd{Obj: c.Obj, Version: 12}
	got, err = decode(d.Encode())
	if err != nil || got.(*DeleteVersionCmd).Version != 12 {
		t.Fatalf("delete round trip: %v %v", got, err)
	}
	st := &SetTagsCmd{Obj: c.Obj, Version: 13, Tags: map[string]string{"a": "1", "b": ""}}
	got, err = decode(st.Encode())
	if g, ok := got.(*SetTagsCmd); err != nil || !ok || g.Version != 13 || !maps.Equal(g.Tags, st.Tags) || string(g.Obj) != string(c.Obj) {
		t.Fatalf("set-tags round trip: %+v %v", got, err)
	}
	if _, err := decode(st.Encode()[:len(st.Encode())-1]); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("truncated set-tags: %v", err)
	}
	ch := &ChildCmd{Obj: c.Obj, Version: 14, Child: keys.Object(8, nil, []byte("c"))}
	got, err = decode(ch.Encode())
	if g, ok := got.(*ChildCmd); err != nil || !ok || g.Version != 14 || string(g.Obj) != string(c.Obj) || string(g.Child) != string(ch.Child) {
		t.Fatalf("child round trip: %+v %v", got, err)
	}
	if _, err := decode(ch.Encode()[:len(ch.Encode())-1]); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("truncated child: %v", err)
	}
	pr := &PruneCmd{Obj: c.Obj, Retention: mvcc.Retention{Mode: mvcc.KeepFor, KeepFor: time.Hour}, Now: 77}
	got, err = decode(pr.Encode())
	if g, ok := got.(*PruneCmd); err != nil || !ok || g.Retention != pr.Retention || g.Now != 77 || string(g.Obj) != string(c.Obj) {
		t.Fatalf("prune round trip: %+v %v", got, err)
	}
	if _, err := decode(pr.Encode()[:len(pr.Encode())-1]); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("truncated prune: %v", err)
	}
	pr.SafePoint = true
	got, err = decode(pr.Encode())
	if g, ok := got.(*PruneCmd); err != nil || !ok || !g.SafePoint || g.Now != 77 {
		t.Fatalf("prune at a safe point round trip: %+v %v", got, err)
	}
	if _, err := decode(append(pr.Encode(), 0)); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("prune with a trailing byte: %v", err)
	}
	zero := pr.Encode()
	zero[len(zero)-1] = 0
	if _, err := decode(zero); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("prune with a flag of 0: %v", err)
	}
	// A child entry that names no object is refused and writes nothing.
	db := openMem(t)
	if err, _ := apply(t, db, (&ChildCmd{Obj: c.Obj, Version: 14, Child: []byte("junk")}).Encode()).(error); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("child entry naming no object: %v", err)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	f.Add((&DeleteVersionCmd{Obj: []byte("o"), Version: 1}).Encode())
	f.Add((&SetTagsCmd{Obj: []byte("o"), Version: 1, Tags: map[string]string{"k": "v"}}).Encode())
	f.Add((&PutCmd{Obj: []byte("o"), Rec: &mvcc.Record{Version: 1}}).Encode())
	f.Add((&ChildCmd{Obj: []byte("o"), Version: 1, Child: []byte("c")}).Encode())
	for _, c := range txnCmds() {
		f.Add(c.Encode())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		decode(b) // must not panic
	})
}

// TestCacheDoesNotChangeApply applies the same random commands, in random
// batches, to two state machines, one with a cache and one without: every
// result and the final stored state must be identical.
func TestCacheDoesNotChangeApply(t *testing.T) {
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 3))
		dbs := []*pebble.DB{openMem(t), openMem(t)}
		sms := []*StateMachine{{Cache: NewCache(1 << 20)}, {}}
		objs := [][]byte{keys.Object(1, nil, []byte("a")), keys.Object(1, nil, []byte("b")), keys.Object(1, nil, []byte("c"))}
		next := uint64(100)
		var written []uint64
		var txns []openTxn
		for range 300 {
			cmds := make([][]byte, 1+rng.IntN(5))
			for i := range cmds {
				obj := objs[rng.IntN(len(objs))]
				switch op := rng.IntN(14); {
				case op >= 10:
					next++
					cmds[i] = randomTxnCmd(rng, op, obj, &next, &txns)
				case op < 7:
					next += uint64(1 + rng.IntN(3))
					v := next
					if rng.IntN(8) == 0 {
						v -= uint64(rng.IntN(10)) // sometimes stale or taken
					}
					c := &PutCmd{Obj: obj, Rec: &mvcc.Record{Version: v, Size: 1, Inline: []byte{byte(v)}, DeleteMarker: rng.IntN(6) == 0}}
					switch rng.IntN(6) {
					case 0:
						c.IfNoneMatch = true
					case 1:
						if len(written) > 0 {
							c.IfMatch = written[rng.IntN(len(written))]
						}
					case 2:
						c.Retention = mvcc.Retention{Mode: mvcc.KeepLast, KeepLast: 2}
					}
					written = append(written, v)
					cmds[i] = c.Encode()
				case op < 9:
					v := next
					if len(written) > 0 {
						v = written[rng.IntN(len(written))]
					}
					cmds[i] = (&DeleteVersionCmd{Obj: obj, Version: v}).Encode()
				default:
					v := next
					if len(written) > 0 {
						v = written[rng.IntN(len(written))]
					}
					cmds[i] = (&SetTagsCmd{Obj: obj, Version: v, Tags: map[string]string{"t": fmt.Sprint(rng.IntN(3))}}).Encode()
				}
			}
			var results [2][]string
			for j := range dbs {
				b := dbs[j].NewIndexedBatch()
				for _, cmd := range cmds {
					switch r := sms[j].Apply(b, cmd).(type) {
					case error:
						results[j] = append(results[j], "error "+errClass(r))
					case *Result:
						results[j] = append(results[j], fmtResult(r))
					}
				}
				if err := b.Commit(pebble.NoSync); err != nil {
					t.Fatal(err)
				}
				b.Close()
				sms[j].Committed()
			}
			if !slices.Equal(results[0], results[1]) {
				t.Fatalf("seed %d: with cache %v, without %v", seed, results[0], results[1])
			}
		}
		if a, b := dump(t, dbs[0]), dump(t, dbs[1]); a != b {
			t.Fatalf("seed %d: stored state differs:\n%s\nvs\n%s", seed, a, b)
		}
	}
}

func errClass(err error) string {
	for _, e := range []error{ErrPreconditionFailed, mvcc.ErrStaleVersion, mvcc.ErrVersionExists, mvcc.ErrNotFound, mvcc.ErrDeleteMarker, mvcc.ErrTxnAborted} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}

func dump(t *testing.T, db *pebble.DB) string {
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var sb strings.Builder
	for it.First(); it.Valid(); it.Next() {
		fmt.Fprintf(&sb, "%x=%x\n", it.Key(), it.Value())
	}
	return sb.String()
}

// TestSpansHoldTheRangesWrites: every key a command writes for an object of
// a range is inside the range's spans (so a snapshot carries it), and keys
// of objects outside the range are not.
func TestSpansHoldTheRangesWrites(t *testing.T) {
	db := openMem(t)
	d := rangedesc.Range{Start: keys.ObjectPrefix(1, nil, []byte("b")), End: keys.ObjectPrefix(1, nil, []byte("d"))}
	spans := (&StateMachine{}).Spans(d)
	in := func(k []byte) bool {
		for _, s := range spans {
			if string(k) >= string(s.Start) && string(k) < string(s.End) {
				return true
			}
		}
		return false
	}
	for i, key := range []string{"a", "b", "bzz", "c", "d", "e"} {
		obj := keys.Object(1, nil, []byte(key))
		c := &PutCmd{Obj: obj, Rec: &mvcc.Record{Version: uint64(10 + i), Size: 1, Inline: []byte("x")}}
		apply(t, db, c.Encode())
		// A clone of it in another space: the entry is the parent's.
		child := keys.Object(2, nil, []byte(key))
		apply(t, db, (&ChildCmd{Obj: obj, Version: uint64(10 + i), Child: child}).Encode())
		want := key >= "b" && key < "d"
		for _, k := range [][]byte{keys.Version(obj, uint64(10+i)), keys.Lock(obj), keys.Child(obj, uint64(10+i), child)} {
			if in(k) != want {
				t.Fatalf("key %x of object %q: inside the spans %v, want %v", k, key, in(k), want)
			}
		}
	}
	it, _ := db.NewIter(nil)
	defer it.Close()
	n, feed := 0, 0
	clo, chi := keys.ChangeSpan(d.ID)
	for ok := it.First(); ok; ok = it.Next() {
		switch k := it.Key(); {
		case string(k) >= string(clo) && string(k) < string(chi):
			// The one state machine here applied every object's
			// commands: its change feed (in its id's span) has them all.
			if !in(k) {
				t.Fatalf("change feed entry %x outside the spans", k)
			}
			feed++
		case in(k):
			n++
		}
	}
	if n != 6 || feed != 6 {
		t.Fatalf("%d keys inside the spans, want 6 (versions and child entries of b, bzz, c); %d feed entries, want 6", n, feed)
	}
	last := (&StateMachine{}).Spans(rangedesc.Range{Start: keys.SpaceStart(1)})
	if last[0].End == nil || last[1].End == nil || last[2].End == nil {
		t.Fatalf("open-ended range has unbounded spans: %v", last)
	}
}

// TestBounds: once a StateMachine has bounds, commands for keys outside
// them are refused with ErrWrongRange and write nothing.
func TestBounds(t *testing.T) {
	db := openMem(t)
	m := &StateMachine{}
	lo, mid := keys.Object(1, nil, []byte("a")), keys.Object(1, nil, []byte("m"))
	m.SetBounds(rangedesc.Range{Start: keys.SpaceStart(1), End: mid})
	run := func(obj []byte, c interface{ Encode() []byte }) any {
		b := db.NewIndexedBatch()
		defer b.Close()
		res := m.Apply(b, c.Encode())
		if _, isErr := res.(error); isErr && !b.Empty() {
			t.Fatalf("refused command on %q wrote to the batch", obj)
		}
		return res
	}
	put := func(obj []byte) any {
		return run(obj, &PutCmd{Obj: obj, Rec: &mvcc.Record{Version: 10, Size: 1, Inline: []byte("x")}})
	}
	if _, ok := put(lo).(*Result); !ok {
		t.Fatal("a key inside the bounds was refused")
	}
	for _, obj := range [][]byte{mid, keys.Object(1, nil, []byte("z")), keys.Object(2, nil, []byte("a"))} {
		if err, _ := put(obj).(error); !errors.Is(err, ErrWrongRange) {
			t.Fatalf("put outside the bounds: %v", err)
		}
		if err, _ := run(obj, &DeleteVersionCmd{Obj: obj, Version: 10}).(error); !errors.Is(err, ErrWrongRange) {
			t.Fatalf("delete outside the bounds: %v", err)
		}
		if err, _ := run(obj, &ChildCmd{Obj: obj, Version: 10, Child: lo}).(error); !errors.Is(err, ErrWrongRange) {
			t.Fatalf("child entry outside the bounds: %v", err)
		}
	}
	m.SetBounds(rangedesc.Range{Start: mid}) // unbounded above
	if _, ok := put(keys.Object(2, nil, []byte("a"))).(*Result); !ok {
		t.Fatal("a key above an open bound was refused")
	}
}

// TestSetRecordInOneBatch: records of several sizes written in one batch
// (each encoded into the state machine's reused buffer, one over the size
// it keeps) read back whole after the commit.
func TestSetRecordInOneBatch(t *testing.T) {
	db := openMem(t)
	sm := &StateMachine{}
	sizes := []int{10, 5000, 3, maxScratch + 1, 7}
	b := db.NewIndexedBatch()
	for i, n := range sizes {
		obj := keys.Object(1, nil, []byte{byte('a' + i)})
		body := []byte(strings.Repeat(string(rune('a'+i)), n))
		c := &PutCmd{Obj: obj, Rec: &mvcc.Record{Version: uint64(100 + i), Size: int64(n), Inline: body}}
		if err, ok := sm.Apply(b, c.Encode()).(error); ok {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	sm.Committed()
	for i, n := range sizes {
		rec, err := mvcc.Latest(Reader{R: db}, keys.Object(1, nil, []byte{byte('a' + i)}))
		if err != nil || rec.Version != uint64(100+i) || string(rec.Inline) != strings.Repeat(string(rune('a'+i)), n) {
			t.Fatalf("object %d: %v %v", i, rec, err)
		}
	}
	if cap(sm.scratch) > maxScratch {
		t.Fatalf("kept a %d byte buffer", cap(sm.scratch))
	}
}
