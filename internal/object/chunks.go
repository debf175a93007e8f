package object

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/placement"
	"github.com/cairn-db/cairn/internal/segment"
	"github.com/cairn-db/cairn/internal/transport"
)

// ChunkService is the peer gRPC service that stores and serves chunks for
// other nodes.
const ChunkService = "cairn.Chunk"

// A chunk is stored on r nodes: the first r of the live nodes ranked by
// rendezvous hashing of the chunk's hash (one per zone first; see
// placement.Rank). A version commits only after every copy is durable.
// A node that cannot be reached is replaced by the next node of the
// ranking, so a write succeeds while r nodes are up; the repairer moves
// copies back to their ranked places. Reads try the local store, then the
// ranked nodes least loaded first, then every other node, and verify the
// hash of whatever they get.

// ChunkPlane stores chunks on their nodes and reads them back, verified
// (Chunks), and serves other nodes' chunk calls (HandlePut, HandlePutCopies,
// HandleGet on ChunkService).
type ChunkPlane struct {
	cfg ChunkConfig
}

// ChunkConfig configures a ChunkPlane. Every field is required unless it
// says.
type ChunkConfig struct {
	// Self is this node's id; Zone its failure domain.
	Self uint64
	Zone string
	// Local is this node's chunk store.
	Local *segment.Store
	// Nodes returns the cluster map as last read. Shared: not modified.
	Nodes func() []meta.NodeInfo
	// Call calls method of service on node id, bounded by timeout.
	Call func(ctx context.Context, id uint64, service, method string, req []byte, timeout time.Duration) ([]byte, error)
	// Inflight counts the calls in flight to node id (reads go to the
	// least loaded copy).
	Inflight func(id uint64) *atomic.Int64
	// MinCopies: see node.Config.MinCopies (0: the default rule).
	MinCopies int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Corrupt, if set, counts chunks that failed their checksum.
	Corrupt prometheus.Counter
}

// NewChunkPlane returns a chunk plane over cfg.
func NewChunkPlane(cfg ChunkConfig) *ChunkPlane {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Corrupt == nil {
		cfg.Corrupt = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
	}
	return &ChunkPlane{cfg: cfg}
}

// chunkRanking returns the nodes a new copy of a chunk may go to, best
// first: the nodes of the cluster map that are up (this node always counts
// as up).
func (cp *ChunkPlane) chunkRanking(h chunk.Hash, nodes []meta.NodeInfo) []uint64 {
	return cp.Rank(h, nodes, func(nd meta.NodeInfo) bool {
		// This node is alive whatever the cached map says, unless it is
		// leaving.
		return nd.State == meta.NodeUp || (nd.ID == cp.cfg.Self && nd.State != meta.NodeDraining && nd.State != meta.NodeRemoved)
	})
}

