// Package transport carries raft messages between nodes: one long-lived
// gRPC client stream per peer node, with the messages of every range that
// are ready together sent as one batch frame.
//
// The gRPC service is registered by hand (no generated code) and its
// messages are this package's own frames, passed through a codec that hands
// gRPC the bytes unchanged. Send never blocks the caller (the replica Store's
// loop): each peer has a bounded queue drained by its own goroutine, and what
// does not fit, or cannot be delivered, is dropped; raft retransmits.
package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/replica"
)

// ServiceName is the gRPC service of node-to-node traffic.
const ServiceName = "cairn.Peer"

const (
	raftMethod = "/" + ServiceName + "/Raft"
	// frameMagic starts every raft batch frame; frameVersion is its format.
	frameMagic   = 0xCA
	frameVersion = 1
	// MaxFrame bounds one batch frame (and one gRPC message). Log entries
	// are bounded by the replica's proposal limits well below this.
	MaxFrame = 64 << 20
)

// ErrBadFrame is returned for a frame that does not decode. The stream that
// carried it is closed.
var ErrBadFrame = errors.New("transport: malformed raft frame")

// Options configure New. The zero value of each field but NodeID, Resolve
// and Deliver means its default.
type Options struct {
	// NodeID is this node's id; messages from it carry it as From.
	NodeID uint64
	// Resolve returns the peer address (host:port) of a node, or false if
	// the node is unknown; the messages for it are dropped.
	Resolve func(nodeID uint64) (string, bool)
	// Deliver hands an inbound message to the local replicas (Store.Step).
	Deliver func(context.Context, replica.Message) error
	// ReceiveSnapshot hands an inbound snapshot to the local replicas
	// (Store.ReceiveSnapshot). Nil: snapshots are refused.
	ReceiveSnapshot func(ctx context.Context, m replica.Message, sizes []int64, src io.Reader) error
	// Link, if set, reports whether node to can be reached now; messages
	// and snapshots for a node it rejects are dropped, as a network cut
	// would. A seam for tests that inject network faults. Default: all.
	Link func(to uint64) bool
	// QueueLen bounds the messages waiting for one peer. Default: 4096.
	QueueLen int
	// DialTimeout bounds connecting a stream. Default: 2s.
	DialTimeout time.Duration
	// TLS returns the configuration of connections to other nodes
	// (mutual TLS under the cluster CA: auth.PeerTLS.Client). Nil: plain
	// TCP, for tests of this package alone.
	TLS func() *tls.Config
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Transport implements replica.Transport over gRPC.
type Transport struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	peers  map[uint64]*peer
	closed bool
	wg     sync.WaitGroup
}

// New returns a transport. Register it on the node's peer gRPC server to
// receive; Send works at once.
func New(o Options) *Transport {
	if o.QueueLen == 0 {
		o.QueueLen = 4096
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Transport{opts: o, log: o.Logger.With("component", "transport"), peers: map[uint64]*peer{}}
}

// ServerOptions are the options the peer gRPC server needs: this package's
// codec and frame limits, and its security. With tlsConf (auth.PeerTLS.Server)
// the server speaks TLS and serves only callers that present a member's
// certificate, except for the full method names in open (a node joining
// has none yet); nil tlsConf is plain TCP, for tests of this package alone.
func ServerOptions(tlsConf *tls.Config, open ...string) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(MaxFrame),
		grpc.MaxSendMsgSize(MaxFrame),
		grpc.InitialWindowSize(flowWindow),
		grpc.InitialConnWindowSize(flowWindow),
	}
	if tlsConf != nil {
		member := func(ctx context.Context, method string) error {
			for _, m := range open {
				if m == method {
					return nil
				}
			}
			if p, ok := grpcpeer.FromContext(ctx); ok {
				if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && auth.Member(&ti.State) {
					return nil
				}
			}
			return status.Error(codes.PermissionDenied, "the peer port serves this cluster's members only (a node joins with cairn server --join ADDR --token TOKEN)")
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConf)),
			grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				if err := member(ctx, info.FullMethod); err != nil {
					return nil, err
				}
				return h(ctx, req)
			}),
			grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				if err := member(ss.Context(), info.FullMethod); err != nil {
					return err
				}
				return h(srv, ss)
			}))
	}
	return opts
}

// tlsConfig is the client configuration of connections to other nodes.
func (t *Transport) tlsConfig() *tls.Config {
	if t.opts.TLS == nil {
		return nil
	}
	return t.opts.TLS()
}

