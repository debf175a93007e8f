package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/placement"
	"github.com/cairn-db/cairn/internal/segment"
	"github.com/cairn-db/cairn/internal/transport"
)

// chunkService is the peer gRPC service that stores and serves chunks for
// other nodes.
const chunkService = "cairn.Chunk"

// A chunk is stored on r nodes: the first r of the live nodes ranked by
// rendezvous hashing of the chunk's hash (one per zone first; see
// placement.Rank). A version commits only after every copy is durable.
// A node that cannot be reached is replaced by the next node of the
// ranking, so a write succeeds while r nodes are up; the repairer moves
// copies back to their ranked places. Reads try the local store, then the
// ranked nodes least loaded first, then every other node, and verify the
// hash of whatever they get.

// chunkRanking returns the nodes a new copy of a chunk may go to, best
// first: the nodes of the cluster map that are up (this node always counts
// as up).
func (n *Node) chunkRanking(h chunk.Hash, nodes []meta.NodeInfo) []uint64 {
	return n.rank(h, nodes, func(nd meta.NodeInfo) bool {
		// This node is alive whatever the cached map says, unless it is
		// leaving.
		return nd.State == meta.NodeUp || (nd.ID == n.id.NodeID && nd.State != meta.NodeDraining && nd.State != meta.NodeRemoved)
	})
}

// rank orders the nodes of the map that pass eligible by rendezvous hashing
// of h (placement.Rank), best first. This node counts when the map does
// not list it yet.
func (n *Node) rank(h chunk.Hash, nodes []meta.NodeInfo, eligible func(meta.NodeInfo) bool) []uint64 {
	cands := make([]placement.Node, 0, len(nodes)+1)
	listed := false
	for _, nd := range nodes {
		listed = listed || nd.ID == n.id.NodeID
		if eligible(nd) {
			cands = append(cands, placement.Node{ID: nd.ID, Zone: nd.Zone})
		}
	}
	if !listed {
		cands = append(cands, placement.Node{ID: n.id.NodeID, Zone: n.cfg.Zone})
	}
	if len(cands) == 1 {
		return []uint64{cands[0].ID}
	}
	return placement.Rank(chunkKey(h), cands, len(cands))
}

// chunkKey is the number a chunk is ranked by: its hash's first 8 bytes.
func chunkKey(h chunk.Hash) uint64 { return binary.BigEndian.Uint64(h[:8]) }

// chunkPut is a chunk being stored on its nodes; Wait returns when every
// copy is durable or one cannot be made.
type chunkPut struct {
	err    error // set when the copies could not even be started
	local  *segment.Pending
	remote int
	errs   chan error
}

