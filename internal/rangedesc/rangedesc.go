// Package rangedesc holds the one description of a range that every layer
// shares: the range table in the meta service records it, a replica knows
// its part of it (id, bounds, voters), and the range client routes by it.
package rangedesc

import (
	"bytes"
	"slices"
)

// Range describes one range of a space.
type Range struct {
	// ID is the range's id, unique in the cluster (0 is reserved).
	ID uint64
	// SpaceID is the space the range belongs to (the range table's; a
	// replica does not know it).
	SpaceID uint32
	// Start and End bound the range's keys: [Start, End). A nil End is
	// unbounded above (the end of the space); an empty Start, below.
	Start, End []byte
	// Replicas are the node ids of the range's voters.
	Replicas []uint64
	// Learners are nodes being added: they receive the range's state and
	// log but do not vote until they are promoted (the range table's).
	Learners []uint64
	// Epoch increases on every change the range table records (split,
	// merge, replica change); it starts at 1. A replica does not know it.
	Epoch uint64
	// Parent is the range this one was split from, 0 for a range made
	// with its space (the range table's). A split-off range is never
	// bootstrapped from the table: its replicas come from the split on
	// the parent's replicas (or, on a node that has none, a snapshot).
	Parent uint64
}

// Clone returns a copy of r that shares no memory with it.
func (r Range) Clone() Range {
	r.Start, r.End = slices.Clone(r.Start), slices.Clone(r.End)
	r.Replicas, r.Learners = slices.Clone(r.Replicas), slices.Clone(r.Learners)
	return r
}

// ContainsKey reports whether key is inside [Start, End); a nil End is
// unbounded, so a range with neither bound contains every key.
func (r *Range) ContainsKey(key []byte) bool {
	return bytes.Compare(key, r.Start) >= 0 && (r.End == nil || bytes.Compare(key, r.End) < 0)
}

// Holds reports whether node id holds a replica of r (voter or learner).
func (r Range) Holds(id uint64) bool {
	return slices.Contains(r.Replicas, id) || slices.Contains(r.Learners, id)
}