// Register adds the raft service to s, which must have been created with
// ServerOptions.
func (t *Transport) Register(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: ServiceName,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Raft",
			Handler:       func(_ any, ss grpc.ServerStream) error { return t.serve(ss) },
			ClientStreams: true,
		}, {
			StreamName:    "Snapshot",
			Handler:       func(_ any, ss grpc.ServerStream) error { return t.serveSnapshot(ss) },
			ClientStreams: true,
		}},
	}, t)
}

var raftStream = &grpc.StreamDesc{StreamName: "Raft", ClientStreams: true}

// serve receives batch frames from one peer until it closes the stream.
func (t *Transport) serve(ss grpc.ServerStream) error {
	ctx := ss.Context()
	for {
		var f frame
		if err := ss.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return ss.SendMsg(&frame{})
			}
			return err
		}
		msgs, err := decodeBatch(f.b)
		if err != nil {
			t.log.Warn("closing a peer stream", "err", err)
			return err
		}
		for _, m := range msgs {
			if err := t.opts.Deliver(ctx, m); err != nil {
				// Unknown range (not created here yet), full inbox, closing:
				// raft retransmits what matters.
				t.log.Debug("dropped an inbound raft message", "range", m.RangeID, "from", m.Msg.GetFrom(), "err", err)
			}
		}
	}
}

// Send implements replica.Transport.
func (t *Transport) Send(msgs []replica.Message) {
	for i := 0; i < len(msgs); {
		to := msgs[i].Msg.GetTo()
		j := i + 1
		for j < len(msgs) && msgs[j].Msg.GetTo() == to {
			j++
		}
		if !t.reachable(to) {
			i = j
			continue
		}
		if p := t.peer(to); p != nil {
			p.enqueue(msgs[i:j])
		}
		i = j
	}
}

// reachable reports whether Options.Link lets messages go to node to.
func (t *Transport) reachable(to uint64) bool { return t.opts.Link == nil || t.opts.Link(to) }

func (t *Transport) peer(id uint64) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || id == t.opts.NodeID {
		return nil
	}
	p := t.peers[id]
	if p == nil {
		ctx, cancel := context.WithCancel(context.Background())
		p = &peer{t: t, id: id, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
		t.peers[id] = p
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			p.run()
		}()
	}
	return p
}

// Close stops every peer stream and waits for their goroutines.
func (t *Transport) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	for _, p := range t.peers {
		p.cancel() // also unblocks a send stuck on a peer that stopped reading
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// peer is the sending side towards one node.
type peer struct {
	t      *Transport
	id     uint64
	wake   chan struct{}
	ctx    context.Context // the peer's lifetime: cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	q       []replica.Message
	dropped uint64
}

func (p *peer) enqueue(msgs []replica.Message) {
	p.mu.Lock()
	room := p.t.opts.QueueLen - len(p.q)
	if room < len(msgs) {
		p.dropped += uint64(len(msgs) - max(room, 0))
		msgs = msgs[:max(room, 0)]
	}
	p.q = append(p.q, msgs...)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *peer) take() []replica.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.q
	p.q = nil
	return q
}

// run keeps a stream to the peer open while there is something to send,
// reconnecting with backoff; messages queued while it is down are dropped.
func (p *peer) run() {
	backoff := 50 * time.Millisecond
	var (
		cc     *grpc.ClientConn
		stream grpc.ClientStream
		cancel context.CancelFunc = func() {}
	)
	closeStream := func() {
		cancel()
		if cc != nil {
			_ = cc.Close()
		}
		cc, stream, cancel = nil, nil, func() {}
	}
	defer closeStream()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.wake:
		}
		// Let the goroutines that are ready run first: under load the
		// replica loop adds its next cycle's messages meanwhile, and they
		// go in this frame instead of the next (half the frames, and
		// their syscalls and wakeups, in the 3-node benchmark). With
		// nothing else to run it returns at once.
		runtime.Gosched()
		msgs := p.take()
		if len(msgs) == 0 {
			continue
		}
		if stream == nil {
			c, st, cf, err := p.dial()
			if err == nil {
				cc, stream, cancel = c, st, cf
			}
			if err != nil {
				p.t.log.Debug("peer unreachable", "node", p.id, "err", err, "dropped", len(msgs))
				select {
				case <-p.ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			backoff = 50 * time.Millisecond
		}
		// gRPC may hold the frame after SendMsg returns: a new buffer each time.
		b, err := appendBatch(nil, msgs)
		if err == nil {
			err = stream.SendMsg(&frame{b: b})
		}
		if err != nil {
			p.t.log.Debug("peer stream failed", "node", p.id, "err", err)
			closeStream()
		}
	}
}

