package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// Connection errors of the client side. Both are retryable in the sense of
// the client package: ErrConnClosed always (the request never left), and
// ErrConnLost only for idempotent requests (it may have been applied).
var (
	// ErrConnClosed: the connection was closed before the request was sent.
	ErrConnClosed = errors.New("wire: connection closed")
	// ErrConnLost: the connection broke while the request was in flight;
	// whether it was applied is unknown.
	ErrConnLost = errors.New("wire: connection lost")
	// ErrUnresponsive is why a connection was given up when nothing came
	// from or went to the server for ConnOptions.Liveness while requests
	// waited (the server is paused, or cut off without the connection
	// breaking); requests in flight fail with ErrConnLost.
	ErrUnresponsive = errors.New("wire: server unresponsive")
)

// ConnOptions configure a client Conn. The zero value means every default.
type ConnOptions struct {
	// MaxFrame is the largest frame body this side sends and the smallest
	// limit it accepts (default DefaultMaxFrame). DialConn lowers the send
	// size to the server's advertised limit.
	MaxFrame int
	// MaxInflight bounds the requests in flight (default 256, the server's
	// default MaxInflightPerConn); more wait for a free slot.
	MaxInflight int
	// StreamFrames is how many frames of one stream may wait in either
	// direction (default 4).
	StreamFrames int
	// Logger (default: discarded).
	Logger *slog.Logger
	// OnForwarded, if set, is called (from the connection's reader, so it
	// must not block) with the opcode of every answer carrying
	// FlagForwarded.
	OnForwarded func(Op)
	// Liveness is how long requests may wait with nothing moving on the
	// connection before it is given up (ErrUnresponsive): a paused or
	// cut-off server keeps a TCP connection open, and a request without a
	// deadline would wait for it forever. After half of it the connection
	// sends a PING, which a live server answers as soon as its reader
	// gets to it (whatever its handlers are doing), so only a server that
	// does not answer is given up. Not while a body is being uploaded on
	// the connection (the server's reader may rightly wait for its
	// handler to take the body; the upload's context bounds it) nor while
	// the connection waits for its caller to take an answer. Default 3s;
	// negative: never; at least 10ms.
	Liveness time.Duration
	// AccessKey and SecretKey authenticate the connection (HELLO, AUTH)
	// when DialConn opens it; the server then also proves it holds the
	// secret. Without them only PING works.
	AccessKey, SecretKey string
	// TLS, if set, makes DialConn speak TLS (a server without TLS is
	// reported as such).
	TLS *tls.Config
}

// DefaultLiveness is ConnOptions.Liveness's default.
const DefaultLiveness = 3 * time.Second

// EnsureDefaults fills zero fields with their defaults.
func (o *ConnOptions) EnsureDefaults() {
	if o.MaxFrame == 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = 256
	}
	if o.StreamFrames == 0 {
		o.StreamFrames = 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Liveness == 0 {
		o.Liveness = DefaultLiveness
	}
}

// Validate reports every invalid field.
func (o *ConnOptions) Validate() error {
	var errs []error
	if o.MaxFrame < MinMaxFrame || o.MaxFrame > 1<<30 {
		errs = append(errs, fmt.Errorf("wire: MaxFrame %d outside [%d, 1 GiB]", o.MaxFrame, MinMaxFrame))
	}
	if o.MaxInflight < 1 {
		errs = append(errs, fmt.Errorf("wire: MaxInflight %d < 1", o.MaxInflight))
	}
	if o.StreamFrames < 1 {
		errs = append(errs, fmt.Errorf("wire: StreamFrames %d < 1", o.StreamFrames))
	}
	if o.Liveness > 0 && o.Liveness < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("wire: Liveness %v < 10ms", o.Liveness))
	}
	return errors.Join(errs...)
}

// Conn is the client side of one multiplexed connection. Any number of
// goroutines may issue requests at once; each gets a request id, requests
// are pipelined and answers are matched by id in whatever order they come.
// Conn implements Service, so a remote node can stand where a local one
// would.
type Conn struct {
	nc      net.Conn
	opts    ConnOptions
	w       *frameWriter
	sendMax int          // largest frame body sent
	recvMax atomic.Int64 // largest frame body accepted
	sem     chan struct{}
	closed  chan struct{} // closed when the connection is broken or closed
	mu      struct {
		sync.Mutex
		nextID uint32
		calls  map[uint32]*call
		err    error
	}
	once sync.Once
	wg   sync.WaitGroup
	bufs sync.Pool // *[]byte of sendMax capacity, upload chunks
	pool sync.Pool // *call
	nreq atomic.Int64
	// Liveness (watch): lastIO is when bytes last came from the server,
	// or the wait began (ns since epoch, a monotonic reading); uploads
	// counts the bodies being sent and delivering is set while the reader
	// waits for a caller to take a frame: neither is the server's silence.
	epoch      time.Time
	lastIO     atomic.Int64
	uploads    atomic.Int64
	delivering atomic.Bool
	// serverIdle is the server's idle timeout, from AUTH (0: unknown).
	serverIdle time.Duration
	authRes    AuthResult
}

