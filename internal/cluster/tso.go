package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tso"
)

// handleTimestamp serves timestamps to another node (a u32 count, else
// one): the first of that many consecutive ones. Only the oracle's leader
// can.
func (n *Node) handleTimestamp(ctx context.Context, req []byte) ([]byte, error) {
	k := 1 // a request without a count asks for one
	if len(req) == 4 {
		k = int(binary.BigEndian.Uint32(req))
	}
	ts, err := n.tso.Serve(ctx, k)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint64(nil, ts), nil
}

// reserveTimestamps asks node id for k timestamps (its handleTimestamp).
func (n *Node) reserveTimestamps(ctx context.Context, id uint64, k int) (uint64, error) {
	b, err := n.callNode(ctx, id, adminService, "Timestamp", binary.BigEndian.AppendUint32(nil, uint32(k)), tso.CallTimeout)
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("node %d answered a timestamp of %d bytes", id, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// oracleOffMetaLeader moves the meta service's raft leadership away from
// this node while it also serves the timestamp oracle: a node that led
// both would, when it died, hold up every write for the meta service's
// election and then for the oracle's lease, which the new etcd leader
// extends by a whole TTL when it takes over. Apart, a dead oracle's lease
// runs out on a live etcd leader (2s), and a dead etcd leader's election
// does not wait for the oracle's lease. Run every 500ms.
func (n *Node) oracleOffMetaLeader(ctx context.Context) {
	if !n.servesOracle() {
		return
	}
	local := n.localMember()
	if local == nil || !local.LeadsRaft() || n.cfg.Clock().Before(n.metaMoveAfter) {
		return
	}
	// While a transfer runs the meta service takes no writes, and one to
	// a node that does not answer (killed, paused, cut off but not yet
	// suspect in the map) runs until it times out: only a node that
	// answers a call right now is asked, and a failure waits 10s.
	for _, nd := range n.peers.view() {
		if nd.ID == n.id.NodeID || nd.State != meta.NodeUp {
			continue
		}
		if _, err := n.callNode(ctx, nd.ID, object.ChunkService, "Has", nil, 300*time.Millisecond); err != nil {
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, time.Second)
		err := local.MoveLeader(mctx, memberName(nd.ID))
		cancel()
		if err == nil {
			n.log.Info("moved the meta service's leadership off the oracle's node", "to", nd.ID)
			return
		}
		n.log.Debug("move the meta service's leadership", "to", nd.ID, "err", err)
		if errors.Is(err, meta.ErrNotVoter) {
			continue // (a node whose member is still a learner)
		}
		n.metaMoveAfter = n.cfg.Clock().Add(10 * time.Second)
		return
	}
}

// localMember returns the node's own etcd member's store, or nil if the
// node runs none.
func (n *Node) localMember() *meta.EtcdStore {
	if m := n.member.Load(); m != nil {
		return m
	}
	local, _ := n.meta.(*meta.EtcdStore)
	return local
}

// servesOracle reports whether this node serves the timestamp oracle now.
func (n *Node) servesOracle() bool {
	select {
	case <-n.oracle.TermDone():
		return false
	default:
		return true
	}
}