// keepalive pings detect a peer that vanished (killed, cut off, paused)
// while a send waits on it; the server side permits them.
var clientKeepalive = keepalive.ClientParameters{Time: 2 * time.Second, Timeout: 2 * time.Second, PermitWithoutStream: true}

// newClientConn is a connection to another node's peer server: TLS with
// tlsConf (nil: plain TCP), keepalives, this package's codec and frame
// limit.
func newClientConn(addr string, tlsConf *tls.Config) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if tlsConf != nil {
		creds = credentials.NewTLS(tlsConf)
	}
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(clientKeepalive),
		grpc.WithInitialWindowSize(flowWindow),
		grpc.WithInitialConnWindowSize(flowWindow),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallSendMsgSize(MaxFrame), grpc.MaxCallRecvMsgSize(MaxFrame)))
}

// flowWindow is the HTTP/2 flow-control window of peer streams and
// connections. gRPC's default (64 KiB, grown by probing) makes the
// receiver send a window update every few frames under a steady raft
// load, each a write on one side and a wakeup and read on the other;
// a fixed large window (which also turns the probing off) leaves the
// stream to TCP's own flow control. The per-peer send queue bounds what
// is buffered anyway.
const flowWindow = 16 << 20

func (p *peer) dial() (*grpc.ClientConn, grpc.ClientStream, context.CancelFunc, error) {
	addr, ok := p.t.opts.Resolve(p.id)
	if !ok {
		return nil, nil, nil, fmt.Errorf("node %d has no known address", p.id)
	}
	cc, err := newClientConn(addr, p.t.tlsConfig())
	if err != nil {
		return nil, nil, nil, err
	}
	// The stream lives as long as ctx; connecting may take at most
	// DialTimeout.
	ctx, cancel := context.WithCancel(p.ctx)
	timer := time.AfterFunc(p.t.opts.DialTimeout, cancel)
	stream, err := cc.NewStream(ctx, raftStream, raftMethod, grpc.WaitForReady(true))
	if !timer.Stop() && err == nil {
		err = fmt.Errorf("connecting to node %d at %s took over %v", p.id, addr, p.t.opts.DialTimeout)
	}
	if err != nil {
		cancel()
		_ = cc.Close()
		return nil, nil, nil, err
	}
	return cc, stream, cancel, nil
}

// A batch frame: magic, version, uvarint count, then per message the
// uvarint range id, uvarint length and the raftpb.Message protobuf.
func appendBatch(b []byte, msgs []replica.Message) ([]byte, error) {
	b = append(b, frameMagic, frameVersion)
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		b = binary.AppendUvarint(b, m.RangeID)
		n := proto.Size(m.Msg)
		b = binary.AppendUvarint(b, uint64(n))
		var err error
		if b, err = (proto.MarshalOptions{}).MarshalAppend(b, m.Msg); err != nil {
			return nil, err
		}
	}
	if len(b) > MaxFrame {
		return nil, fmt.Errorf("transport: batch of %d bytes is over the %d byte frame limit", len(b), MaxFrame)
	}
	return b, nil
}

func decodeBatch(b []byte) ([]replica.Message, error) {
	if len(b) < 2 || b[0] != frameMagic || b[1] != frameVersion {
		return nil, fmt.Errorf("%w: bad header", ErrBadFrame)
	}
	b = b[2:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) { // each message takes at least 2 bytes
		return nil, fmt.Errorf("%w: bad message count", ErrBadFrame)
	}
	b = b[k:]
	msgs := make([]replica.Message, 0, n)
	for i := uint64(0); i < n; i++ {
		rangeID, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%w: message %d: bad range id", ErrBadFrame, i)
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: message %d: bad length", ErrBadFrame, i)
		}
		b = b[k:]
		m := &raftpb.Message{}
		if err := proto.Unmarshal(b[:size], m); err != nil {
			return nil, fmt.Errorf("%w: message %d: %v", ErrBadFrame, i, err)
		}
		b = b[size:]
		msgs = append(msgs, replica.Message{RangeID: rangeID, Msg: m})
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrBadFrame, len(b))
	}
	return msgs, nil
}