// Wait waits for every copy of the chunk to be durable.
func (p *chunkPut) Wait(ctx context.Context) error {
	if p.err != nil {
		return p.err
	}
	var first error
	if p.local != nil {
		if err := p.local.Wait(ctx); err != nil {
			first = err
		}
	}
	for range p.remote {
		select {
		case err := <-p.errs:
			if err != nil && first == nil {
				first = err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

// ErrNoChunkNodes is the class of the error a chunked write fails with
// when fewer nodes can take its chunks than the copies it needs (every
// node draining, or too few up): nothing is committed.
var ErrNoChunkNodes = errors.New("no node can take chunks")

// minCopies is the fewest durable copies a chunk of a space keeping r
// copies may be acknowledged with: Config.MinCopies if set (at most r);
// else 2 when r >= 2 and the cluster has two nodes or more (not counting
// removed ones), so that no acknowledged chunk lives on one disk while
// another could hold it; else 1.
func (n *Node) minCopies(r int, nodes []meta.NodeInfo) int {
	if n.cfg.MinCopies > 0 {
		return min(n.cfg.MinCopies, r)
	}
	members := 0
	listed := false
	for _, nd := range nodes {
		listed = listed || nd.ID == n.id.NodeID
		if nd.State != meta.NodeRemoved {
			members++
		}
	}
	if !listed {
		members++
	}
	if r >= 2 && members >= 2 {
		return 2
	}
	return 1
}

// noChunkNodes explains why a chunk cannot get want copies on the nodes of
// the map: which nodes there are and in what state.
func noChunkNodes(want, have int, nodes []meta.NodeInfo) error {
	var states []string
	for _, nd := range nodes {
		if nd.State != meta.NodeRemoved {
			states = append(states, fmt.Sprintf("node %d %s", nd.ID, nd.State))
		}
	}
	copies := "copies"
	if want == 1 {
		copies = "copy"
	}
	return object.Errorf(object.Unavailable, "%v: a write needs %d durable %s of each chunk and %d node(s) can hold one (%s); nothing was written. Undrain a node (cairn node undrain ID), bring one back up or add one",
		ErrNoChunkNodes, want, copies, have, strings.Join(states, ", "))
}

// putChunk starts storing data on r nodes and returns its hash. It hashes
// data once: the local copy is stored with that hash without hashing
// again (a remote node checks what it receives). data is not retained
// after putChunk returns. The copies are min(r, the nodes that can take
// one), and at least minCopies: with fewer nodes the put fails (in Wait)
// with ErrNoChunkNodes and stores nothing.
func (n *Node) putChunk(ctx context.Context, data []byte, r int) (chunk.Hash, *chunkPut) {
	h := chunk.Sum(data)
	if r <= 0 {
		r = meta.DefaultReplicas
	}
	p := &chunkPut{}
	wanted := min(r, 255) // recorded with every copy, for the repairer
	nodes := n.peers.view()
	ranked := n.chunkRanking(h, nodes)
	if least := n.minCopies(r, nodes); len(ranked) < least {
		p.err = noChunkNodes(least, len(ranked), nodes)
		return h, p
	}
	r = min(r, len(ranked))
	if r == 1 && ranked[0] == n.id.NodeID {
		p.local = n.chunks.PutAsyncHashed(h, data)
		n.raiseCopies(h, wanted)
		return h, p
	}
	// Remote copies share one request frame (PutCopies): the copies
	// wanted, the hash, then the data.
	frame := make([]byte, 0, 1+chunk.HashSize+len(data))
	frame = append(append(append(frame, byte(wanted)), h[:]...), data...)
	spares := &spareNodes{ids: ranked[r:]}
	p.errs = make(chan error, r)
	for _, id := range ranked[:r] {
		if id == n.id.NodeID {
			p.local = n.chunks.PutAsyncHashed(h, data)
			n.raiseCopies(h, wanted)
			continue
		}
		p.remote++
		go func() { p.errs <- n.sendChunk(ctx, id, frame, spares) }()
	}
	return h, p
}

// spareNodes hands out the nodes past the first r of a chunk's ranking to
// copies whose node failed.
type spareNodes struct {
	mu  sync.Mutex
	ids []uint64
}

func (s *spareNodes) next() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return 0, false
	}
	id := s.ids[0]
	s.ids = s.ids[1:]
	return id, true
}

// sendChunk stores one copy of a chunk on node id, or on the next spare
// node when id fails.
func (n *Node) sendChunk(ctx context.Context, id uint64, frame []byte, spares *spareNodes) error {
	var errs []error
	for {
		var err error
		if id == n.id.NodeID {
			_, err = n.handleChunkPutCopies(ctx, frame)
		} else {
			err = n.putCopy(ctx, id, frame)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		errs = append(errs, fmt.Errorf("node %d: %w", id, err))
		next, ok := spares.next()
		if !ok {
			return object.Errorf(object.Unavailable, "too few nodes could store a copy of chunk %x: %v", frame[:8], errors.Join(errs...))
		}
		id = next
	}
}

// raiseCopies records the copies the cluster wants of chunk h. The record
// guides the repairer only, so a failure to write it fails no write.
func (n *Node) raiseCopies(h chunk.Hash, r int) {
	if err := n.chunks.RaiseCopies(h, r); err != nil {
		n.log.Warn("could not record the copies wanted of a chunk; the repairer will use its default", "chunk", h, "err", err)
	}
}

// putCopy stores a copy of a chunk on node id: frame is a PutCopies
// request (the copies wanted, the hash, the data). A node of an earlier
// version, which has no PutCopies, takes the chunk through Put, without
// the count.
func (n *Node) putCopy(ctx context.Context, id uint64, frame []byte) error {
	_, err := n.callNode(ctx, id, chunkService, "PutCopies", frame, chunkTimeout(len(frame)))
	if errors.Is(err, transport.ErrUnknownMethod) {
		_, err = n.callNode(ctx, id, chunkService, "Put", frame[1:], chunkTimeout(len(frame)))
	}
	return err
}

// chunkTimeout bounds one chunk transfer: 5s plus the time at 8 MiB/s.
func chunkTimeout(size int) time.Duration {
	return 5*time.Second + time.Duration(size)*time.Second/(8<<20)
}

// callNode makes a unary call to node id that fails at once if the node
// cannot be reached, with at most timeout.
func (n *Node) callNode(ctx context.Context, id uint64, service, method string, req []byte, timeout time.Duration) ([]byte, error) {
	addr, ok := n.peers.resolve(id)
	if !ok {
		return nil, fmt.Errorf("node %d is not in the cluster map: %w", id, transport.ErrNotSent)
	}
	if n.cfg.Link != nil && !n.cfg.Link(n.id.NodeID, id) {
		// An injected network fault: wait as a dial to a cut-off host
		// would, then fail.
		if err := clock.Sleep(ctx, min(timeout, cutDialWait)); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("node %d is unreachable: %w", id, transport.ErrNotSent)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	inflight := n.peers.load(id)
	inflight.Add(1)
	defer inflight.Add(-1)
	b, err := n.peers.caller.Try(ctx, addr, service, method, req)
	if err != nil && !errors.Is(err, transport.ErrNotFound) && !errors.Is(err, transport.ErrCorrupt) {
		n.peers.forget()
	}
	return b, err
}

// getChunk returns the chunk with hash h, verified: from the local store if
// it holds a good copy, else from another node (see the comment at the top
// of this file). r is the replication factor of the object's space, a hint
// for which nodes are most likely to hold it.
func (n *Node) getChunk(ctx context.Context, h chunk.Hash, dst []byte, r int) ([]byte, error) {
	b, err := n.chunks.Get(ctx, h, dst)
	if err == nil {
		return b, nil
	}
	corrupt := errors.Is(err, segment.ErrCorrupt)
	if corrupt {
		n.metrics.corrupt.Inc()
		n.log.Error("chunk failed its checksum; reading another copy", "chunk", h, "err", err)
	} else if !errors.Is(err, segment.ErrNotFound) {
		return nil, err
	}
	for _, id := range n.chunkSources(h, r) {
		b, rerr := n.callNode(ctx, id, chunkService, "Get", h[:], chunkTimeout(chunk.MaxChunkSize))
		switch {
		case rerr == nil && chunk.Sum(b) == h:
			return b, nil
		case rerr == nil:
			n.metrics.corrupt.Inc()
			n.log.Error("chunk from another node does not match its hash", "chunk", h, "node", id)
		case errors.Is(rerr, transport.ErrCorrupt):
			n.metrics.corrupt.Inc()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if corrupt {
		return nil, object.Errorf(object.Corrupt, "chunk %s failed its checksum and no other node has a good copy", h)
	}
	return nil, object.Errorf(object.Corrupt, "chunk %s is missing on every node that could hold it", h)
}

// chunkSources lists the other nodes to ask for chunk h, in order: its
// first r ranked nodes, least loaded first, then the rest of the ranking,
// then nodes that are not up but not known down (they may still answer).
func (n *Node) chunkSources(h chunk.Hash, r int) []uint64 {
	if r <= 0 {
		r = meta.DefaultReplicas
	}
	nodes := n.peers.view()
	ranked := n.chunkRanking(h, nodes)
	ranked = slices.DeleteFunc(slices.Clone(ranked), func(id uint64) bool { return id == n.id.NodeID })
	head := ranked[:min(r, len(ranked))]
	slices.SortStableFunc(head, func(a, b uint64) int {
		return int(n.peers.load(a).Load() - n.peers.load(b).Load())
	})
	for _, nd := range nodes {
		if nd.State != meta.NodeUp && nd.State != meta.NodeDown && nd.State != meta.NodeRemoved && nd.ID != n.id.NodeID {
			ranked = append(ranked, nd.ID)
		}
	}
	return ranked
}

// handleChunkPut stores a chunk for another node: the request is the hash
// followed by the data; the answer comes once the chunk is durable.
func (n *Node) handleChunkPut(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) < chunk.HashSize {
		return nil, fmt.Errorf("chunk put: %d-byte request is shorter than a hash", len(req))
	}
	var h chunk.Hash
	copy(h[:], req)
	if err := n.chunks.Put(ctx, h, req[chunk.HashSize:]); err != nil {
		return nil, fmt.Errorf("chunk put %s: %w", h, err)
	}
	return nil, nil
}

// handleChunkPutCopies stores a chunk for another node and records the
// copies the cluster wants of it: the request is that count (a byte), the
// hash, then the data; the answer comes once the chunk is durable.
func (n *Node) handleChunkPutCopies(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) < 1+chunk.HashSize || req[0] == 0 {
		return nil, fmt.Errorf("chunk put: a %d-byte request is not a count, a hash and data", len(req))
	}
	if _, err := n.handleChunkPut(ctx, req[1:]); err != nil {
		return nil, err
	}
	var h chunk.Hash
	copy(h[:], req[1:])
	return nil, n.chunks.RaiseCopies(h, int(req[0]))
}

// handleChunkGet serves a chunk to another node: the request is its hash.
func (n *Node) handleChunkGet(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) != chunk.HashSize {
		return nil, fmt.Errorf("chunk get: a %d-byte request is not a hash", len(req))
	}
	var h chunk.Hash
	copy(h[:], req)
	b, err := n.chunks.Get(ctx, h, nil)
	switch {
	case errors.Is(err, segment.ErrNotFound):
		return nil, fmt.Errorf("chunk %s: %w", h, transport.ErrNotFound)
	case errors.Is(err, segment.ErrCorrupt):
		n.metrics.corrupt.Inc()
		n.log.Error("chunk failed its checksum", "chunk", h, "err", err)
		return nil, fmt.Errorf("chunk %s: %w", h, transport.ErrCorrupt)
	}
	return b, err
}

// load is the number of calls in flight to node id, for choosing the least
// loaded copy.
func (p *peers) load(id uint64) *atomic.Int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.inflight[id]
	if c == nil {
		if p.inflight == nil {
			p.inflight = map[uint64]*atomic.Int64{}
		}
		c = new(atomic.Int64)
		p.inflight[id] = c
	}
	return c
}
