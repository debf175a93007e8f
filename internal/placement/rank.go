package placement

import (
	"sort"
	"time"
)

// State is a node's state in the cluster map, as placement weighs it.
type State uint8

const (
	Up       State = iota + 1 // heartbeating
	Suspect                   // missed heartbeats; keeps what it holds
	Down                      // gone past the down timeout
	Draining                  // being emptied before it leaves
	Removed                   // left the cluster for good
)

// Node is a node as placement sees it.
type Node struct {
	ID    uint64
	Zone  string    // the failure domain replicas are spread over
	State State     // Rank ignores it
	Since time.Time // when State last changed; Rank ignores it
}

// Rank orders nodes for key by rendezvous hashing and returns the best r
// (all of them if fewer), taking at most one node per zone until every
// zone has one. The result is in preference order; the same inputs give
// the same answer, and adding a node moves only the keys that now prefer
// it.
func Rank(key uint64, nodes []Node, r int) []uint64 {
	type scored struct {
		id    uint64
		zone  string
		score uint64
	}
	cands := make([]scored, 0, len(nodes))
	for _, n := range nodes {
		cands = append(cands, scored{n.ID, n.Zone, rendezvous(key, n.ID)})
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].score != cands[j].score {
			return cands[i].score > cands[j].score
		}
		return cands[i].id < cands[j].id
	})
	r = min(r, len(cands))
	out := make([]uint64, 0, r)
	taken := make(map[uint64]bool, r)
	zones := make(map[string]bool, r)
	for _, c := range cands { // first pass: one per zone
		if len(out) == r {
			break
		}
		if !zones[c.zone] {
			zones[c.zone] = true
			taken[c.id] = true
			out = append(out, c.id)
		}
	}
	for _, c := range cands { // then the best of the rest
		if len(out) == r {
			break
		}
		if !taken[c.id] {
			taken[c.id] = true
			out = append(out, c.id)
		}
	}
	return out
}

// rendezvous scores node for key: a full 64-bit mix of both, so that every
// bit of either moves the whole score (FNV over the concatenation does not:
// ids that differ only in low bits kept one order for most keys).
func rendezvous(key, node uint64) uint64 {
	return mix64(key ^ mix64(node+0x9e3779b97f4a7c15))
}

// mix64 is splitmix64's finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
