package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/replica"
)

// A node's heartbeat is a leadership it holds in the meta service under its
// own name (meta.HeartbeatName), on a lease of Config.HeartbeatTTL that the
// meta client renews. Every node watches the cluster map against the
// heartbeats (watchNodes): a node whose lease ends is suspect, and down
// after Config.DownAfter; a node that heartbeats again is up. Each
// transition is a compare-and-swap on the node's entry, so the nodes agree
// on it however many observe it, and it moves the map epoch.

// keepBeating holds the node's heartbeat until ctx ends, taking it again
// whenever its lease is lost (the meta service was unreachable for longer
// than the TTL).
func (n *Node) keepBeating(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		l, err := n.meta.Campaign(ctx, meta.HeartbeatName(n.id.NodeID), n.cfg.HeartbeatTTL)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, meta.ErrClosed) {
				return
			}
			n.log.Warn("heartbeat: cannot take the lease", "err", err, "retry", backoff)
			if clock.Sleep(ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		n.hbMu.Lock()
		n.heartbeat = l
		n.hbMu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-l.Done():
			n.log.Warn("heartbeat lease lost; taking it again")
		}
	}
}

// stopBeating gives up the heartbeat at once, so that a node that stops
// cleanly is seen suspect without waiting for its lease to run out.
func (n *Node) stopBeating() {
	n.hbMu.Lock()
	l := n.heartbeat
	n.heartbeat = nil
	n.hbMu.Unlock()
	if l != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.Resign(ctx)
	}
}

// watchNodes moves every node of the cluster map to the state its heartbeat
// calls for (meta.NextState).
func (n *Node) watchNodes(ctx context.Context) {
	nodes, err := n.catalog.Nodes(ctx)
	if err != nil {
		return
	}
	live, err := n.catalog.LiveNodes(ctx)
	if err != nil {
		return
	}
	now := n.cfg.Clock()
	for _, nd := range nodes {
		next := meta.NextState(nd.State, live[nd.ID], nd.Since, now, n.cfg.HeartbeatTTL, n.cfg.DownAfter)
		if next == nd.State {
			continue
		}
		if ok, err := n.catalog.SetNodeState(ctx, nd.ID, nd.State, next, now); ok {
			n.log.Info("node state changed", "node", nd.ID, "from", nd.State, "to", next)
			n.peers.forget()
		} else if err != nil {
			n.log.Warn("node state change failed", "node", nd.ID, "to", next, "err", err)
		}
	}
}

// Healthz answers 200 when every range of every space with a replica here
// can serve (the replica leads with a lease, or leads a quiesced group, or
// follows a leader it knows) and the chunk store takes writes; 503 (with
// the ranges that cannot, and the chunk store's error) otherwise.
func (n *Node) Healthz(w http.ResponseWriter, _ *http.Request) {
	type rangeProblem struct {
		Space string `json:"space"`
		Range uint64 `json:"range"`
		Error string `json:"error"`
	}
	problems := []rangeProblem{} // [] rather than null when there are none
	n.mu.RLock()
	for name, s := range n.mu.spaces {
		for _, r := range s.tab.Ranges() {
			rep := r.Replica()
			if rep == nil {
				continue // held by other nodes
			}
			if err := rangeHealth(rep); err != nil {
				problems = append(problems, rangeProblem{name, r.Desc().ID, err.Error()})
			}
		}
	}
	n.mu.RUnlock()
	body := map[string]any{"status": "ok", "node": n.id.NodeID, "problems": problems}
	storeErr := n.chunks.Err()
	if storeErr != nil {
		body["chunk_store"] = storeErr.Error() + " (restart the node to recover)"
	}
	w.Header().Set("Content-Type", "application/json")
	if len(problems) > 0 || storeErr != nil {
		body["status"] = "degraded"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(body)
}

// rangeHealth says why a local replica cannot serve its range, or nil.
func rangeHealth(rep *replica.Replica) error {
	st := rep.Status()
	switch {
	case st.Leader == 0:
		return fmt.Errorf("range %d has no leader", st.RangeID)
	case st.IsLeader && !rep.Leads():
		return rep.ReadReady()
	}
	return nil
}