// Stale reports whether the connection has been idle so long that the
// server may close it any moment (past 80% of its idle timeout): a request
// sent now could cross the server's close, and a write would then end with
// an unknown outcome. A caller should open a fresh connection instead.
func (c *Conn) Stale() bool {
	if c.serverIdle <= 0 || c.nreq.Load() > 0 {
		return false
	}
	// The last answer is the last thing read, so lastIO is when the
	// connection went idle (or a request began without an answer yet).
	return time.Duration(c.now()-c.lastIO.Load()) > c.serverIdle*8/10
}

// SendMax is the largest frame body the connection sends (the smaller of
// its own limit and the server's).
func (c *Conn) SendMax() int { return c.sendMax }

// ServerIdle is how long the server lets the connection sit idle before
// it closes it (0: it did not say).
func (c *Conn) ServerIdle() time.Duration { return c.serverIdle }

// Auth returns what the server answered AUTH with (the key's grants), or
// the zero value on a connection that did not authenticate.
func (c *Conn) Auth() AuthResult { return c.authRes }

// now is the monotonic time since the connection was made, for lastIO.
func (c *Conn) now() int64 { return int64(time.Since(c.epoch)) }

// readConn is a net.Conn that notes when bytes last came in. Bytes going
// out do not count: a paused server's kernel takes requests and PINGs into
// its buffers for a long while.
type readConn struct {
	net.Conn
	c *Conn
}

func (r readConn) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	if n > 0 {
		r.c.lastIO.Store(r.c.now())
	}
	return n, err
}

var _ object.Service = (*Conn)(nil)

// call is one request in flight.
//
// A call whose terminal frame its caller received is recycled: the reader
// forgets a call before it delivers the terminal frame, so nobody else
// holds it then. Abandoned calls are left to the collector.
type call struct {
	id        uint32
	ch        chan inFrame  // answer frames, in order
	abandon   chan struct{} // closed when the caller stops reading
	abandoned atomic.Bool
}

type inFrame struct {
	op    Op
	flags uint16
	body  []byte
}

func (f *inFrame) terminal() bool {
	if f.flags&FlagError != 0 {
		return true
	}
	if f.op == OpData {
		return f.flags&FlagEnd != 0
	}
	return f.flags&FlagMore == 0
}

// err decodes an error frame.
func (f *inFrame) err() error {
	e, err := DecodeError(f.body)
	if err != nil {
		return fmt.Errorf("wire: undecodable error reply: %w", err)
	}
	return e
}

// DialConn connects to addr (with TLS if o.TLS is set), exchanges PING to
// learn the server's limits, authenticates with o's key if it has one, and
// returns the running Conn.
func DialConn(ctx context.Context, addr string, o ConnOptions) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	var binding []byte
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			var rh tls.RecordHeaderError
			if errors.As(err, &rh) {
				return nil, fmt.Errorf("wire: %s does not speak TLS on this port (it answered in plain TCP): connect without TLS, or give the server --tls-cert and --tls-key", addr)
			}
			return nil, fmt.Errorf("wire: TLS handshake with %s: %w", addr, err)
		}
		st := tc.ConnectionState()
		if binding, err = auth.ChannelBinding(&st); err != nil {
			tc.Close()
			return nil, err
		}
		nc = tc
	}
	c, err := NewConn(nc, o)
	if err != nil {
		nc.Close()
		return nil, err
	}
	// PING and HELLO leave together: one round trip for both.
	ping, err := c.begin(ctx, OpPing, nil)
	var hello *call
	var tr auth.Transcript
	if err == nil && o.AccessKey != "" {
		tr = auth.Transcript{Mech: auth.MechHMACSHA256, Access: o.AccessKey, Client: auth.NewNonce(), Binding: binding}
		hello, err = c.begin(ctx, OpHello, AppendHello(nil, &HelloRequest{Mech: tr.Mech, Access: tr.Access, Nonce: tr.Client}))
	}
	var pb []byte
	if err == nil {
		pb, err = c.finish(ctx, OpPing, ping)
	}
	if err != nil {
		c.Close()
		return nil, c.dialError(addr, err)
	}
	p, err := DecodePingInfo(pb)
	if err != nil {
		c.Close()
		return nil, err
	}
	if p.MaxFrame >= MinMaxFrame && int(p.MaxFrame) < c.sendMax {
		c.sendMax = int(p.MaxFrame)
	}
	if int64(p.MaxFrame) > c.recvMax.Load() {
		c.recvMax.Store(int64(p.MaxFrame))
	}
	if hello != nil {
		if err := c.authenticate(ctx, hello, &tr, o.SecretKey); err != nil {
			c.Close()
			return nil, c.dialError(addr, err)
		}
	}
	return c, nil
}

