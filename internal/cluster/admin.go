package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// Draining and removing a node.
//
// Drain marks the node draining in the cluster map. From then on no new
// chunk or range replica is placed on it; the range repairer of each range
// moves its replicas to other nodes (the node's own leases are handed off
// first); its chunk repairer copies every chunk it holds to the nodes now
// wanted for it, pass after pass while it drains.
//
// Remove takes a node out for good: it must be draining or down, hold no
// range replica, and, if it is still alive, have completed a chunk pass
// that began after every node could have seen it draining (drainSettle
// after the state change), so no chunk written to it by a node with an
// older map is left behind. Its meta service member is removed (the meta
// service shrinks) and its map entry becomes "removed", which it can
// never leave: the node refuses to start again under that id.

// drainSettle is how long after a node starts draining its chunk passes
// count towards removal: longer than any node caches the cluster map.
const drainSettle = 5 * time.Second

// NodeAdmin implements admin.NodeService.
func (n *Node) NodeAdmin(ctx context.Context, action admin.NodeAction, id uint64) error {
	nodes, err := n.catalog.Nodes(ctx)
	if err != nil {
		return object.Unreachable("meta service", err)
	}
	nd, ok := nodeByID(nodes, id)
	if !ok {
		return object.Errorf(object.NotFound, "no node %d in the cluster map (see cairn cluster status)", id)
	}
	switch action {
	case admin.NodeDrain:
		return n.drainNode(ctx, nd)
	case admin.NodeRemove:
		return n.removeNode(ctx, nd)
	case admin.NodeUndrain:
		return n.undrainNode(ctx, nd)
	}
	return object.Errorf(object.InvalidArgument, "unknown node action %d", action)
}

func (n *Node) drainNode(ctx context.Context, nd meta.NodeInfo) error {
	for range 10 {
		switch nd.State {
		case meta.NodeRemoved:
			return object.Errorf(object.InvalidArgument, "node %d was removed from the cluster", nd.ID)
		case meta.NodeDraining:
			return nil
		}
		ok, err := n.catalog.SetNodeState(ctx, nd.ID, nd.State, meta.NodeDraining, n.cfg.Clock())
		if err != nil {
			return object.Unreachable("meta service", err)
		}
		if ok {
			n.log.Info("node draining", "node", nd.ID, "was", nd.State)
			n.peers.forget()
			return nil
		}
		// Its state changed meanwhile: read it again.
		nodes, err := n.catalog.Nodes(ctx)
		if err != nil {
			return object.Unreachable("meta service", err)
		}
		if x, ok := nodeByID(nodes, nd.ID); ok {
			nd = x
		}
	}
	return object.Errorf(object.Unavailable, "node %d keeps changing state; try again", nd.ID)
}

// undrainNode takes a draining node back: it is up again (the health
// watcher marks it suspect if it does not heartbeat). A node in any other
// state but removed is left as it is.
func (n *Node) undrainNode(ctx context.Context, nd meta.NodeInfo) error {
	switch nd.State {
	case meta.NodeRemoved:
		return object.Errorf(object.InvalidArgument, "node %d was removed from the cluster and cannot come back", nd.ID)
	case meta.NodeDraining:
	default:
		return nil
	}
	ok, err := n.catalog.SetNodeState(ctx, nd.ID, meta.NodeDraining, meta.NodeUp, n.cfg.Clock())
	if err != nil {
		return object.Unreachable("meta service", err)
	}
	if !ok {
		return object.Errorf(object.Unavailable, "node %d changed state meanwhile; try again", nd.ID)
	}
	n.log.Info("node undrained", "node", nd.ID)
	n.peers.forget()
	return nil
}

func (n *Node) removeNode(ctx context.Context, nd meta.NodeInfo) error {
	switch {
	case nd.State == meta.NodeRemoved:
		return nil
	case nd.ID == n.id.NodeID:
		return object.Errorf(object.InvalidArgument, "node %d cannot remove itself; ask another node (--server)", nd.ID)
	case nd.State != meta.NodeDraining && nd.State != meta.NodeDown:
		return object.Errorf(object.NotDrained, "node %d is %s; drain it first (cairn node drain %d)", nd.ID, nd.State, nd.ID)
	}
	ranges, err := n.catalog.ListRanges(ctx)
	if err != nil {
		return object.Unreachable("meta service", err)
	}
	if held := heldRanges(ranges, nd.ID); len(held) > 0 {
		return object.Errorf(object.NotDrained, "node %d still holds %d range replicas (ranges %v); they are moving to other nodes", nd.ID, len(held), held)
	}
	live, err := n.catalog.LiveNodes(ctx)
	if err != nil {
		return object.Unreachable("meta service", err)
	}
	if live[nd.ID] {
		// Alive: its chunks are safe only once it has copied them away.
		if since := n.cfg.Clock().Sub(nd.Since); since < drainSettle {
			return object.Errorf(object.NotDrained, "node %d started draining %v ago; its chunks are being copied", nd.ID, since.Round(time.Second))
		}
		b, err := n.callNode(ctx, nd.ID, adminService, "Drained", nil, 10*time.Second)
		if err != nil {
			return object.Errorf(object.NotDrained, "node %d did not say whether its chunks are copied away: %v", nd.ID, err)
		}
		if len(b) != 1 || b[0] != 1 {
			return object.Errorf(object.NotDrained, "node %d is still copying its chunks to other nodes", nd.ID)
		}
	}
	if ms, ok := n.meta.(membership); ok && nd.MetaPeerURL != "" {
		members, err := ms.Members(ctx)
		if err != nil {
			return object.Unreachable("meta service", err)
		}
		for _, m := range members {
			if slices.Contains(m.PeerURLs, nd.MetaPeerURL) {
				if err := ms.RemoveMember(ctx, m.ID); err != nil {
					return object.Unreachable("meta service", fmt.Errorf("remove the meta member of node %d: %w", nd.ID, err))
				}
				n.log.Info("meta service member removed", "node", nd.ID, "member", m.Name)
			}
		}
	}
	ok, err := n.catalog.SetNodeState(ctx, nd.ID, nd.State, meta.NodeRemoved, n.cfg.Clock())
	if err != nil {
		return object.Unreachable("meta service", err)
	}
	if !ok {
		return object.Errorf(object.Unavailable, "node %d changed state meanwhile; try again", nd.ID)
	}
	n.log.Info("node removed from the cluster", "node", nd.ID)
	n.peers.forget()
	return nil
}

func heldRanges(ranges []rangedesc.Range, id uint64) []uint64 {
	var held []uint64
	for _, r := range ranges {
		if r.Holds(id) {
			held = append(held, r.ID)
		}
	}
	return held
}

// handleDrained answers whether this node, draining, has completed a chunk
// repair pass that began drainSettle after it started draining: one byte,
// 1 if so.
func (n *Node) handleDrained(ctx context.Context, _ []byte) ([]byte, error) {
	p := n.chunkPass.Load()
	self, ok := nodeByID(n.peers.view(), n.id.NodeID)
	if p != nil && ok && self.State == meta.NodeDraining && p.draining && p.start.After(self.Since.Add(drainSettle)) {
		return []byte{1}, nil
	}
	return []byte{0}, nil
}

// chunkPass is the last complete chunk repair pass without failures.
type chunkPass struct {
	sig      string // the cluster map's signature it ran for
	start    time.Time
	draining bool // this node was draining in that map
}

var _ admin.NodeService = (*Node)(nil)