// rank orders the nodes of the map that pass eligible by rendezvous hashing
// of h (placement.Rank), best first. This node counts when the map does
// not list it yet.
func (cp *ChunkPlane) Rank(h chunk.Hash, nodes []meta.NodeInfo, eligible func(meta.NodeInfo) bool) []uint64 {
	cands := make([]placement.Node, 0, len(nodes)+1)
	listed := false
	for _, nd := range nodes {
		listed = listed || nd.ID == cp.cfg.Self
		if eligible(nd) {
			cands = append(cands, placement.Node{ID: nd.ID, Zone: nd.Zone})
		}
	}
	if !listed {
		cands = append(cands, placement.Node{ID: cp.cfg.Self, Zone: cp.cfg.Zone})
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
func (cp *ChunkPlane) minCopies(r int, nodes []meta.NodeInfo) int {
	if cp.cfg.MinCopies > 0 {
		return min(cp.cfg.MinCopies, r)
	}
	members := 0
	listed := false
	for _, nd := range nodes {
		listed = listed || nd.ID == cp.cfg.Self
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
	return Errorf(Unavailable, "%v: a write needs %d durable %s of each chunk and %d node(s) can hold one (%s); nothing was written. Undrain a node (cairn node undrain ID), bring one back up or add one",
		ErrNoChunkNodes, want, copies, have, strings.Join(states, ", "))
}

// PutChunk starts storing data on r nodes and returns its hash. It hashes
// data once: the local copy is stored with that hash without hashing
// again (a remote node checks what it receives). data is not retained
// after PutChunk returns. The copies are min(r, the nodes that can take
// one), and at least minCopies: with fewer nodes the put fails (in Wait)
// with ErrNoChunkNodes and stores nothing.
func (cp *ChunkPlane) PutChunk(ctx context.Context, data []byte, r int) (chunk.Hash, ChunkPut) {
	h := chunk.Sum(data)
	if r <= 0 {
		r = meta.DefaultReplicas
	}
	p := &chunkPut{}
	wanted := min(r, 255) // recorded with every copy, for the repairer
	nodes := cp.cfg.Nodes()
	ranked := cp.chunkRanking(h, nodes)
	if least := cp.minCopies(r, nodes); len(ranked) < least {
		p.err = noChunkNodes(least, len(ranked), nodes)
		return h, p
	}
	r = min(r, len(ranked))
	if r == 1 && ranked[0] == cp.cfg.Self {
		p.local = cp.cfg.Local.PutCopies(h, data, wanted)
		return h, p
	}
	// Remote copies share one request frame (PutCopies): the copies
	// wanted, the hash, then the data.
	frame := make([]byte, 0, 1+chunk.HashSize+len(data))
	frame = append(append(append(frame, byte(wanted)), h[:]...), data...)
	spares := &spareNodes{ids: ranked[r:]}
	p.errs = make(chan error, r)
	for _, id := range ranked[:r] {
		if id == cp.cfg.Self {
			p.local = cp.cfg.Local.PutCopies(h, data, wanted)
			continue
		}
		p.remote++
		go func() { p.errs <- cp.sendChunk(ctx, id, frame, spares) }()
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
func (cp *ChunkPlane) sendChunk(ctx context.Context, id uint64, frame []byte, spares *spareNodes) error {
	var errs []error
	for {
		var err error
		if id == cp.cfg.Self {
			_, err = cp.HandlePutCopies(ctx, frame)
		} else {
			err = cp.PutCopy(ctx, id, frame)
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
			return Errorf(Unavailable, "too few nodes could store a copy of chunk %x: %v", frame[:8], errors.Join(errs...))
		}
		id = next
	}
}

// PutCopy stores a copy of a chunk on node id: frame is a PutCopies
// request (the copies wanted, the hash, the data). A node of an earlier
// version, which has no PutCopies, takes the chunk through Put, without
// the count.
func (cp *ChunkPlane) PutCopy(ctx context.Context, id uint64, frame []byte) error {
	_, err := cp.cfg.Call(ctx, id, ChunkService, "PutCopies", frame, chunkTimeout(len(frame)))
	if errors.Is(err, transport.ErrUnknownMethod) {
		_, err = cp.cfg.Call(ctx, id, ChunkService, "Put", frame[1:], chunkTimeout(len(frame)))
	}
	return err
}

// chunkTimeout bounds one chunk transfer: 5s plus the time at 8 MiB/s.
func chunkTimeout(size int) time.Duration {
	return 5*time.Second + time.Duration(size)*time.Second/(8<<20)
}

// GetChunk returns the chunk with hash h, verified: from the local store if
// it holds a good copy, else from another node (see the comment at the top
// of this file). r is the replication factor of the object's space, a hint
// for which nodes are most likely to hold it.
func (cp *ChunkPlane) GetChunk(ctx context.Context, h chunk.Hash, dst []byte, r int) ([]byte, error) {
	b, err := cp.cfg.Local.Get(ctx, h, dst)
	if err == nil {
		return b, nil
	}
	return cp.otherCopy(ctx, h, r, err)
}

// ViewChunk is GetChunk without a copy: the bytes may be shared with the
// local store's cache of verified chunks (segment.Store.View) and must
// not be modified; they stay valid until the caller releases the pin
// (nil for a copy from another node: the caller's own).
func (cp *ChunkPlane) ViewChunk(ctx context.Context, h chunk.Hash, r int) ([]byte, *chunk.Pin, error) {
	b, pin, err := cp.cfg.Local.View(ctx, h)
	if err == nil {
		return b, pin, nil
	}
	b, err = cp.otherCopy(ctx, h, r, err)
	return b, nil, err
}

// otherCopy reads chunk h from another node after the local read failed
// with err: not found, or corrupt.
func (cp *ChunkPlane) otherCopy(ctx context.Context, h chunk.Hash, r int, err error) ([]byte, error) {
	corrupt := errors.Is(err, segment.ErrCorrupt)
	if corrupt {
		cp.cfg.Corrupt.Inc()
		cp.cfg.Logger.Error("chunk failed its checksum; reading another copy", "chunk", h, "err", err)
	} else if !errors.Is(err, segment.ErrNotFound) {
		return nil, err
	}
	for _, id := range cp.chunkSources(h, r) {
		b, rerr := cp.cfg.Call(ctx, id, ChunkService, "Get", h[:], chunkTimeout(chunk.MaxChunkSize))
		switch {
		case rerr == nil && chunk.Sum(b) == h:
			return b, nil
		case rerr == nil:
			cp.cfg.Corrupt.Inc()
			cp.cfg.Logger.Error("chunk from another node does not match its hash", "chunk", h, "node", id)
		case errors.Is(rerr, transport.ErrCorrupt):
			cp.cfg.Corrupt.Inc()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if corrupt {
		return nil, Errorf(Corrupt, "chunk %s failed its checksum and no other node has a good copy", h)
	}
	return nil, chunkMissing{Errorf(Corrupt, "chunk %s is missing on every node that could hold it", h)}
}

// chunkMissing is GetChunk's error for a chunk no node has: lost, or
// collected because the version that referenced it was removed after the
// reader read it (the reader tells which: removedWhileRead).
type chunkMissing struct{ err *Error }

func (e chunkMissing) Error() string    { return e.err.Error() }
func (e chunkMissing) Unwrap() error    { return e.err }
func (e chunkMissing) ObjectKind() Kind { return e.err.Kind }

// chunkSources lists the other nodes to ask for chunk h, in order: its
// first r ranked nodes, least loaded first, then the rest of the ranking,
// then nodes that are not up but not known down (they may still answer).
func (cp *ChunkPlane) chunkSources(h chunk.Hash, r int) []uint64 {
	if r <= 0 {
		r = meta.DefaultReplicas
	}
	nodes := cp.cfg.Nodes()
	ranked := cp.chunkRanking(h, nodes)
	ranked = slices.DeleteFunc(slices.Clone(ranked), func(id uint64) bool { return id == cp.cfg.Self })
	head := ranked[:min(r, len(ranked))]
	slices.SortStableFunc(head, func(a, b uint64) int {
		return int(cp.cfg.Inflight(a).Load() - cp.cfg.Inflight(b).Load())
	})
	for _, nd := range nodes {
		if nd.State != meta.NodeUp && nd.State != meta.NodeDown && nd.State != meta.NodeRemoved && nd.ID != cp.cfg.Self {
			ranked = append(ranked, nd.ID)
		}
	}
	return ranked
}

// HandlePut stores a chunk for another node: the request is the hash
// followed by the data; the answer comes once the chunk is durable.
func (cp *ChunkPlane) HandlePut(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) < chunk.HashSize {
		return nil, fmt.Errorf("chunk put: %d-byte request is shorter than a hash", len(req))
	}
	var h chunk.Hash
	copy(h[:], req)
	if err := cp.cfg.Local.Put(ctx, h, req[chunk.HashSize:]); err != nil {
		return nil, fmt.Errorf("chunk put %s: %w", h, err)
	}
	return nil, nil
}

// HandlePutCopies stores a chunk for another node and records the
// copies the cluster wants of it: the request is that count (a byte), the
// hash, then the data; the answer comes once the chunk is durable.
func (cp *ChunkPlane) HandlePutCopies(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) < 1+chunk.HashSize || req[0] == 0 {
		return nil, fmt.Errorf("chunk put: a %d-byte request is not a count, a hash and data", len(req))
	}
	if _, err := cp.HandlePut(ctx, req[1:]); err != nil {
		return nil, err
	}
	var h chunk.Hash
	copy(h[:], req[1:])
	return nil, cp.cfg.Local.RaiseCopies(h, int(req[0]))
}

// HandleGet serves a chunk to another node: the request is its hash.
func (cp *ChunkPlane) HandleGet(ctx context.Context, req []byte) ([]byte, error) {
	if len(req) != chunk.HashSize {
		return nil, fmt.Errorf("chunk get: a %d-byte request is not a hash", len(req))
	}
	var h chunk.Hash
	copy(h[:], req)
	b, err := cp.cfg.Local.Get(ctx, h, nil)
	switch {
	case errors.Is(err, segment.ErrNotFound):
		return nil, fmt.Errorf("chunk %s: %w", h, transport.ErrNotFound)
	case errors.Is(err, segment.ErrCorrupt):
		cp.cfg.Corrupt.Inc()
		cp.cfg.Logger.Error("chunk failed its checksum", "chunk", h, "err", err)
		return nil, fmt.Errorf("chunk %s: %w", h, transport.ErrCorrupt)
	}
	return b, err
}

// TouchChunks tells every node that may hold one of hs that a new version
// is about to reference it without writing it (a clone, a copy, a
// multipart completion), so that no chunk collection already under way
// deletes it (segment.Store.Touch). It fails if a node that is up cannot
// be told, or if some chunk is on no node that answered: the caller must
// not commit. (A suspect node that does not answer may still collect;
// the copies touched elsewhere stay, and the repairer restores the
// count.)
func (cp *ChunkPlane) TouchChunks(ctx context.Context, hs []chunk.Hash) error {
	if len(hs) == 0 {
		return nil
	}
	req := chunk.AppendHashes(nil, hs)
	held := make(map[chunk.Hash]bool, len(hs))
	note := func(out []byte) error {
		missing, err := chunk.ParseHashes(out)
		if err != nil {
			return err
		}
		gone := map[chunk.Hash]bool{}
		for _, h := range missing {
			gone[h] = true
		}
		for _, h := range hs {
			if !gone[h] {
				held[h] = true
			}
		}
		return nil
	}
	out, err := cp.HandleTouch(ctx, req)
	if err == nil {
		err = note(out)
	}
	if err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		errs   []error
		missed bool // a node that may hold copies was not told
	)
	for _, nd := range cp.cfg.Nodes() {
		alive := nd.State == meta.NodeUp || nd.State == meta.NodeSuspect || nd.State == meta.NodeDraining
		if nd.ID == cp.cfg.Self || !alive {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := cp.cfg.Call(ctx, nd.ID, ChunkService, "Touch", req, 10*time.Second)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				err = note(out)
			}
			switch {
			case err == nil:
			case nd.State == meta.NodeUp:
				errs = append(errs, fmt.Errorf("node %d: %w", nd.ID, err))
			default:
				missed = true // suspect: likely gone; its copies are not counted
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return Errorf(Unavailable, "could not mark the shared chunks in use on every node; nothing was written: %v", errors.Join(errs...))
	}
	for _, h := range hs {
		if held[h] {
			continue
		}
		if missed {
			return Errorf(Unavailable, "chunk %s was found on no node that answered; nothing was written (try again)", h)
		}
		// Collected: the version that referenced it was removed after
		// the caller read it.
		return Errorf(NotFound, "the source was removed meanwhile (its chunk %s is gone); nothing was written", h)
	}
	return nil
}

// HandleTouch touches the chunks a TouchChunks request names (their
// hashes, back to back) and answers the ones this node does not hold.
func (cp *ChunkPlane) HandleTouch(_ context.Context, req []byte) ([]byte, error) {
	hs, err := chunk.ParseHashes(req)
	if err != nil {
		return nil, fmt.Errorf("chunk touch: %w", err)
	}
	missing, err := cp.cfg.Local.Touch(hs)
	if err != nil {
		return nil, err
	}
	return chunk.AppendHashes(nil, missing), nil
}