// dialError turns a failure while opening a connection into the error to
// report: the server's connection-level answer (TLS required, too many
// connections) rather than the lost connection it caused.
func (c *Conn) dialError(addr string, err error) error {
	var we *Error
	if errors.As(c.Err(), &we) {
		if we.Code == CodeTLSRequired {
			return fmt.Errorf("%w (%s)", we, addr)
		}
		return fmt.Errorf("%s: %w", addr, we)
	}
	return err
}

// authenticate finishes the handshake HELLO began: it proves the secret
// and checks the server's proof.
func (c *Conn) authenticate(ctx context.Context, hello *call, tr *auth.Transcript, secret string) error {
	b, err := c.finish(ctx, OpHello, hello)
	if err != nil {
		return err
	}
	if len(b) != auth.NonceSize {
		return Errorf(CodeMalformed, "HELLO answered %d bytes, not a %d-byte nonce", len(b), auth.NonceSize)
	}
	copy(tr.Server[:], b)
	proof := auth.ClientProof(secret, tr)
	b, err = c.Call(ctx, OpAuth, proof[:])
	if err != nil {
		return err
	}
	res, err := DecodeAuthResult(b)
	if err != nil {
		return err
	}
	want := auth.ServerProof(secret, tr)
	if !auth.ProofsEqual(want[:], res.Proof[:]) {
		return Errorf(CodeUnauthenticated, "the server did not prove it holds the secret of %s: it is not the cluster that key belongs to", tr.Access)
	}
	c.authRes = res
	c.serverIdle = res.IdleTimeout
	return nil
}

// NewConn runs the protocol over an established connection. It owns nc from
// now on.
func NewConn(nc net.Conn, o ConnOptions) (*Conn, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Conn{
		opts:    o,
		sendMax: o.MaxFrame,
		sem:     make(chan struct{}, o.MaxInflight),
		closed:  make(chan struct{}),
	}
	c.epoch = time.Now()
	c.nc = readConn{Conn: nc, c: c}
	c.w = newFrameWriter(c.nc, 64<<10)
	c.mu.calls = map[uint32]*call{}
	c.recvMax.Store(int64(o.MaxFrame))
	c.bufs.New = func() any { b := make([]byte, c.sendMax); return &b }
	c.pool.New = func() any {
		return &call{ch: make(chan inFrame, o.StreamFrames), abandon: make(chan struct{})}
	}
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		if err := c.w.run(); err != nil {
			c.fail(err)
		}
	}()
	go func() {
		defer c.wg.Done()
		c.fail(c.readLoop())
	}()
	if o.Liveness > 0 {
		c.wg.Add(1)
		go c.watch()
	}
	return c, nil
}

// watch gives the connection up when requests wait and nothing came from
// the server for Liveness, and sends a PING after half of that
// (ConnOptions). The PING has request id 0 and takes no in-flight slot
// (every slot may be held by requests the server is slow to answer); its
// answer matters only as bytes read.
func (c *Conn) watch() {
	defer c.wg.Done()
	live := c.opts.Liveness
	t := time.NewTicker(live / 8)
	defer t.Stop()
	var probed int64 = -1 // lastIO when the last PING went out
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		if c.nreq.Load() == 0 {
			continue
		}
		if c.uploads.Load() > 0 || c.delivering.Load() {
			c.lastIO.Store(c.now()) // not the server's silence: start again
			continue
		}
		last := c.lastIO.Load()
		quiet := time.Duration(c.now() - last)
		switch {
		case quiet >= live:
			c.opts.Logger.Warn("wire: giving up an unresponsive connection", "addr", c.nc.RemoteAddr(), "quiet", quiet.Round(time.Millisecond))
			c.fail(fmt.Errorf("%w: nothing from %v for %v", ErrUnresponsive, c.nc.RemoteAddr(), quiet.Round(time.Millisecond)))
			return
		case quiet >= live/2 && probed != last:
			probed = last
			c.w.send(outFrame{op: OpPing})
		}
	}
}

