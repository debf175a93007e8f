package mvcc

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/testenv"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// model is the reference: per object key, its versions by timestamp.
type model map[string]map[uint64]*Record

// history returns obj's timestamps newest first.
func (m model) history(obj string) []uint64 {
	h := slices.Collect(maps.Keys(m[obj]))
	slices.SortFunc(h, func(a, b uint64) int { return cmp.Compare(b, a) })
	return h
}

func (m model) at(obj string, ts uint64) *Record {
	for _, v := range m.history(obj) {
		if v <= ts {
			return m[obj][v]
		}
	}
	return nil
}

// keeps is the model's retention rule, written from the spec and not from
// Retention.Prune.
func keeps(p Retention, h []uint64, i int, now uint64) bool {
	switch {
	case i == 0 || p.Mode == KeepAll:
		return true
	case p.Mode == KeepLast:
		return i < p.KeepLast
	default:
		noncurrentSince := tstamp.Time(h[i-1])
		return tstamp.Time(now).Sub(noncurrentSince) < p.KeepFor
	}
}

func sameRec(a, b *Record) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

// listed is rec as a listing returns it: without its content.
func listed(rec *Record) *Record {
	l := *rec
	l.Inline, l.Manifest = nil, nil
	return &l
}

func TestModel(t *testing.T) {
	seed := testenv.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))

	userKeys := []string{"a", "a/", "a/b", "a\x00", "b", "\x00", "\xff", "c"}
	var objs [][]byte
	for _, space := range []uint32{1, 2} {
		for _, k := range userKeys {
			objs = append(objs, keys.Object(space, nil, []byte(k)))
		}
	}
	slices.SortFunc(objs, bytes.Compare)
	policies := []Retention{{}, {Mode: KeepLast, KeepLast: 1}, {Mode: KeepLast, KeepLast: 3},
		{Mode: KeepFor, KeepFor: 5 * time.Millisecond}, {Mode: KeepFor, KeepFor: 20*time.Millisecond + 1}}
	randTS := func() uint64 { return tstamp.Make(int64(1+r.IntN(60)), uint32(r.IntN(3))) }

	for run := range 40 {
		kv, m := NewMemKV(), model{}
		pol := policies[run%len(policies)]
		for step := range 500 {
			obj := objs[r.IntN(len(objs))]
			o := string(obj)
			where := fmt.Sprintf("run %d step %d", run, step)
			switch op := r.IntN(10); {
			case op < 4: // put
				rec := &Record{Version: randTS(), DeleteMarker: r.IntN(4) == 0, Size: int64(r.IntN(100))}
				if r.IntN(2) == 0 {
					rec.Inline = []byte(fmt.Sprint(step))
				}
				if r.IntN(3) == 0 {
					rec.Tags = map[string]string{"step": fmt.Sprint(step)}
				}
				now := rec.Version + uint64(r.IntN(30))<<tstamp.LogicalBits
				p := pol
				if r.IntN(5) == 0 { // a key's policy may change over time
					p = policies[r.IntN(len(policies))]
				}
				want := *rec
				pruned, err := Put(kv, obj, rec, p, now)
				if _, dup := m[o][want.Version]; dup {
					if !errors.Is(err, ErrVersionExists) {
						t.Fatalf("%s: duplicate put: err = %v", where, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: put: %v", where, err)
				}
				if m[o] == nil {
					m[o] = map[uint64]*Record{}
				}
				h := m.history(o)
				want.Parent = 0
				for _, v := range h {
					if v < want.Version {
						want.Parent = v
						break
					}
				}
				want.StartTS = want.Version
				m[o][want.Version] = &want
				var wantPruned []*Record
				h = m.history(o)
				for i, v := range h {
					if !keeps(p, h, i, now) {
						wantPruned = append(wantPruned, m[o][v])
						delete(m[o], v)
					}
				}
				if !sameRec(rec, &want) {
					t.Fatalf("%s: put set record to %+v, want %+v", where, rec, want)
				}
				if len(pruned) != len(wantPruned) {
					t.Fatalf("%s: pruned %d versions, want %d", where, len(pruned), len(wantPruned))
				}
				for i := range pruned {
					if !sameRec(pruned[i], wantPruned[i]) {
						t.Fatalf("%s: pruned[%d] = %+v, want %+v", where, i, pruned[i], wantPruned[i])
					}
				}
			case op == 4: // delete one version
				ts := randTS()
				if h := m.history(o); len(h) > 0 && r.IntN(2) == 0 {
					ts = h[r.IntN(len(h))]
				}
				got, err := DeleteVersion(kv, obj, ts)
				want := m[o][ts]
				delete(m[o], ts)
				checkRead(t, where+": delete-version", got, err, want)
			case op == 5:
				got, err := Latest(kv, obj)
				checkRead(t, where+": latest", got, err, m.at(o, ^uint64(0)))
			case op == 6:
				ts := randTS()
				got, err := At(kv, obj, ts)
				checkRead(t, where+": at", got, err, m.at(o, ts))
				got, err = Exact(kv, obj, ts)
				checkRead(t, where+": exact", got, err, m[o][ts])
			case op == 7: // versions
				var before uint64
				if r.IntN(2) == 0 {
					before = randTS()
				}
				limit := r.IntN(4)
				got, more, err := Versions(kv, obj, before, limit)
				if err != nil {
					t.Fatalf("%s: versions: %v", where, err)
				}
				var want []*Record
				for _, v := range m.history(o) {
					if before == 0 || v < before {
						want = append(want, m[o][v])
					}
				}
				wantMore := limit > 0 && len(want) > limit
				if wantMore {
					want = want[:limit]
				}
				if more != wantMore || len(got) != len(want) {
					t.Fatalf("%s: versions(before=%d, limit=%d) = %d recs more=%t, want %d more=%t",
						where, before, limit, len(got), more, len(want), wantMore)
				}
				for i := range got {
					if !sameRec(got[i], want[i]) {
						t.Fatalf("%s: versions[%d] = %+v, want %+v", where, i, got[i], want[i])
					}
				}
			default: // list
				checkList(t, where, r, kv, m, objs)
			}
		}
		checkConsistent(t, kv)
	}
}

func checkRead(t *testing.T, what string, got *Record, err error, want *Record) {
	t.Helper()
	if want == nil {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: got %+v, %v; want ErrNotFound", what, got, err)
		}
		return
	}
	if err != nil || !sameRec(got, want) {
		t.Fatalf("%s: got %+v, %v; want %+v", what, got, err, want)
	}
}

