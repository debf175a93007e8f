package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/placement"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/transport"
)

// peers is the node's side of node-to-node traffic: the gRPC server on the
// peer port, the raft transport, and the cluster map it resolves node ids
// with.
type peers struct {
	l   net.Listener
	srv *grpc.Server
	tr  *transport.Transport

	catalog atomic.Pointer[meta.Catalog] // set once the meta service is open
	caller  transport.Caller             // unary calls to other nodes
	mu      sync.Mutex
	addrs   map[uint64]string // node id -> peer address, from the cluster map
	nodes   []meta.NodeInfo   // the cluster map, replaced (never modified) on refresh
	// inflight counts calls in flight per node (see load).
	inflight map[uint64]*atomic.Int64
	fetched  time.Time // when addrs was last read
	clock    func() time.Time
}

// startPeers binds the peer port and creates the transport; the server
// is made by newPeerServer once the node's certificate is at hand, and
// serves from Serve.
func (n *Node) startPeers() error {
	port := n.cfg.PeerPort
	if port == -1 {
		port = 0
	}
	l, err := net.Listen("tcp", net.JoinHostPort(n.cfg.Listen, fmt.Sprint(port)))
	if err != nil {
		return fmt.Errorf("peer listener: %w (is another cairn server running? use --peer-port)", err)
	}
	p := &peers{l: l, addrs: map[uint64]string{}, clock: n.cfg.Clock}
	p.caller.TLS = n.peerClientTLS
	p.tr = transport.New(transport.Options{
		NodeID:  n.id.NodeID,
		Resolve: p.resolve,
		Link:    n.linkFunc(),
		Deliver: func(ctx context.Context, m replica.Message) error { return n.ranges.Step(ctx, m) },
		ReceiveSnapshot: func(ctx context.Context, m replica.Message, sizes []int64, src io.Reader) error {
			return n.ranges.ReceiveSnapshot(ctx, m, sizes, src)
		},
		TLS:    n.peerClientTLS,
		Logger: n.log,
	})
	n.peers = p
	return nil
}

// joinMethods may be called without a member's certificate: a node that
// joins has none until the join's answer brings it.
var joinMethods = []string{"/" + adminService + "/JoinChallenge", "/" + adminService + "/Join"}

// newPeerServer makes the peer gRPC server: mutual TLS under the cluster
// CA, members only (but for joinMethods).
func (n *Node) newPeerServer() {
	p := n.peers
	p.srv = grpc.NewServer(transport.ServerOptions(n.peerServerTLS(), joinMethods...)...)
	p.tr.Register(p.srv)
	transport.RegisterUnary(p.srv, adminService, map[string]transport.Unary{
		"JoinChallenge": n.handleJoinChallenge,
		"Join":          n.handleJoin,
		"Timestamp":     n.handleTimestamp,
		"Drained":       n.handleDrained,
		"ClusterKeys":   n.handleClusterKeys,
		"FenceSpace":    n.handleFenceSpace,
		// RefreshSnapshots: read the snapshots and hold what they show.
		"RefreshSnapshots": n.handleRefreshSnapshots,
		// GCStatus: the node's chunk collector (the cluster report's gc).
		"GCStatus": n.handleGCStatus,
		// TxnFloor: the floor of the node's open transactions' snapshots
		// (the collector's safe point).
		"TxnFloor": n.handleTxnFloor,
	})
	// The range client's methods exist once the node's replicas do
	// (Open sets rangeMethods before the server serves).
	ranges := map[string]transport.Unary{}
	for _, m := range append(slices.Clone(rangeclient.MethodNames), "Merge") {
		ranges[m] = func(ctx context.Context, req []byte) ([]byte, error) { return n.rangeMethods[m](ctx, req) }
	}
	transport.RegisterUnary(p.srv, rangeclient.Service, ranges)
	// The chunk plane exists once the node's segments do (Open sets
	// n.plane before the server serves).
	transport.RegisterUnary(p.srv, object.ChunkService, map[string]transport.Unary{
		"Put":       func(ctx context.Context, req []byte) ([]byte, error) { return n.plane.HandlePut(ctx, req) },
		"PutCopies": func(ctx context.Context, req []byte) ([]byte, error) { return n.plane.HandlePutCopies(ctx, req) },
		"Get":       func(ctx context.Context, req []byte) ([]byte, error) { return n.plane.HandleGet(ctx, req) },
		"Has":       n.handleChunkHas,
		"Touch":     func(ctx context.Context, req []byte) ([]byte, error) { return n.plane.HandleTouch(ctx, req) },
	})
}