// Close closes the connection; requests in flight fail with ErrConnLost.
// It waits for the connection's goroutines.
func (c *Conn) Close() error {
	c.fail(ErrConnClosed)
	c.wg.Wait()
	return nil
}

// Err returns why the connection stopped, or nil while it works.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err
}

// Done is closed when the connection stops working.
func (c *Conn) Done() <-chan struct{} { return c.closed }

// Inflight is the number of requests in flight.
func (c *Conn) Inflight() int { return int(c.nreq.Load()) }

func (c *Conn) fail(err error) {
	c.once.Do(func() {
		if err == nil {
			err = ErrConnClosed
		}
		c.mu.Lock()
		c.mu.err = err
		c.mu.Unlock()
		close(c.closed)
		c.w.close()
		c.nc.Close()
	})
}

func (c *Conn) readLoop() error {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var hbuf [HeaderLen]byte
	for {
		h, body, err := ReadFrame(br, hbuf[:], int(c.recvMax.Load()))
		if err != nil {
			return err
		}
		if h.Flags&FlagResponse == 0 {
			return Errorf(CodeMalformed, "server sent a frame without the response flag")
		}
		f := inFrame{op: h.Op, flags: h.Flags, body: body}
		if h.Flags&FlagForwarded != 0 && c.opts.OnForwarded != nil {
			c.opts.OnForwarded(h.Op)
		}
		term := f.terminal()
		c.mu.Lock()
		cl := c.mu.calls[h.ID]
		if term && cl != nil {
			delete(c.mu.calls, h.ID)
		}
		c.mu.Unlock()
		if cl == nil {
			if h.ID == 0 && h.Flags&FlagError != 0 {
				// A connection-level error: the server closes next.
				return f.err()
			}
			continue
		}
		if term {
			c.nreq.Add(-1)
			<-c.sem
		}
		c.delivering.Store(true)
		select {
		case cl.ch <- f:
		case <-cl.abandon:
		case <-c.closed:
			return ErrConnClosed
		}
		c.delivering.Store(false)
	}
}

// start registers a call and queues its first frame.
func (c *Conn) start(ctx context.Context, f outFrame) (*call, error) {
	if id := txnOf(ctx); id != 0 && inTxn(f.op) {
		f.flags |= FlagTxn
		if f.b == nil {
			// The body (a batch of writes: up to a frame) is not copied.
			f.a, f.b = binary.BigEndian.AppendUint64(make([]byte, 0, 8), id), f.a
		} else {
			f.a = append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(f.a)), id), f.a...)
		}
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		c.w.release(&f)
		return nil, ctx.Err()
	case <-c.closed:
		c.w.release(&f)
		return nil, fmt.Errorf("%w: %v", ErrConnClosed, c.Err())
	}
	cl := c.pool.Get().(*call)
	c.mu.Lock()
	if c.mu.err != nil {
		err := c.mu.err
		c.mu.Unlock()
		<-c.sem
		c.w.release(&f)
		return nil, fmt.Errorf("%w: %v", ErrConnClosed, err)
	}
	for {
		c.mu.nextID++
		if c.mu.nextID == 0 {
			continue
		}
		if _, busy := c.mu.calls[c.mu.nextID]; !busy {
			break
		}
	}
	f.id = c.mu.nextID
	cl.id = f.id
	c.mu.calls[f.id] = cl
	c.mu.Unlock()
	if c.nreq.Load() == 0 {
		// An idle connection's silence says nothing: the wait starts now
		// (before the count, which makes watch look).
		c.lastIO.Store(c.now())
	}
	c.nreq.Add(1)
	if err := c.w.send(f); err != nil {
		c.forget(f.id)
		c.recycle(cl)
		return nil, fmt.Errorf("%w: %v", ErrConnClosed, err)
	}
	return cl, nil
}

// forget drops a call that never went out.
func (c *Conn) forget(id uint32) {
	c.mu.Lock()
	_, ok := c.mu.calls[id]
	delete(c.mu.calls, id)
	c.mu.Unlock()
	if ok {
		c.nreq.Add(-1)
		<-c.sem
	}
}

