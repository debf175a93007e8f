package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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

// maxTimestampBatch bounds the timestamps one call to the oracle's leader
// fetches.
const maxTimestampBatch = 1024

// tsBatcher lets concurrent requests on a node that does not lead the
// oracle share one call to its leader: while a call is out, requests
// queue; the next call fetches as many timestamps as are waiting (NextN)
// and hands one to each. Every waiter queued before that call was sent, so
// its timestamp is above every one handed out before its request began.
type tsBatcher struct {
	mu      sync.Mutex
	waiting []chan tsResult
	running bool // a goroutine is serving the queue
}

type tsResult struct {
	ts  uint64
	err error
}

// remoteTimestamp gets a timestamp from the oracle's leader, in a batch
// with the other requests waiting for one.
func (n *Node) remoteTimestamp(ctx context.Context) (uint64, error) {
	ch := make(chan tsResult, 1)
	b := &n.tsb
	b.mu.Lock()
	b.waiting = append(b.waiting, ch)
	if !b.running {
		b.running = true
		go n.serveTimestampBatches()
	}
	b.mu.Unlock()
	select {
	case r := <-ch:
		return r.ts, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// serveTimestampBatches fetches timestamps for the queue until it is empty.
func (n *Node) serveTimestampBatches() {
	b := &n.tsb
	for {
		b.mu.Lock()
		batch := b.waiting
		b.waiting = nil
		if len(batch) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		for len(batch) > 0 {
			k := min(len(batch), maxTimestampBatch)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			first, err := n.fetchTimestamps(ctx, k)
			cancel()
			for i, ch := range batch[:k] {
				ch <- tsResult{ts: first + uint64(i), err: err}
			}
			batch = batch[k:]
		}
	}
}

// tsoCallTimeout bounds one call to the oracle's leader. A live oracle
// answers within milliseconds; a dead one (killed, frozen, cut off) would
// otherwise hold every waiting request for a whole dial timeout.
const tsoCallTimeout = 500 * time.Millisecond

// fetchTimestamps reserves k consecutive timestamps on the oracle's leader
// and returns the first, trying until ctx ends. The leader's id is cached
// (n.tsoLeader); the meta service is read again only when the cached
// leader fails to answer. While the meta service still names a leader that
// does not answer (a dead oracle's lease has not run out yet) or names
// this node (its own term is starting or ending), it waits a little and
// reads it again.
func (n *Node) fetchTimestamps(ctx context.Context, k int) (uint64, error) {
	for {
		cached := n.tsoLeader.Load()
		ts, called, err := n.timestampFrom(ctx, cached, k)
		if err == nil {
			return ts, nil
		}
		// A dead or frozen leader must not stay first in line.
		n.tsoLeader.CompareAndSwap(called, 0)
		if ctx.Err() != nil {
			return 0, err
		}
		if cached == 0 && sleep(ctx, 50*time.Millisecond) != nil {
			return 0, err // the meta service's choice failed too: wait before asking again
		}
	}
}

// timestampFrom reserves k timestamps on node id, or on the oracle's
// leader as the meta service names it when id is 0 (and caches it). It
// returns the first and the node it asked.
func (n *Node) timestampFrom(ctx context.Context, id uint64, k int) (uint64, uint64, error) {
	if id == 0 {
		var err error
		if id, err = n.oracleLeader(ctx); err != nil {
			return 0, 0, err
		}
		if id == n.id.NodeID {
			// Our own term is starting (or ending): ask it directly.
			ts, err := n.oracle.NextN(ctx, k)
			return ts, 0, err
		}
		n.tsoLeader.Store(id)
	}
	b, err := callUnlessMoved(ctx, id, n.oracleLeader, func(ctx context.Context) ([]byte, error) {
		return n.callNode(ctx, id, adminService, "Timestamp", binary.BigEndian.AppendUint32(nil, uint32(k)), tsoCallTimeout)
	})
	if err != nil {
		return 0, id, err
	}
	if len(b) != 8 {
		return 0, id, fmt.Errorf("node %d answered a timestamp of %d bytes", id, len(b))
	}
	return binary.BigEndian.Uint64(b), id, nil
}

// oracleRecheck is how long a call to the oracle's leader runs before the
// meta service is asked, and asked again, whether another node leads it.
const oracleRecheck = 100 * time.Millisecond

// errOracleMoved ends a call to a node that no longer leads the oracle.
var errOracleMoved = errors.New("the timestamp oracle has a new leader")

// callUnlessMoved runs call, meant for node id as the oracle's leader.
// While it runs longer than oracleRecheck it reads the oracle's leader
// every oracleRecheck, and ends the call with errOracleMoved as soon as
// another node leads: a frozen or cut-off leader holds a call until its
// timeout, while its successor (once its lease ran out) answers at once.
// A live leader answers within milliseconds and costs no reads.
func callUnlessMoved(ctx context.Context, id uint64, leader func(context.Context) (uint64, error), call func(context.Context) ([]byte, error)) ([]byte, error) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil) // also ends the check below
	check := time.AfterFunc(oracleRecheck, func() {
		for {
			if lead, err := leader(cctx); err == nil && lead != id {
				cancel(errOracleMoved)
				return
			}
			if sleep(cctx, oracleRecheck) != nil {
				return
			}
		}
	})
	defer check.Stop()
	b, err := call(cctx)
	if err != nil && errors.Is(context.Cause(cctx), errOracleMoved) {
		return nil, errOracleMoved
	}
	return b, err
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

// handleTimestamp serves timestamps to another node (a u32 count, else
// one): the first of that many consecutive ones. Only the oracle's leader
// can.
func (n *Node) handleTimestamp(ctx context.Context, req []byte) ([]byte, error) {
	k := 1 // a request without a count asks for one
	if len(req) == 4 {
		k = int(binary.BigEndian.Uint32(req))
	}
	if k < 1 || k > maxTimestampBatch {
		return nil, fmt.Errorf("a batch of %d timestamps is outside [1, %d]", k, maxTimestampBatch)
	}
	ts, err := n.oracle.NextN(ctx, k)
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
	if local == nil || !local.LeadsRaft() || time.Now().Before(n.metaMoveAfter) {
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
		if _, err := n.callNode(ctx, nd.ID, chunkService, "Has", nil, 300*time.Millisecond); err != nil {
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
		n.metaMoveAfter = time.Now().Add(10 * time.Second)
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
