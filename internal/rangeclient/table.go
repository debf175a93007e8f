package rangeclient

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
)

// Table is one space's ranges sorted by start key; together they cover
// the space. It is replaced whole (copy-on-write) when the ranges change,
// so a reader's snapshot (Ranges) never changes under it.
type Table struct {
	// Space is the space's id.
	Space uint32
	p     atomic.Pointer[[]*Range]
}

// Ranges returns the ranges, sorted by start key. Shared: do not modify.
func (t *Table) Ranges() []*Range {
	if p := t.p.Load(); p != nil {
		return *p
	}
	return nil
}

// Set replaces the ranges with rs, sorted here by start key.
func (t *Table) Set(rs []*Range) {
	sort.SliceStable(rs, func(i, j int) bool { return bytes.Compare(rs[i].Desc().Start, rs[j].Desc().Start) < 0 })
	t.p.Store(&rs)
}

// Route returns the range that holds object key obj: the one with the
// greatest start at or below it (while a split is being recorded the old,
// wider entry and the new one overlap; the new one starts later).
func (t *Table) Route(obj []byte) *Range {
	rs := t.Ranges()
	i := sort.Search(len(rs), func(i int) bool {
		return bytes.Compare(rs[i].Desc().Start, obj) > 0
	})
	if i == 0 {
		return rs[0]
	}
	return rs[i-1]
}

// ByID returns range id, or nil.
func (t *Table) ByID(id uint64) *Range {
	for _, r := range t.Ranges() {
		if r.Desc().ID == id {
			return r
		}
	}
	return nil
}

// End is where entry i of the snapshot rs (of the table of space) ends as
// keys are routed: at the next entry's start, or at the end of the space.
// An entry's own end may lag a split.
func End(rs []*Range, i int, space uint32) []byte {
	if i+1 < len(rs) {
		return rs[i+1].Desc().Start
	}
	return keys.SpaceEnd(space)
}

// Range is one range of a space with its local replica. Its descriptor
// and replica change together when the range's membership changes;
// readers take both from one snapshot (State).
type Range struct {
	cur atomic.Pointer[state]
	// hint is the node last found holding the range's lease (forward).
	hint atomic.Uint64
	// gone is set when the entry left its table (its range merged away,
	// or the table sync dropped it): a request holding it routes again.
	gone atomic.Bool
	// Load counts the requests this node served as leaseholder.
	Load Load
	ext  any
}

type state struct {
	desc rangedesc.Range
	rep  *replica.Replica // nil when this node holds no replica of the range
}

// NewRange makes a table entry for the range d with its local replica rep
// (nil if none). ext is the owner's own state for the range (Ext).
func NewRange(d rangedesc.Range, rep *replica.Replica, ext any) *Range {
	r := &Range{ext: ext}
	// The load sampler's choices are a function of the range alone, so a
	// test that replays a range's requests samples the same keys.
	r.Load.rnd = rand.New(rand.NewPCG(d.ID, uint64(d.SpaceID)))
	r.cur.Store(&state{desc: d, rep: rep})
	return r
}

// Ext returns the state the entry's owner attached at NewRange.
func (r *Range) Ext() any { return r.ext }

// Desc returns the range's descriptor as this node last read it. Shared:
// do not modify.
func (r *Range) Desc() *rangedesc.Range { return &r.cur.Load().desc }

// Replica returns the local replica, or nil.
func (r *Range) Replica() *replica.Replica { return r.cur.Load().rep }

// State returns the descriptor and the local replica from one snapshot.
func (r *Range) State() (*rangedesc.Range, *replica.Replica) {
	s := r.cur.Load()
	return &s.desc, s.rep
}

// SetState replaces the descriptor and the local replica together.
func (r *Range) SetState(d rangedesc.Range, rep *replica.Replica) {
	r.cur.Store(&state{desc: d, rep: rep})
}

// AdoptDesc stores d, a descriptor the range table recorded, if it is
// newer than the entry's; the replica stays.
func (r *Range) AdoptDesc(d rangedesc.Range) {
	if cur := r.cur.Load(); d.Epoch > cur.desc.Epoch {
		r.cur.Store(&state{desc: d, rep: cur.rep})
	}
}

// Hint returns the node last found holding the lease (0: none known).
func (r *Range) Hint() uint64 { return r.hint.Load() }

// SetHint records node as holding the lease (0 forgets it).
func (r *Range) SetHint(node uint64) { r.hint.Store(node) }

// Gone reports whether the entry left its table.
func (r *Range) Gone() bool { return r.gone.Load() }

// MarkGone marks the entry as out of its table.
func (r *Range) MarkGone() { r.gone.Store(true) }

// LeaseHere reports whether this node holds the lease, to serve a read:
// if it leads a quiesced group, it first renews the lease (see
// replica.AwaitRead).
func (r *Range) LeaseHere(ctx context.Context) bool {
	rep := r.Replica()
	return rep != nil && rep.AwaitRead(ctx) == nil
}

// Leads reports whether this node leads the range, to coordinate it
// (splits, merges, repair, rebalancing).
func (r *Range) Leads() bool {
	rep := r.Replica()
	return rep != nil && rep.Leads()
}

// loadSampleSize is how many keys a range's load sample keeps;
// loadSampleEvery, one in how many requests is sampled.
const (
	loadSampleSize  = 32
	loadSampleEvery = 8
)

// Load counts the requests a range served as leaseholder and samples
// their keys, for the decision to split it (and where).
type Load struct {
	ops  atomic.Int64
	mu   sync.Mutex
	seen int
	rnd  *rand.Rand // under mu; seeded per range (NewRange)
	keys [][]byte
}

// Note counts one request on obj (reservoir-sampling its key).
func (l *Load) Note(obj []byte) {
	n := l.ops.Add(1)
	if n%loadSampleEvery != 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen++
	if len(l.keys) < loadSampleSize {
		l.keys = append(l.keys, slices.Clone(obj))
	} else if i := l.rnd.IntN(l.seen); i < loadSampleSize {
		l.keys[i] = slices.Clone(obj)
	}
}

// Add counts one request with no key of its own (a listing).
func (l *Load) Add() { l.ops.Add(1) }

// Take returns the requests counted and the sampled keys, sorted, since
// the last call, and starts counting again.
func (l *Load) Take() (ops int64, sample [][]byte) {
	ops = l.ops.Swap(0)
	l.mu.Lock()
	sample, l.keys, l.seen = l.keys, nil, 0
	l.mu.Unlock()
	slices.SortFunc(sample, bytes.Compare)
	return ops, sample
}