// abandon stops reading a call and tells the server with CANCEL. The call's
// slot is freed when the server's terminal frame arrives.
func (c *Conn) abandon(id uint32, cl *call) {
	if cl.abandoned.CompareAndSwap(false, true) {
		close(cl.abandon)
		c.w.send(outFrame{op: OpCancel, id: id})
	}
}

// recycle returns a call whose terminal frame the caller has received.
func (c *Conn) recycle(cl *call) {
	if !cl.abandoned.Load() {
		c.pool.Put(cl)
	}
}

// next waits for the call's next frame.
func (c *Conn) next(ctx context.Context, id uint32, cl *call) (inFrame, error) {
	select {
	case f := <-cl.ch:
		return f, nil
	case <-ctx.Done():
		c.abandon(id, cl)
		return inFrame{}, ctx.Err()
	case <-c.closed:
		select {
		case f := <-cl.ch:
			return f, nil
		default:
		}
		return inFrame{}, fmt.Errorf("%w: %v", ErrConnLost, c.Err())
	}
}

// Call sends a request whose answer is one frame and returns the answer's
// body, or the server's *Error.
func (c *Conn) Call(ctx context.Context, op Op, body []byte) ([]byte, error) {
	cl, err := c.begin(ctx, op, body)
	if err != nil {
		return nil, err
	}
	return c.finish(ctx, op, cl)
}

// begin sends a request whose answer finish then waits for: several may
// leave before the first answer comes back.
func (c *Conn) begin(ctx context.Context, op Op, body []byte) (*call, error) {
	return c.start(ctx, outFrame{op: op, a: body})
}

// finish waits for the one-frame answer of a request begin sent.
func (c *Conn) finish(ctx context.Context, op Op, cl *call) ([]byte, error) {
	id := cl.id
	f, err := c.next(ctx, id, cl)
	if err != nil {
		return nil, err
	}
	if !f.terminal() {
		c.abandon(id, cl)
		return nil, Errorf(CodeMalformed, "unexpected streamed answer to %s", op)
	}
	c.recycle(cl)
	if f.flags&FlagError != 0 {
		return nil, f.err()
	}
	return f.body, nil
}

// Ping asks the server for its limits.
func (c *Conn) Ping(ctx context.Context) (PingInfo, error) {
	b, err := c.Call(ctx, OpPing, nil)
	if err != nil {
		return PingInfo{}, err
	}
	return DecodePingInfo(b)
}

// CreateSpace implements Service.
func (c *Conn) CreateSpace(ctx context.Context, name string, s object.SpaceSettings) (object.SpaceInfo, error) {
	b, err := c.Call(ctx, OpCreateSpace, AppendCreateSpace(nil, name, &s))
	if err != nil {
		return object.SpaceInfo{}, err
	}
	return DecodeSpaceInfo(b)
}

// ListSpaces implements Service.
func (c *Conn) ListSpaces(ctx context.Context) ([]object.SpaceInfo, error) {
	b, err := c.Call(ctx, OpListSpaces, nil)
	if err != nil {
		return nil, err
	}
	return DecodeSpaceList(b)
}

// ClusterStatus asks for the server's cluster report (a JSON document).
func (c *Conn) ClusterStatus(ctx context.Context) ([]byte, error) {
	return c.Call(ctx, OpCluster, nil)
}

// NodeAdmin asks the server to drain or remove a node of its cluster.
func (c *Conn) NodeAdmin(ctx context.Context, action NodeAction, nodeID uint64) error {
	_, err := c.Call(ctx, OpNode, binary.BigEndian.AppendUint64([]byte{byte(action)}, nodeID))
	return err
}

// Keys sends a KEYS request: action, then its body; it returns the
// answer's JSON document (see KeyAction).
func (c *Conn) Keys(ctx context.Context, action KeyAction, body []byte) ([]byte, error) {
	return c.Call(ctx, OpKeys, append([]byte{byte(action)}, body...))
}

// Tokens sends a TOKENS request: action, then its body; it returns the
// answer's JSON document (see TokenAction).
func (c *Conn) Tokens(ctx context.Context, action TokenAction, body []byte) ([]byte, error) {
	return c.Call(ctx, OpTokens, append([]byte{byte(action)}, body...))
}

