package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
)

// The chunk repairer restores every chunk's copies to the first R nodes of
// its ranking over the nodes that are not down or draining (R is the
// largest replication factor of any space: a chunk does not know which
// spaces refer to it). Every node runs it over its own chunks whenever the
// cluster map's membership or states change (and once after it starts):
// for a batch of local chunks it asks each wanted node which it holds
// (Chunk/Has), and for each chunk the best-ranked wanted node that holds
// it (or, when none does, every holder) copies it to the wanted nodes that
// lack it. A suspect node is still wanted and presumed to hold its copies,
// so a restart does not set off a copy; once it is down, the next node of
// the ranking is wanted instead. Copies on nodes no longer wanted stay
// until garbage collection exists.

// repairBatch is how many chunks one Has round asks about.
const repairBatch = 512

// repairStats counts one repair pass.
type repairStats struct {
	Checked, Copied int
	Bytes           int64
	Failed          int
}

// repairStep runs a repair pass when the cluster map changed since the
// last complete one.
func (n *Node) repairStep(ctx context.Context) {
	nodes := n.peers.view()
	sig := mapSignature(nodes)
	// A draining node passes again and again: a node with an older map
	// may still have written a chunk to it.
	self, ok := nodeByID(nodes, n.id.NodeID)
	draining := ok && self.State == meta.NodeDraining
	if last := n.chunkPass.Load(); sig == "" || last != nil && last.sig == sig && !draining {
		return
	}
	start := n.cfg.Clock()
	st, err := n.repairChunks(ctx, nodes)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("chunk repair pass stopped; it runs again", "err", err, "checked", st.Checked, "copied", st.Copied)
		}
		return
	}
	if st.Failed == 0 {
		n.chunkPass.Store(&chunkPass{sig: sig, start: start, draining: draining})
	}
	if st.Copied > 0 || st.Failed > 0 {
		n.log.Info("chunk repair pass", "checked", st.Checked, "copied", st.Copied, "bytes", st.Bytes,
			"failed", st.Failed, "took", n.cfg.Clock().Sub(start).Round(time.Millisecond))
	}
}

// nodeByID finds node id in the cluster map.
func nodeByID(nodes []meta.NodeInfo, id uint64) (meta.NodeInfo, bool) {
	i := slices.IndexFunc(nodes, func(nd meta.NodeInfo) bool { return nd.ID == id })
	if i < 0 {
		return meta.NodeInfo{}, false
	}
	return nodes[i], true
}

// mapSignature identifies the membership and states of the map.
func mapSignature(nodes []meta.NodeInfo) string {
	var b strings.Builder
	for _, nd := range nodes {
		fmt.Fprintf(&b, "%d:%s;", nd.ID, nd.State)
	}
	return b.String()
}

// repairRanking ranks the nodes that may hold a chunk for repair: those
// neither down nor draining.
func (n *Node) repairRanking(h chunk.Hash, nodes []meta.NodeInfo) []uint64 {
	return n.plane.Rank(h, nodes, func(nd meta.NodeInfo) bool {
		return nd.State != meta.NodeDown && nd.State != meta.NodeDraining && nd.State != meta.NodeRemoved
	})
}

// repairChunks runs one pass over the local chunks against nodes.
func (n *Node) repairChunks(ctx context.Context, nodes []meta.NodeInfo) (repairStats, error) {
	var st repairStats
	r, err := n.maxReplicas(ctx)
	if err != nil {
		return st, err
	}
	state := map[uint64]string{}
	for _, nd := range nodes {
		state[nd.ID] = nd.State
	}
	cp := &copier{n: n, st: &st, sem: make(chan struct{}, repairParallel)}
	defer cp.wait()
	var after *chunk.Hash
	for {
		var batch []chunk.Hash
		err := n.chunks.Chunks(ctx, after, func(h chunk.Hash, _ uint32) bool {
			batch = append(batch, h)
			return len(batch) < repairBatch
		})
		if err != nil {
			return st, err
		}
		if len(batch) == 0 {
			return st, nil
		}
		after = &batch[len(batch)-1]
		// Which wanted nodes to ask about which chunks.
		wants := make([][]uint64, len(batch))
		copies := make([]int, len(batch))
		ask := map[uint64][]int{}
		for i, h := range batch {
			// The copies the chunk's writers wanted; a chunk written
			// before they were recorded (or whose record a crash lost)
			// gets the largest replication factor of any space.
			c, err := n.chunks.Copies(h)
			if err != nil || c == 0 {
				c = r
			}
			copies[i] = c
			ranked := n.repairRanking(h, nodes)
			wants[i] = ranked[:min(c, len(ranked))]
			for _, id := range wants[i] {
				if id != n.id.NodeID && state[id] == meta.NodeUp {
					ask[id] = append(ask[id], i)
				}
			}
		}
		holds := map[uint64]map[int]bool{}
		for id, idx := range ask {
			req := make([]byte, 0, len(idx)*chunk.HashSize)
			for _, i := range idx {
				req = append(req, batch[i][:]...)
			}
			resp, err := n.callNode(ctx, id, object.ChunkService, "Has", req, 30*time.Second)
			if err != nil || len(resp) != len(idx) {
				// Unknown: do not copy to it now; the pass is retried.
				st.Failed += len(idx)
				holds[id] = nil
				continue
			}
			holds[id] = map[int]bool{}
			for k, i := range idx {
				if resp[k] == 1 {
					holds[id][i] = true
				}
			}
		}
		for i, h := range batch {
			st.Checked++
			// holds has an entry (nil if the answer failed) only for up
			// nodes asked this round: a suspect node is presumed to hold
			// its copies, and one that did not answer is left alone.
			lacks := func(id uint64) bool { return id != n.id.NodeID && holds[id] != nil && !holds[id][i] }
			// The best-ranked wanted node known to hold the chunk copies
			// it; if no wanted node is, every holder does.
			want := wants[i]
			var copier uint64
			for _, id := range want {
				if id == n.id.NodeID || holds[id][i] {
					copier = id
					break
				}
			}
			if copier != 0 && copier != n.id.NodeID {
				continue
			}
			var to []uint64
			for _, id := range want {
				if lacks(id) {
					to = append(to, id)
				}
			}
			if len(to) > 0 {
				cp.copy(ctx, h, copies[i], to)
			}
		}
		cp.wait()
		if err := ctx.Err(); err != nil {
			return st, err
		}
	}
}

