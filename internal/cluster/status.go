package cluster

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// ClusterStatus implements admin.ClusterService.
func (n *Node) ClusterStatus(ctx context.Context) ([]byte, error) {
	rep := admin.ClusterReport{Cluster: n.id.Cluster, Node: n.id.NodeID}
	var err error
	if rep.Epoch, err = n.catalog.MapEpoch(ctx); err != nil {
		return nil, object.Unreachable("meta service", err)
	}
	nodes, err := n.catalog.Nodes(ctx)
	if err != nil {
		return nil, object.Unreachable("meta service", err)
	}
	index := map[uint64]int{}
	for i, nd := range nodes {
		index[nd.ID] = i
		rep.Nodes = append(rep.Nodes, admin.ClusterNode{ID: nd.ID, Native: nd.Native, Peer: nd.Peer, HTTP: nd.HTTP,
			Zone: nd.Zone, State: nd.State, Capacity: nd.Capacity, Started: nd.Started})
	}
	rep.Oracle, _ = n.tso.Leader(ctx) // 0 between terms
	if ms, ok := n.meta.(membership); ok {
		members, err := ms.Members(ctx)
		if err != nil {
			return nil, object.Unreachable("meta service", err)
		}
		for _, m := range members {
			cm := admin.ClusterMember{Name: m.Name, Voter: !m.Learner}
			if len(m.PeerURLs) > 0 {
				cm.PeerURL = m.PeerURLs[0]
			}
			rep.Meta = append(rep.Meta, cm)
		}
	}
	spaces, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return nil, object.Unreachable("meta service", err)
	}
	names := map[uint32]string{}
	for _, sp := range spaces {
		names[sp.ID] = sp.Name
	}
	ranges, err := n.catalog.ListRanges(ctx)
	if err != nil {
		return nil, object.Unreachable("meta service", err)
	}
	// The node last found holding each range's lease (routing's hint).
	hints := map[uint64]uint64{}
	n.mu.RLock()
	for _, sp := range n.mu.spaces {
		for _, r := range sp.tab.Ranges() {
			if h := r.Hint(); h != 0 {
				hints[r.Desc().ID] = h
			}
		}
	}
	n.mu.RUnlock()
	for _, r := range ranges {
		cr := admin.ClusterRange{ID: r.ID, Space: names[r.SpaceID], Start: r.Start, End: r.End, Replicas: r.Replicas, Learners: r.Learners, Epoch: r.Epoch}
		cr.Leader = n.rangeLeader(r, nodes, hints)
		for _, id := range append(slices.Clone(r.Replicas), r.Learners...) {
			if i, ok := index[id]; ok {
				rep.Nodes[i].Replicas++
			}
		}
		if i, ok := index[cr.Leader]; ok && cr.Leader != 0 {
			rep.Nodes[i].Leaders++
		}
		rep.Ranges = append(rep.Ranges, cr)
	}
	rep.GC = n.gcReport(ctx, nodes)
	return json.Marshal(rep)
}

var _ admin.ClusterService = (*Node)(nil)

// rangeLeader is the node leading range r as this node knows it: its own
// replica's raft state; else, for a range of one voter, that voter while
// it is up (it leads itself); else the node last found holding the lease
// (hints); 0 if none is known.
func (n *Node) rangeLeader(r rangedesc.Range, nodes []meta.NodeInfo, hints map[uint64]uint64) uint64 {
	if local := n.ranges.Replica(r.ID); local != nil {
		return local.Status().Leader
	}
	if len(r.Replicas) == 1 {
		if nd, ok := nodeByID(nodes, r.Replicas[0]); ok && nd.State == meta.NodeUp {
			return nd.ID
		}
		return 0
	}
	return hints[r.ID]
}
