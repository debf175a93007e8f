package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/query"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// indexRange is one range of the model: its descriptor and state machine.
type indexRange struct {
	d  rangedesc.Range
	sm *StateMachine
}

// TestIndexModel applies random writes (puts with tags, tag changes,
// version deletes, delete markers, pruning retention, transactions) and
// random splits and merges to a space's ranges, and checks after each step
// that the index entries are exactly those the versions imply, and that
// RunQuery at random timestamps answers what a scan of every object's
// visible version answers.
func TestIndexModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { indexModel(t, seed) })
	}
}

func indexModel(t *testing.T, seed uint64) {
	db := openMem(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	const space = 3
	obj := func(i int) []byte { return keys.Object(space, nil, fmt.Appendf(nil, "k%02d", i)) }
	ranges := []*indexRange{{d: rangedesc.Range{ID: 1, Start: keys.SpaceStart(space), End: keys.SpaceEnd(space)}, sm: &StateMachine{}}}
	ranges[0].sm.SetBounds(ranges[0].d)
	nextID := uint64(2)
	rangeOf := func(o []byte) *indexRange {
		for _, r := range ranges {
			if r.d.ContainsKey(o) {
				return r
			}
		}
		t.Fatalf("no range holds %x", o)
		return nil
	}
	run := func(r *indexRange, cmd []byte) any {
		b := db.NewIndexedBatch()
		res := r.sm.Apply(b, cmd)
		if _, isErr := res.(error); isErr {
			b.Close()
			return res
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return res
	}
	colors := []string{"red", "green", "blue", "re"}
	tags := func() map[string]string {
		m := map[string]string{}
		if rng.IntN(4) > 0 {
			m["color"] = colors[rng.IntN(len(colors))]
		}
		if rng.IntN(2) == 0 {
			m["n"] = fmt.Sprint(rng.IntN(5))
		}
		return m
	}
	ts := uint64(100)
	var stamps []uint64
	plans := map[string]int{}
	defer func() {
		if !t.Failed() && (plans[`field equal "doc.n"`] == 0 || plans[`field range "doc.n"`] == 0 || plans[`field prefix "doc.s"`] == 0) {
			t.Errorf("the field indexes served no query: plans %v", plans)
		}
	}()
	declare := func(path string, typ byte, fill bool) {
		for _, r := range ranges {
			for _, op := range []byte{IndexDeclare, IndexFill, IndexReady} {
				if op == IndexFill && !fill {
					continue
				}
				if res, isErr := run(r, (&IndexCmd{Op: op, Start: r.d.Start, End: r.d.End, Path: path, Type: typ}).Encode()).(error); isErr {
					t.Fatalf("index %s op %d: %v", path, op, res)
				}
			}
		}
	}
	declare("n", FieldNumber, false)
	declare("list", FieldString, false)
	for step := range 400 {
		if step == 200 {
			// A field declared over existing documents: filled.
			declare("s", FieldString, true)
			declare("at", FieldTime, true)
		}
		ts += uint64(1 + rng.IntN(3))
		stamps = append(stamps, ts)
		o := obj(rng.IntN(20))
		r := rangeOf(o)
		switch k := rng.IntN(20); {
		case k < 8:
			pol := mvcc.Retention{}
			if rng.IntN(3) == 0 {
				pol = mvcc.Retention{Mode: mvcc.KeepLast, KeepLast: 2}
			}
			rec := &mvcc.Record{Version: ts, Size: int64(rng.IntN(3000)), Tags: tags()}
			if rng.IntN(2) == 0 {
				rec.ContentType = "application/json"
				rec.Inline = fmt.Appendf(nil, `{"n": %d, "s": %q, "list": ["%s", "x"], "at": "2026-11-%02dT00:00:00Z"}`,
					rng.IntN(6), colors[rng.IntN(len(colors))], colors[rng.IntN(len(colors))], 1+rng.IntN(9))
			}
			run(r, (&PutCmd{Obj: o, Rec: rec, Retention: pol}).Encode())
		case k < 10:
			run(r, (&PutCmd{Obj: o, Rec: &mvcc.Record{Version: ts, DeleteMarker: true}}).Encode())
		case k < 12:
			if recs, _, _ := mvcc.Versions(Reader{R: db}, o, 0, 0); len(recs) > 0 {
				v := recs[rng.IntN(len(recs))]
				run(r, (&SetTagsCmd{Obj: o, Version: v.Version, Tags: tags()}).Encode())
			}
		case k < 13:
			if recs, _, _ := mvcc.Versions(Reader{R: db}, o, 0, 0); len(recs) > 0 {
				run(r, (&DeleteVersionCmd{Obj: o, Version: recs[rng.IntN(len(recs))].Version}).Encode())
			}
		case k < 14:
			run(r, (&PruneCmd{Obj: o, Retention: mvcc.Retention{Mode: mvcc.KeepLast, KeepLast: 1}, Now: ts}).Encode())
		case k < 16:
			// A transaction over the keys of one range.
			var muts []mvcc.Mutation
			for _, i := range rng.Perm(20)[:3] {
				if o2 := obj(i); rangeOf(o2) == r {
					muts = append(muts, mvcc.Mutation{Obj: o2, Kind: mvcc.LockWrite, Rec: &mvcc.Record{Size: 7, Tags: tags()}})
				}
			}
			if len(muts) > 0 {
				run(r, (&OnePhaseCmd{StartTS: ts - 1, CommitTS: ts, Muts: muts}).Encode())
			}
		case k < 18:
			// Split the range holding o at o (if o is not its start).
			if bytes.Equal(o, r.d.Start) {
				break
			}
			b := db.NewIndexedBatch()
			left, right := r.d.Clone(), rangedesc.Range{ID: nextID, Start: o, End: r.d.End}
			left.End = o
			nextID++
			if err := r.sm.RekeySplit(b, left, right, true); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			r.d = left
			r.sm.SetBounds(left)
			nr := &indexRange{d: right, sm: &StateMachine{}}
			nr.sm.SetBounds(right)
			ranges = append(ranges, nr)
			slices.SortFunc(ranges, func(a, b *indexRange) int { return bytes.Compare(a.d.Start, b.d.Start) })
		default:
			// Merge the range holding o with its right neighbour.
			i := slices.Index(ranges, r)
			if i+1 == len(ranges) {
				break
			}
			right := ranges[i+1]
			merged := r.d.Clone()
			merged.End = right.d.End
			b := db.NewIndexedBatch()
			if err := r.sm.RekeyMerge(b, merged, right.d); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			r.d = merged
			r.sm.SetBounds(merged)
			ranges = slices.Delete(ranges, i+1, i+2)
		}
		fields := []FieldDecl{{Path: "n", Type: FieldNumber}, {Path: "list", Type: FieldString}}
		if step >= 200 {
			fields = append(fields, FieldDecl{Path: "s", Type: FieldString}, FieldDecl{Path: "at", Type: FieldTime})
		}
		checkIndex(t, db, ranges, fields, step)
		// A query at a random past timestamp, one range at a time, in
		// pages, against a scan of every object.
		asOf := stamps[rng.IntN(len(stamps))]
		filters := []string{`tags.color == "red"`, `tags.color.startsWith("re") && size > 100`,
			`has(tags.n)`, `tags.n >= "2" && tags.n < "4"`, `size < 1500`, `tags.color == "blue" || tags.n == "1"`,
			`doc.n == 3`, `doc.n >= 2 && doc.n < 4.5`, `doc.s == "red"`, `doc.s.startsWith("re")`, `"green" in doc.list`,
			`has(doc.n) && size > 1000`, `timestamp(doc.at) >= timestamp("2026-11-05T00:00:00Z")`, `doc.n > 1 && tags.color == "red"`}
		src := filters[rng.IntN(len(filters))]
		q, err := query.Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, r := range ranges {
			var after []byte
			for {
				p, err := RunQuery(db, QueryOptions{RangeID: r.d.ID, Lower: r.d.Start, Upper: r.d.End, StartAfter: after,
					AsOf: asOf, Limit: 1 + rng.IntN(4), Examine: 2 + rng.IntN(6), Query: q})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range p.Entries {
					got = append(got, fmt.Sprintf("%x@%d", e.Obj, e.Rec.Version))
				}
				plans[p.Plan]++
				if !p.More {
					break
				}
				after = p.Resume
			}
		}
		for i := range 20 {
			rec, err := mvcc.At(Reader{R: db}, obj(i), asOf)
			if err != nil || rec.DeleteMarker {
				continue
			}
			_, _, key, _ := keys.DecodeObject(obj(i))
			if ok, _ := q.Match(query.Input{Key: string(key), Rec: rec}); ok {
				want = append(want, fmt.Sprintf("%x@%d", obj(i), rec.Version))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: %s as of %d (plan %s):\n got %v\nwant %v", step, src, asOf, q.Plan, got, want)
		}
	}
}

// checkIndex compares the index entries with those the versions imply:
// one per tag of each version, under the id of the range holding it.
func checkIndex(t *testing.T, db *pebble.DB, ranges []*indexRange, fields []FieldDecl, step int) {
	t.Helper()
	var want []string
	for _, r := range ranges {
		ents, _, err := mvcc.List(Reader{R: db}, mvcc.ListOptions{Lower: r.d.Start, Upper: r.d.End, AllVersions: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			for name, v := range e.Rec.Tags {
				want = append(want, string(keys.AppendTagEntry(nil, r.d.ID, []byte(name), []byte(v), e.Obj, e.Rec.Version)))
			}
			full, err := mvcc.Exact(Reader{R: db}, e.Obj, e.Rec.Version) // with its content
			if err != nil {
				t.Fatal(err)
			}
			for _, fv := range fieldValues(full, fields) {
				want = append(want, string(keys.AppendIndexEntry(nil, r.d.ID, keys.IndexField, []byte(fv.path), fv.value, e.Obj, e.Rec.Version)))
			}
		}
	}
	slices.Sort(want)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{keys.PrefixIndex}, UpperBound: []byte{keys.PrefixIndex + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []string
	decls := 0
	feed := map[string]bool{}
	for ok := it.First(); ok; ok = it.Next() {
		if it.Key()[9] == kindDecl {
			decls++
			continue
		}
		if it.Key()[9] == keys.IndexChange {
			// The change feed: a log, with entries of versions removed
			// since; each under the range that holds its object.
			id, _, obj, err := keys.DecodeChangeEntry(it.Key())
			if err != nil {
				t.Fatalf("step %d: feed entry %x: %v", step, it.Key(), err)
			}
			i := slices.IndexFunc(ranges, func(r *indexRange) bool { return r.d.ID == id })
			if i < 0 || !ranges[i].d.ContainsKey(obj) {
				t.Fatalf("step %d: feed entry %x is not under the range of its object", step, it.Key())
			}
			feed[string(it.Key())] = true
			continue
		}
		got = append(got, string(it.Key()))
	}
	for _, r := range ranges {
		ents, _, err := mvcc.List(Reader{R: db}, mvcc.ListOptions{Lower: r.d.Start, Upper: r.d.End, AllVersions: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if k := keys.AppendChangeEntry(nil, r.d.ID, e.Rec.Version, e.Obj); !feed[string(k)] {
				t.Fatalf("step %d: version %d of %x has no feed entry in range %d", step, e.Rec.Version, e.Obj, r.d.ID)
			}
		}
	}
	if decls != len(fields)*len(ranges) {
		t.Fatalf("step %d: %d field declarations, want %d on each of %d ranges", step, decls, len(fields), len(ranges))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("step %d: %d index entries, want %d:\n got %x\nwant %x", step, len(got), len(want), got, want)
	}
}

// TestIndexFailedCommit: a transaction command that fails writes nothing,
// index entries included (a commit of a key whose lock is gone fails
// after an earlier key of the same command was committed and pruned).
func TestIndexFailedCommit(t *testing.T) {
	db := openMem(t)
	sm := &StateMachine{}
	a, b := keys.Object(1, nil, []byte("a")), keys.Object(1, nil, []byte("b"))
	run := func(cmd []byte) any {
		batch := db.NewIndexedBatch()
		res := sm.Apply(batch, cmd)
		if err := batch.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return res
	}
	keep1 := mvcc.Retention{Mode: mvcc.KeepLast, KeepLast: 1}
	if _, isErr := run((&PutCmd{Obj: a, Rec: &mvcc.Record{Version: 100, Tags: map[string]string{"color": "red"}}, Retention: keep1}).Encode()).(error); isErr {
		t.Fatal("put failed")
	}
	if err, isErr := run((&PrewriteCmd{StartTS: 150, Primary: a, Expires: 1 << 62, Muts: []mvcc.Mutation{
		{Obj: a, Kind: mvcc.LockWrite, Rec: &mvcc.Record{Tags: map[string]string{"color": "blue"}}, Retention: keep1}}}).Encode()).(error); isErr {
		t.Fatal(err)
	}
	if _, isErr := run((&CommitCmd{StartTS: 150, CommitTS: 200, Objs: [][]byte{a, b}}).Encode()).(error); !isErr {
		t.Fatal("a commit of a key without its lock succeeded")
	}
	q, _ := query.Compile(`tags.color == "red"`)
	p, err := RunQuery(db, QueryOptions{RangeID: 0, AsOf: 1000, Query: q})
	if err != nil || len(p.Entries) != 1 || !p.Indexed {
		t.Fatalf("red after the failed commit: %+v, %v", p, err)
	}
}