// resolve returns a node's peer address from the cluster map (see view).
func (p *peers) resolve(id uint64) (string, bool) {
	p.refresh(id)
	p.mu.Lock()
	defer p.mu.Unlock()
	addr, ok := p.addrs[id]
	return addr, ok
}

// view returns the cluster map's nodes as last read (see refresh). The
// slice is shared: callers must not modify it.
func (p *peers) view() []meta.NodeInfo {
	p.refresh(0)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodes
}

// refresh reads the cluster map again when the cached copy is older than
// two seconds, or (at most every 500ms) when node want (if not 0) is not in
// it: a node that restarted on another address is found again.
func (p *peers) refresh(want uint64) {
	p.mu.Lock()
	_, ok := p.addrs[want]
	age := p.clock().Sub(p.fetched)
	p.mu.Unlock()
	cat := p.catalog.Load()
	if cat == nil || ((ok || want == 0) && age < 2*time.Second) || (!ok && age < 500*time.Millisecond) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	nodes, err := cat.Nodes(ctx)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fetched = p.clock()
	p.nodes = nodes
	clear(p.addrs)
	for _, nd := range nodes {
		p.addrs[nd.ID] = nd.Peer
	}
}

// forget drops the cached map so that the next resolve reads it again (a
// call to a cached address failed). It takes effect at most every 500ms, so
// calls failing against a dead node do not turn into a meta read each.
func (p *peers) forget() {
	p.mu.Lock()
	if p.clock().Sub(p.fetched) >= 500*time.Millisecond {
		p.fetched = time.Time{}
	}
	p.mu.Unlock()
}

func (p *peers) close() {
	if p == nil {
		return
	}
	p.tr.Close()
	if p.srv != nil {
		p.srv.Stop()
	}
	p.l.Close()
	p.caller.Close()
}

// advertised returns the address other nodes reach a listener at: the
// advertise host with the bound port.
func (n *Node) advertised(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "" // no such listener (tests of the cluster alone)
	}
	return net.JoinHostPort(n.advertiseHost(), port)
}

// advertiseHost is Config.Advertise if set; else the listen host, unless
// that is the unspecified address (0.0.0.0, ::), where the machine's host
// name is what others can reach (a container's name on its network).
func (n *Node) advertiseHost() string {
	if n.cfg.Advertise != "" {
		return n.cfg.Advertise
	}
	if ip := net.ParseIP(n.cfg.Listen); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			return h
		}
	}
	return n.cfg.Listen
}

// register writes the node's entry in the cluster map.
func (n *Node) register(ctx context.Context) error {
	var capacity uint64
	var st unix.Statfs_t
	if err := unix.Statfs(n.cfg.DataDir, &st); err == nil {
		capacity = st.Blocks * uint64(st.Bsize)
	}
	info := meta.NodeInfo{
		ID: n.id.NodeID, Native: n.advertised(n.cfg.NativeAddr), Peer: n.advertised(n.peers.l.Addr().String()), HTTP: n.advertised(n.cfg.HTTPAddr),
		MetaPeerURL: n.metaPeerURL, Zone: n.cfg.Zone, Capacity: capacity, State: meta.NodeUp, Started: n.cfg.Clock(),
	}
	if err := n.catalog.RegisterNode(ctx, info); errors.Is(err, meta.ErrNodeRemoved) {
		return fmt.Errorf("node %d was removed from the cluster and cannot come back; to use this machine again, remove %s and start with --join", n.id.NodeID, n.cfg.DataDir)
	} else if err != nil {
		return fmt.Errorf("register node %d in the cluster map: %w", n.id.NodeID, err)
	}
	return nil
}

// PeerAddr is the bound node-to-node (gRPC) address.
func (n *Node) PeerAddr() string { return n.peers.l.Addr().String() }

// placementNodes is the cluster map as placement weighs it.
func placementNodes(nodes []meta.NodeInfo) []placement.Node {
	out := make([]placement.Node, len(nodes))
	for i, nd := range nodes {
		out[i] = placement.Node{ID: nd.ID, Zone: nd.Zone, State: placementState(nd.State), Since: nd.Since}
	}
	return out
}

func placementState(s string) placement.State {
	switch s {
	case meta.NodeUp:
		return placement.Up
	case meta.NodeSuspect:
		return placement.Suspect
	case meta.NodeDown:
		return placement.Down
	case meta.NodeDraining:
		return placement.Draining
	case meta.NodeRemoved:
		return placement.Removed
	}
	return 0
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
