package placement

import (
	"slices"
	"time"
)

// RangePlan is what a range's leaseholder knows of the range and the
// nodes, and where that says the range's replicas belong.
type RangePlan struct {
	me       uint64
	state    map[uint64]State // node states; missing: not in the map
	up       []Node           // nodes that are up, in map order
	want     int              // voters wanted
	voters   []uint64
	learners []uint64
	calm     bool // every node has been up for the calm period
	// prefer, when set, is where the range's voters go instead of its
	// own placement: its left-hand neighbour's nodes, so that the two
	// can merge.
	prefer []uint64
}

// NewRangePlan plans for a range with the given voters and learners that
// wants replicas voters, as node me sees the map nodes at now. The nodes
// are calm when every one that has not left has been up for calmFor.
func NewRangePlan(me uint64, replicas int, nodes []Node, voters, learners []uint64, now time.Time, calmFor time.Duration) *RangePlan {
	p := &RangePlan{me: me, state: make(map[uint64]State, len(nodes)), voters: voters, learners: learners, calm: true}
	staying := 0
	for _, nd := range nodes {
		if nd.State != Removed && (nd.State != Up || now.Sub(nd.Since) < calmFor) {
			p.calm = false
		}
		p.state[nd.ID] = nd.State
		if nd.State == Up {
			p.up = append(p.up, nd)
		}
		if nd.State != Draining && nd.State != Removed {
			staying++
		}
	}
	// Down nodes count: a range keeps its dead replica rather than shrink,
	// until another node can take it.
	p.want = max(1, min(replicas, staying))
	return p
}

// Want is how many voters the range should have.
func (p *RangePlan) Want() int { return p.want }

// Calm reports whether every node has been up for the calm period (only
// then does the range rebalance).
func (p *RangePlan) Calm() bool { return p.calm }

// Colocating reports whether the range is being moved onto the nodes of
// its neighbour (Colocate took).
func (p *RangePlan) Colocating() bool { return p.prefer != nil }

// Colocate makes voters (if any) the range's placement, if every node is
// calm, they are as many as the range wants and every one of them is up.
func (p *RangePlan) Colocate(voters []uint64) {
	if !p.calm || len(voters) != p.want {
		return
	}
	for _, v := range voters {
		if p.state[v] != Up {
			return
		}
	}
	p.prefer = voters
}

// order ranks the up nodes for range id, best placed first: by the
// range's own placement, or the preferred nodes first.
func (p *RangePlan) order(id uint64) []uint64 {
	o := Rank(id, p.up, len(p.up))
	p.preferFirst(o)
	return o
}

// preferFirst moves the preferred nodes among ids to the front, keeping
// the order otherwise.
func (p *RangePlan) preferFirst(ids []uint64) {
	if p.prefer != nil {
		slices.SortStableFunc(ids, func(a, b uint64) int {
			return boolInt(!slices.Contains(p.prefer, a)) - boolInt(!slices.Contains(p.prefer, b))
		})
	}
}

// Ideal is where range id's voters belong.
func (p *RangePlan) Ideal(id uint64) []uint64 {
	if p.prefer != nil {
		return p.prefer
	}
	return Rank(id, p.up, p.want)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Usable reports whether node id may keep or receive a replica.
func (p *RangePlan) Usable(id uint64) bool {
	s := p.state[id]
	return s == Up || s == Suspect
}

// Leaving reports whether node id's replicas must move (it is draining,
// removed, or gone from the map).
func (p *RangePlan) Leaving(id uint64) bool {
	s, ok := p.state[id]
	return !ok || s == Draining || s == Removed
}

// Target returns the up node a new replica of range id goes to: the best
// placed one that holds none yet, or 0.
func (p *RangePlan) Target(id uint64) uint64 {
	for _, c := range p.order(id) {
		if !slices.Contains(p.voters, c) && !slices.Contains(p.learners, c) {
			return c
		}
	}
	return 0
}

// Victim returns the voter to remove when there are too many, or a
// leaving one: leaving first, then down, then suspect, then the worst
// placed.
func (p *RangePlan) Victim(id uint64) uint64 {
	best, rank := uint64(0), -1
	order := p.order(id)
	for _, v := range p.voters {
		r := 0
		switch {
		case p.Leaving(v):
			r = 4
		case p.state[v] == Down:
			r = 3
		case p.state[v] == Suspect:
			r = 2
		default:
			r = 1
		}
		if r > rank || (r == rank && slices.Index(order, v) > slices.Index(order, best)) {
			best, rank = v, r
		}
	}
	return best
}

// HandOffTo returns the voter this node should hand the range's lease to
// when it cannot keep it (the preferred nodes first), or 0 if none can
// take it.
func (p *RangePlan) HandOffTo() uint64 {
	voters := slices.Clone(p.voters)
	p.preferFirst(voters)
	for _, v := range voters {
		if v != p.me && p.Usable(v) {
			return v
		}
	}
	return 0
}

// LeaseTarget is the node that should hold range id's lease: of its
// best-placed nodes, the one at position id mod R in node-id order. Range
// ids are handed out in sequence, so a space's ranges deal their leases
// round the nodes that hold them (in a three-node cluster every range is
// on the same three nodes, and the first of a rendezvous ranking put, in
// one run, five of six leases on one node); a range's own ranking would
// spread them only as evenly as chance does.
func LeaseTarget(id uint64, ideal []uint64) uint64 {
	if len(ideal) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ideal))
	return s[id%uint64(len(s))]
}

// FirstMissing returns the first of want that have does not hold, or 0.
func FirstMissing(want, have []uint64) uint64 {
	for _, id := range want {
		if !slices.Contains(have, id) {
			return id
		}
	}
	return 0
}

// SameMembers reports whether a and b hold the same ids.
func SameMembers(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
