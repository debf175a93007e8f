package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
)

// Deleting a space must not lose a write: one acknowledged after the
// emptiness check would be gone with the space. Every object operation
// holds its space's gate shared on the node that took it, for its whole
// length (forwarding to a leaseholder included). So a delete fences the
// space on every node of the cluster first: the space's catalog state
// becomes fencing (a node opening the space from then on refuses it), and
// each node takes the gate exclusively, which waits for the operations in
// flight there, and marks the space fenced, which refuses new ones. Only
// then does it check that the space is empty; if it is not, or a node
// cannot be fenced, the space goes back to active and every node lifts
// its fence (a node that misses that lifts it when it reads the catalog).

// fenceWait bounds how long one node may take to fence a space: the
// operations in flight there must end first (an upload, say).
const fenceWait = 30 * time.Second

// staleFence is how long a space may stay fencing before any node takes
// it back to active: its delete stopped half-way (its node died).
const staleFence = 2 * time.Minute

// fenceEverywhere fences space name on every node of the cluster map that
// has not left it. A node that cannot be reached fails it, even one the
// map marks down: a node cut off from the meta service may still take
// writes. Such a node must come back, or be removed, before the delete.
func (n *Node) fenceEverywhere(ctx context.Context, name string) error {
	if err := n.fenceOn(ctx, n.id.NodeID, name, true); err != nil {
		return fmt.Errorf("this node: %w", err)
	}
	for _, nd := range n.peers.view() {
		if nd.State == meta.NodeRemoved || nd.ID == n.id.NodeID {
			continue
		}
		if err := n.fenceOn(ctx, nd.ID, name, true); err != nil {
			return fmt.Errorf("node %d (%s) did not confirm: %w; bring it back, or remove it (cairn node remove %d), and delete again", nd.ID, nd.State, err, nd.ID)
		}
	}
	return nil
}

// unfenceEverywhere lifts the fence of space name on every node it can
// reach; the others lift it when they next read the catalog.
func (n *Node) unfenceEverywhere(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), fenceWait)
	defer cancel()
	_ = n.fenceOn(ctx, n.id.NodeID, name, false)
	for _, nd := range n.peers.view() {
		if nd.State == meta.NodeRemoved || nd.ID == n.id.NodeID {
			continue
		}
		if err := n.fenceOn(ctx, nd.ID, name, false); err != nil {
			n.log.Info("could not lift a space's fence on a node; it does when it next reads the catalog", "space", name, "node", nd.ID, "err", err)
		}
	}
}

// fenceOn sets (or lifts) the fence of space name on node id.
func (n *Node) fenceOn(ctx context.Context, id uint64, name string, on bool) error {
	req := append([]byte{0}, name...)
	if on {
		req[0] = 1
	}
	if id == n.id.NodeID {
		ctx, cancel := context.WithTimeout(ctx, fenceWait)
		defer cancel()
		_, err := n.handleFenceSpace(ctx, req)
		return err
	}
	_, err := n.callNode(ctx, id, adminService, "FenceSpace", req, fenceWait)
	return err
}

// handleFenceSpace fences (first byte 1) or unfences (0) the space named
// by the rest of the request on this node. Fencing answers once the
// operations in flight on the space here have ended.
func (n *Node) handleFenceSpace(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) < 2 || req[0] > 1 {
		return nil, errors.New("fence space: the request is not a flag and a space name")
	}
	on, name := req[0] == 1, string(req[1:])
	n.mu.RLock()
	s := n.mu.spaces[name]
	n.mu.RUnlock()
	if s == nil {
		// Not open here: no operation is in flight, and opening it reads
		// the catalog's state, which is not active while fenced.
		return nil, nil
	}
	// On a timeout the delete that asked gives up and lifts its fences.
	if err := lockGate(ctx, s); err != nil {
		return nil, fmt.Errorf("space %q: %w", name, err)
	}
	s.fenced = on
	s.gate.Unlock()
	return nil, nil
}

// liftStaleFence, for space sp as the catalog had it and s as this node
// has it open, lifts s's fence when the catalog says the space is active,
// and takes a space fencing for longer than staleFence back to active.
//
// sp may be older than a delete that began since: the decision is taken
// on one fresh read, made while holding the gate, which a fence takes too
// (and a delete moves the catalog to fencing before it fences).
func (n *Node) liftStaleFence(ctx context.Context, sp meta.Space, s *space) {
	s.gate.RLock()
	fenced := s.fenced
	s.gate.RUnlock()
	if !fenced && sp.State != meta.SpaceFencing {
		return
	}
	if fenced {
		s.gate.Lock()
		defer s.gate.Unlock()
	}
	cur, err := n.catalog.GetSpace(ctx, sp.Name)
	if err != nil || cur.ID != s.meta.ID {
		return
	}
	if cur.State == meta.SpaceFencing && !cur.Since.IsZero() && n.cfg.Clock().Sub(cur.Since) > staleFence {
		// Only if no delete moved it since this read.
		if err := n.catalog.MoveSpaceStateSince(ctx, sp.Name, meta.SpaceFencing, meta.SpaceActive, cur.Since); err == nil {
			n.log.Warn("a space's delete stopped half-way; the space takes writes again", "space", sp.Name)
			cur.State = meta.SpaceActive
		}
	}
	if fenced && cur.State == meta.SpaceActive {
		s.fenced = false
	}
}

// errFenced is what an operation on a fenced space gets.
func errFenced(name string) error {
	return object.Errorf(object.Unavailable, "space %q is being deleted; if the delete fails, it takes requests again", name)
}