// repairParallel is how many chunks a node copies at once: each copy
// waits for the receiver's fsync, so one at a time leaves the disk and
// network idle most of the time.
const repairParallel = 4

// copier copies chunks to other nodes, repairParallel at a time, paced
// by the node's repair rate.
type copier struct {
	n   *Node
	sem chan struct{}
	wg  sync.WaitGroup
	mu  sync.Mutex // guards st and the pacer
	st  *repairStats
}

// copy reads chunk h once and puts it on every node of to, in the
// background, with the copies the cluster wants of it.
func (c *copier) copy(ctx context.Context, h chunk.Hash, copies int, to []uint64) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	c.wg.Add(1)
	go func() {
		defer func() { <-c.sem; c.wg.Done() }()
		data, err := c.n.chunks.Get(ctx, h, nil)
		if err != nil {
			c.mu.Lock()
			c.st.Failed++
			c.mu.Unlock()
			c.n.log.Warn("chunk repair: cannot read the local copy", "chunk", h, "err", err)
			return
		}
		frame := make([]byte, 0, 1+chunk.HashSize+len(data))
		frame = append(append(append(frame, byte(min(copies, 255))), h[:]...), data...)
		for _, id := range to {
			err := c.n.plane.PutCopy(ctx, id, frame)
			c.mu.Lock()
			if err != nil {
				c.st.Failed++
				c.mu.Unlock()
				continue
			}
			c.st.Copied++
			c.st.Bytes += int64(len(data))
			c.n.metrics.repairBytes.Add(float64(len(data)))
			// The pacer is shared: hold the lock while it computes, not
			// while it sleeps.
			d := c.n.repairPace.reserve(len(data), c.n.cfg.Clock())
			c.mu.Unlock()
			if d > 0 && clock.Sleep(ctx, d) != nil {
				return
			}
		}
	}()
}

func (c *copier) wait() { c.wg.Wait() }

// maxReplicas is the largest replication factor of any space: the copies
// of a chunk with none recorded.
func (n *Node) maxReplicas(ctx context.Context) (int, error) {
	spaces, err := n.catalog.ListSpaces(ctx)
	if err != nil {
		return 0, err
	}
	if len(spaces) == 0 {
		return meta.DefaultReplicas, nil
	}
	r := 1
	for _, sp := range spaces {
		r = max(r, cmp.Or(sp.Settings.Replicas, meta.DefaultReplicas))
	}
	return r, nil
}

// handleChunkHas answers which of the hashes in req this node holds: one
// byte per hash, 1 if held.
func (n *Node) handleChunkHas(_ context.Context, req []byte) ([]byte, error) {
	if len(req)%chunk.HashSize != 0 {
		return nil, fmt.Errorf("chunk has: %d bytes is not a list of hashes", len(req))
	}
	out := make([]byte, len(req)/chunk.HashSize)
	for i := range out {
		var h chunk.Hash
		copy(h[:], req[i*chunk.HashSize:])
		ok, err := n.chunks.Has(h)
		if err != nil {
			return nil, err
		}
		if ok {
			out[i] = 1
		}
	}
	return out, nil
}

// pacer spaces out work to at most rate bytes per second (no limit when
// rate <= 0). Callers serialize its use.
type pacer struct {
	rate float64
	next time.Time
}

// reserve accounts for n bytes at now and returns how long to wait until
// they fit the rate.
func (p *pacer) reserve(n int, now time.Time) time.Duration {
	if p.rate <= 0 {
		return 0
	}
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	return p.next.Sub(now)
}
