package meta

import (
	"sort"
)

// DefaultReplicas is a space's replication factor when its settings do not
// say: three copies, capped by the number of nodes.
const DefaultReplicas = 3

// PlaceReplicas picks the nodes that hold range rangeID: r of the given
// nodes (all of them if fewer), chosen by rendezvous hashing of the range
// id over node ids, taking at most one node per zone until every zone has
// one. The result is in preference order; the same inputs give the same
// answer, and adding a node moves only the ranges that now prefer it.
func PlaceReplicas(rangeID uint64, nodes []NodeInfo, r int) []uint64 {
	type scored struct {
		n     NodeInfo
		score uint64
	}
	cands := make([]scored, 0, len(nodes))
	for _, n := range nodes {
		cands = append(cands, scored{n, rendezvous(rangeID, n.ID)})
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].score != cands[j].score {
			return cands[i].score > cands[j].score
		}
		return cands[i].n.ID < cands[j].n.ID
	})
	r = min(r, len(cands))
	out := make([]uint64, 0, r)
	taken := map[uint64]bool{}
	zones := map[string]bool{}
	for _, c := range cands { // first pass: one per zone
		if len(out) == r {
			break
		}
		if !zones[c.n.Zone] {
			zones[c.n.Zone] = true
			taken[c.n.ID] = true
			out = append(out, c.n.ID)
		}
	}
	for _, c := range cands { // then the best of the rest
		if len(out) == r {
			break
		}
		if !taken[c.n.ID] {
			taken[c.n.ID] = true
			out = append(out, c.n.ID)
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