// Routes asks for the route table of a space (ROUTES).
func (c *Conn) Routes(ctx context.Context, space string) (RouteTable, error) {
	b, err := c.Call(ctx, OpRoutes, AppendName(nil, space))
	if err != nil {
		return RouteTable{}, err
	}
	return DecodeRouteTable(b)
}

// DeleteSpace implements Service.
func (c *Conn) DeleteSpace(ctx context.Context, name string) error {
	_, err := c.Call(ctx, OpDeleteSpace, AppendName(nil, name))
	return err
}

// Stat implements Service.
func (c *Conn) Stat(ctx context.Context, req *object.GetRequest) (object.Info, error) {
	b, err := c.Call(ctx, OpStat, AppendGetRequest(make([]byte, 0, getRequestSize(req)), req))
	if err != nil {
		return object.Info{}, err
	}
	return DecodeObjectInfo(b)
}

// Delete implements Service.
func (c *Conn) Delete(ctx context.Context, req *object.DeleteRequest) (object.Info, error) {
	b, err := c.Call(ctx, OpDelete, AppendDeleteRequest(nil, req))
	if err != nil {
		return object.Info{}, err
	}
	return DecodeObjectInfo(b)
}

// List implements Service.
func (c *Conn) List(ctx context.Context, req *object.ListRequest) (object.ListResult, error) {
	b, err := c.Call(ctx, OpList, AppendListRequest(nil, req))
	if err != nil {
		return object.ListResult{}, err
	}
	return DecodeListResult(b)
}

// Versions implements Service.
func (c *Conn) Versions(ctx context.Context, req *object.VersionsRequest) (object.VersionsResult, error) {
	b, err := c.Call(ctx, OpVersions, AppendVersionsRequest(nil, req))
	if err != nil {
		return object.VersionsResult{}, err
	}
	return DecodeVersionsResult(b)
}

// Clone makes a clone (object.Versioner.Clone).
func (c *Conn) Clone(ctx context.Context, req *object.CloneRequest) (object.Info, error) {
	b, err := c.Call(ctx, OpClone, AppendCloneRequest(nil, req))
	if err != nil {
		return object.Info{}, err
	}
	return DecodeCloneResult(b)
}

// Lineage reads a version's lineage (object.Versioner.Lineage).
func (c *Conn) Lineage(ctx context.Context, req *object.LineageRequest) (object.Lineage, error) {
	b, err := c.Call(ctx, OpLineage, AppendLineageRequest(nil, req))
	if err != nil {
		return object.Lineage{}, err
	}
	return DecodeLineage(b)
}

// Diff compares two versions (object.Versioner.Diff).
func (c *Conn) Diff(ctx context.Context, req *object.DiffRequest) (object.Diff, error) {
	b, err := c.Call(ctx, OpDiff, AppendDiffRequest(nil, req))
	if err != nil {
		return object.Diff{}, err
	}
	return DecodeDiff(b)
}

// Snapshot sends a SNAPSHOT request (AppendSnapshotRequest) and returns
// the snapshots answered: the one made, or those listed (none for a
// delete).
func (c *Conn) Snapshot(ctx context.Context, action byte, space, name string) ([]object.SnapshotInfo, error) {
	b, err := c.Call(ctx, OpSnapshot, AppendSnapshotRequest(nil, action, space, name))
	if err != nil {
		return nil, err
	}
	if action == SnapshotDelete {
		if len(b) != 0 {
			return nil, Errorf(CodeMalformed, "SNAPSHOT delete answered %d bytes", len(b))
		}
		return nil, nil
	}
	return DecodeSnapshotInfos(b)
}

// Batch sends items as one BATCH frame and returns one result per item.
// The error is non-nil only if the batch as a whole failed.
func (c *Conn) Batch(ctx context.Context, items []BatchItem) ([]BatchResult, error) {
	body := AppendBatchRequest(nil, items)
	if len(body) > c.sendMax {
		return nil, Errorf(CodeTooLarge, "batch of %d bytes over the %d frame limit", len(body), c.sendMax)
	}
	b, err := c.Call(ctx, OpBatch, body)
	if err != nil {
		return nil, err
	}
	rs, err := DecodeBatchResponse(b)
	if err == nil && len(rs) != len(items) {
		err = Errorf(CodeMalformed, "batch answered %d of %d items", len(rs), len(items))
	}
	return rs, err
}

