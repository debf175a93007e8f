package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/meta"
)

// timestamp returns a timestamp above every one handed out before in the
// cluster: from this node's oracle while it leads, else from the leader's
// over the peer service.
func (n *Node) timestamp(ctx context.Context) (uint64, error) {
	ts, err := n.oracle.Next(ctx)
	if err == nil || !errors.Is(err, meta.ErrNotLeader) {
		return ts, err
	}
	return n.remoteTimestamp(ctx)
}

// remoteTimestamp asks the oracle's leader for a timestamp. The leader's
// id is cached (n.tsoLeader); the meta service is read again only when
// the cached leader fails to answer, and then the call is made once more
// (if the caller's deadline allows).
func (n *Node) remoteTimestamp(ctx context.Context) (uint64, error) {
	cached := n.tsoLeader.Load()
	ts, err := n.timestampFrom(ctx, cached)
	if err == nil || cached == 0 {
		return ts, err
	}
	// Forget the leader even when our caller gave up first: a dead or
	// frozen leader makes every call wait until its caller's deadline, and
	// keeping it cached would send every later request to wait there too.
	n.tsoLeader.CompareAndSwap(cached, 0)
	if ctx.Err() != nil {
		return ts, err
	}
	return n.timestampFrom(ctx, 0)
}

// timestampFrom gets a timestamp from node id, or from the oracle's
// leader as the meta service names it when id is 0 (and caches it).
func (n *Node) timestampFrom(ctx context.Context, id uint64) (uint64, error) {
	if id == 0 {
		var err error
		if id, err = n.oracleLeader(ctx); err != nil {
			return 0, err
		}
		if id == n.id.NodeID {
			return 0, meta.ErrNotLeader // our own term is starting or ending
		}
		n.tsoLeader.Store(id)
	}
	b, err := n.callNode(ctx, id, adminService, "Timestamp", nil, 2*time.Second)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("node %d answered a timestamp of %d bytes", id, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// oracleLeader is the id of the node leading the timestamp oracle, as the
// meta service names it.
func (n *Node) oracleLeader(ctx context.Context) (uint64, error) {
	name, err := meta.Leader(ctx, n.meta, "tso")
	if err != nil {
		return 0, fmt.Errorf("find the timestamp oracle's leader: %w", err)
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(name, "node-"), 10, 64)
	if err != nil || !strings.HasPrefix(name, "node-") {
		return 0, fmt.Errorf("the timestamp oracle's leader is %q, not a node", name)
	}
	return id, nil
}

// handleTimestamp serves a timestamp to another node; only the oracle's
// leader can.
func (n *Node) handleTimestamp(ctx context.Context, _ []byte) ([]byte, error) {
	ts, err := n.oracle.Next(ctx)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint64(nil, ts), nil
}

// keepOracle campaigns for the oracle's leadership whenever this node does
// not hold it, so that the oracle moves to a live node when its leader's
// lease ends. It returns when ctx ends.
func (n *Node) keepOracle(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.oracle.TermDone():
		}
		if err := n.oracle.Start(ctx); err != nil {
			if ctx.Err() != nil || errors.Is(err, meta.ErrClosed) {
				return
			}
			n.log.Warn("timestamp oracle campaign failed", "err", err, "retry", backoff)
			if sleep(ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}
