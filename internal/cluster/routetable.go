package cluster

import (
	"context"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/rangeclient"
)

// Routes implements admin.RouteService: the space's ranges as this node
// knows them, each with the node holding its lease (the raft leader of a
// range this node holds a replica of; else the node forwarding last found
// holding it), so a client can send keyed requests straight there.
func (n *Node) Routes(ctx context.Context, name string) (admin.RouteTable, error) {
	s, release, err := n.acquire(ctx, name)
	if err != nil {
		return admin.RouteTable{}, err
	}
	defer release()
	t := admin.RouteTable{Space: s.meta.ID}
	native := map[uint64]string{}
	for _, nd := range n.peers.view() {
		native[nd.ID] = nd.Native
	}
	tab := s.tab.Ranges()
	for i, r := range tab {
		d, rep := r.State() // descriptor and replica from one snapshot
		lead := r.Hint()
		if rep != nil {
			lead = rep.Status().Leader
		}
		// Each route ends where the next starts, as keys are routed (an
		// entry's own end may lag a split).
		rt := admin.Route{Range: d.ID, Epoch: d.Epoch, Start: d.Start, End: rangeclient.End(tab, i, s.meta.ID), Leaseholder: native[lead]}
		for _, id := range d.Replicas {
			if a := native[id]; a != "" {
				rt.Replicas = append(rt.Replicas, a)
			}
		}
		t.Routes = append(t.Routes, rt)
	}
	return t, nil
}

var _ admin.RouteService = (*Node)(nil)