// Get implements Service: the reader streams the bytes as DATA frames
// arrive. Closing it early cancels the request on the server.
func (c *Conn) Get(ctx context.Context, req *object.GetRequest) (object.Info, io.ReadCloser, error) {
	info, inline, gs, err := c.get(ctx, req)
	if err != nil {
		return object.Info{}, nil, err
	}
	if gs == nil {
		return info, io.NopCloser(bytes.NewReader(inline)), nil
	}
	return info, gs, nil
}

// GetBytes reads a whole version (or range) into memory. A small object
// comes back in the answer frame itself and is returned without a copy.
func (c *Conn) GetBytes(ctx context.Context, req *object.GetRequest) (object.Info, []byte, error) {
	info, inline, gs, err := c.get(ctx, req)
	if err != nil || gs == nil {
		return info, inline, err
	}
	defer gs.Close()
	want := info.Size - req.Offset
	if req.Length >= 0 && req.Length < want {
		want = req.Length
	}
	buf := bytes.NewBuffer(make([]byte, 0, max64(min(want, 64<<20), 0)+1))
	if _, err := buf.ReadFrom(gs); err != nil {
		return object.Info{}, nil, err
	}
	return info, buf.Bytes(), nil
}

// get sends a GET and reads its first frame. A nil stream means the
// inline bytes are the whole answer.
func (c *Conn) get(ctx context.Context, req *object.GetRequest) (object.Info, []byte, *getStream, error) {
	cl, err := c.start(ctx, outFrame{op: OpGet, a: AppendGetRequest(make([]byte, 0, getRequestSize(req)), req)})
	if err != nil {
		return object.Info{}, nil, nil, err
	}
	f, err := c.next(ctx, cl.id, cl)
	if err != nil {
		return object.Info{}, nil, nil, err
	}
	if f.flags&FlagError != 0 {
		c.recycle(cl)
		return object.Info{}, nil, nil, f.err()
	}
	info, inline, err := DecodeObjectInfoPrefix(f.body)
	if err != nil {
		if !f.terminal() {
			c.abandon(cl.id, cl)
		}
		return object.Info{}, nil, nil, err
	}
	if f.terminal() {
		c.recycle(cl)
		return info, inline, nil, nil
	}
	return info, nil, &getStream{c: c, ctx: ctx, id: cl.id, cl: cl, cur: inline}, nil
}

// getStream reads the DATA frames of a GET answer.
type getStream struct {
	c   *Conn
	ctx context.Context // the request's; lives exactly as long as the stream
	id  uint32
	cl  *call
	cur []byte
	eof bool
	err error
}

func (g *getStream) Read(p []byte) (int, error) {
	for len(g.cur) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		if g.eof {
			return 0, io.EOF
		}
		f, err := g.c.next(g.ctx, g.id, g.cl)
		if err != nil {
			g.err = err
			return 0, err
		}
		switch {
		case f.flags&FlagError != 0:
			g.err = f.err()
			g.c.recycle(g.cl)
			return 0, g.err
		case f.op != OpData:
			g.err = Errorf(CodeMalformed, "%s frame inside a GET stream", f.op)
			g.c.abandon(g.id, g.cl)
			return 0, g.err
		}
		g.cur = f.body
		if f.flags&FlagEnd != 0 {
			g.eof = true
			g.c.recycle(g.cl)
		}
	}
	n := copy(p, g.cur)
	g.cur = g.cur[n:]
	return n, nil
}

// Close abandons the stream if it has not ended.
func (g *getStream) Close() error {
	if !g.eof && g.err == nil {
		g.c.abandon(g.id, g.cl)
		g.err = errors.New("wire: read from a closed stream")
	}
	return nil
}

// Put implements Service. body is sent as the PUT frame's inline bytes and
// DATA frames; with req.Size >= 0 exactly req.Size bytes are read from it.
// At most StreamFrames frames of the upload wait in the send queue.
func (c *Conn) Put(ctx context.Context, req *object.PutRequest, body io.Reader) (object.Info, error) {
	return c.put(ctx, req, nil, body)
}

// PutBytes is Put from memory: data is sent without a copy (it must not
// change until PutBytes returns).
func (c *Conn) PutBytes(ctx context.Context, req *object.PutRequest, data []byte) (object.Info, error) {
	r := *req
	r.Size = int64(len(data))
	return c.put(ctx, &r, data, nil)
}