func checkList(t *testing.T, where string, r *rand.Rand, kv *MemKV, m model, objs [][]byte) {
	t.Helper()
	var o ListOptions
	pick := func() []byte { return objs[r.IntN(len(objs))] }
	switch r.IntN(4) {
	case 0:
		o.Lower, o.Upper = keys.SpaceStart(1), keys.SpaceEnd(1)
	case 1:
		o.Lower = keys.ObjectPrefix(uint32(1+r.IntN(2)), nil, []byte([]string{"a", "a/", "\x00", ""}[r.IntN(4)]))
		o.Upper = keys.PrefixEnd(o.Lower)
	case 2:
		o.Lower, o.Upper = pick(), pick()
	}
	if r.IntN(3) == 0 {
		o.StartAfter = pick()
	}
	o.Limit = r.IntN(5)
	if r.IntN(2) == 0 {
		o.AsOf = tstamp.Make(int64(r.IntN(62)), uint32(r.IntN(3)))
	}
	got, more, err := List(kv, o)
	if err != nil {
		t.Fatalf("%s: list %+v: %v", where, o, err)
	}
	var want []Entry
	for _, obj := range objs {
		if (o.Lower != nil && bytes.Compare(obj, o.Lower) < 0) || (o.Upper != nil && bytes.Compare(obj, o.Upper) >= 0) ||
			(o.StartAfter != nil && bytes.Compare(obj, o.StartAfter) <= 0) {
			continue
		}
		asOf := o.AsOf
		if asOf == 0 {
			asOf = ^uint64(0)
		}
		if rec := m.at(string(obj), asOf); rec != nil && !rec.DeleteMarker {
			want = append(want, Entry{Obj: obj, Rec: listed(rec)})
		}
	}
	wantMore := o.Limit > 0 && len(want) > o.Limit
	if wantMore {
		want = want[:o.Limit]
	}
	if more != wantMore || len(got) != len(want) {
		t.Fatalf("%s: list %+v: %d entries more=%t, want %d more=%t", where, o, len(got), more, len(want), wantMore)
	}
	for i := range got {
		if !bytes.Equal(got[i].Obj, want[i].Obj) || !sameRec(got[i].Rec, want[i].Rec) {
			t.Fatalf("%s: list[%d] = %q %+v, want %q %+v", where, i, got[i].Obj, got[i].Rec, want[i].Obj, want[i].Rec)
		}
	}
}

// checkConsistent asserts that every stored key and value decodes.
func checkConsistent(t *testing.T, kv *MemKV) {
	t.Helper()
	it, _ := kv.NewIter(nil, nil)
	defer it.Close()
	for ok := it.SeekGE(nil); ok; ok = it.Next() {
		if _, _, err := keys.DecodeVersion(it.Key()); err != nil {
			t.Fatalf("key %x: %v", it.Key(), err)
		}
		if _, err := Unmarshal(it.Value()); err != nil {
			t.Fatalf("key %x: %v", it.Key(), err)
		}
	}
}