// put uploads data (if body is nil) or body.
func (c *Conn) put(ctx context.Context, req *object.PutRequest, data []byte, body io.Reader) (object.Info, error) {
	hdr := AppendPutRequest(make([]byte, 0, putRequestSize(req)), req)
	if len(hdr) > c.sendMax/2 {
		return object.Info{}, Errorf(CodeTooLarge, "put header of %d bytes", len(hdr))
	}
	if body == nil && len(hdr)+len(data)+txnOverhead(ctx) <= c.sendMax {
		b, err := c.callOne(ctx, outFrame{op: OpPut, a: hdr, b: data})
		if err != nil {
			return object.Info{}, err
		}
		return DecodeObjectInfo(b)
	}
	// The server's reader may wait for the handler to take this body
	// (its writes, its chunk copies): the connection's liveness watch
	// stands aside until the answer (ConnOptions.Liveness).
	c.uploads.Add(1)
	defer c.uploads.Add(-1)
	remaining := req.Size // -1: until EOF
	if body == nil {
		remaining = int64(len(data))
	}
	credit := make(chan struct{}, c.opts.StreamFrames)
	drain := func() {
		for range cap(credit) {
			credit <- struct{}{}
		}
	}
	var (
		cl    *call
		id    uint32
		early *inFrame
	)
	fail := func(err error) (object.Info, error) {
		if cl != nil {
			c.abandon(id, cl)
		}
		drain()
		return object.Info{}, err
	}
	for first := true; ; first = false {
		room := c.sendMax
		if first {
			room -= len(hdr) + txnOverhead(ctx)
		}
		if remaining >= 0 && int64(room) > remaining {
			room = int(remaining)
		}
		var chunk []byte
		var bp *[]byte
		last := false
		if body == nil {
			chunk, data = data[:room], data[room:]
			last = len(data) == 0
		} else {
			bp = c.bufs.Get().(*[]byte)
			n, err := io.ReadFull(body, (*bp)[:room])
			chunk = (*bp)[:n]
			switch {
			case err == nil:
				last = remaining >= 0 && int64(n) == remaining
			case (err == io.EOF || err == io.ErrUnexpectedEOF) && remaining < 0:
				last = true
			case err == io.EOF || err == io.ErrUnexpectedEOF:
				c.bufs.Put(bp)
				return fail(Errorf(CodeTruncated, "body ended %d bytes short of its declared size", remaining-int64(n)))
			default:
				c.bufs.Put(bp)
				return fail(fmt.Errorf("wire: reading the body: %w", err))
			}
		}
		if remaining >= 0 {
			remaining -= int64(len(chunk))
		}
		select {
		case credit <- struct{}{}:
		case <-ctx.Done():
			if bp != nil {
				c.bufs.Put(bp)
			}
			return fail(ctx.Err())
		}
		f := outFrame{op: OpData, id: id, b: chunk}
		f.done = func() {
			if bp != nil {
				c.bufs.Put(bp)
			}
			<-credit
		}
		if first {
			f.op, f.a = OpPut, hdr
			if !last {
				f.flags = FlagMore
			}
			var err error
			if cl, err = c.start(ctx, f); err != nil {
				drain()
				return object.Info{}, err
			}
			id = cl.id
		} else {
			if last {
				f.flags = FlagEnd
			}
			if err := c.w.send(f); err != nil {
				break // the answer (ErrConnLost) comes from next
			}
		}
		if last {
			break
		}
		// The server may answer before the end (a failed precondition):
		// stop sending then.
		select {
		case fr := <-cl.ch:
			early = &fr
		default:
		}
		if early != nil {
			c.abandon(id, cl)
			break
		}
	}
	drain()
	var f inFrame
	if early != nil {
		f = *early
	} else {
		var err error
		if f, err = c.next(ctx, id, cl); err != nil {
			return object.Info{}, err
		}
		if f.terminal() {
			c.recycle(cl)
		}
	}
	if f.flags&FlagError != 0 {
		return object.Info{}, f.err()
	}
	return DecodeObjectInfo(f.body)
}

// callOne sends one frame and waits for a one-frame answer.
func (c *Conn) callOne(ctx context.Context, f outFrame) ([]byte, error) {
	cl, err := c.start(ctx, f)
	if err != nil {
		return nil, err
	}
	id := cl.id
	r, err := c.next(ctx, id, cl)
	if err != nil {
		return nil, err
	}
	if !r.terminal() {
		c.abandon(id, cl)
		return nil, Errorf(CodeMalformed, "unexpected streamed answer to %s", f.op)
	}
	c.recycle(cl)
	if r.flags&FlagError != 0 {
		return nil, r.err()
	}
	return r.body, nil
}
