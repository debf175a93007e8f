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
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/object"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("wire: server closed")

// Metrics receives one observation per request. It is called from request
// goroutines concurrently and must not block.
type Metrics interface {
	RequestDone(op Op, code Code, elapsed time.Duration)
}

// ServerOptions configure a Server. The zero value means every default.
type ServerOptions struct {
	// MaxFrame is the largest frame body accepted and sent (default
	// DefaultMaxFrame, 1 MiB; at least MinMaxFrame). Larger bodies stream as
	// several DATA frames.
	MaxFrame int
	// MaxInflightPerConn bounds the requests of one connection being served
	// at once (default 256). Further requests wait in the socket: the
	// connection's reader stops until one finishes.
	MaxInflightPerConn int
	// StreamFrames is how many DATA frames one stream may have buffered in
	// either direction (default 4).
	StreamFrames int
	// Logger receives connection-level events (default: discarded).
	Logger *slog.Logger
	// Metrics, if set, observes every request.
	Metrics Metrics

	// Keys are the access keys connections authenticate with (HELLO,
	// AUTH) and whose grants every request is checked against. Required
	// unless AllowUnauthenticated.
	Keys *auth.Keyring
	// AllowUnauthenticated serves every request without authentication,
	// as if by a cluster admin: for tests of the protocol alone. A node
	// never sets it.
	AllowUnauthenticated bool
	// TLS, if set, makes the port serve TLS only; a client that speaks
	// plain TCP to it is answered CodeTLSRequired.
	TLS *tls.Config
	// HandshakeTimeout bounds the time from accepting a connection to its
	// successful AUTH, the TLS handshake included (default 10s).
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection that has received nothing for this
	// long while it has no request in flight or an upload open, that has
	// not finished a frame it started this long ago, or whose client has
	// not taken an answer for this long (default 60s). AUTH tells the
	// client, so that it stops using a connection before then.
	IdleTimeout time.Duration
	// MaxConns bounds the connections open at once; more are answered
	// CodeUnavailable and closed (default 4096).
	MaxConns int
	// MaxAuthFailures closes a connection after this many failed AUTHs
	// or requests sent before authenticating (default 3).
	MaxAuthFailures int
}

// EnsureDefaults fills zero fields with their defaults.
func (o *ServerOptions) EnsureDefaults() {
	if o.MaxFrame == 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.MaxInflightPerConn == 0 {
		o.MaxInflightPerConn = 256
	}
	if o.StreamFrames == 0 {
		o.StreamFrames = 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 60 * time.Second
	}
	if o.MaxConns == 0 {
		o.MaxConns = 4096
	}
	if o.MaxAuthFailures == 0 {
		o.MaxAuthFailures = 3
	}
}

// Validate reports every invalid field.
func (o *ServerOptions) Validate() error {
	var errs []error
	if o.MaxFrame < MinMaxFrame || o.MaxFrame > 1<<30 {
		errs = append(errs, fmt.Errorf("wire: MaxFrame %d outside [%d, 1 GiB]", o.MaxFrame, MinMaxFrame))
	}
	if o.MaxInflightPerConn < 1 {
		errs = append(errs, fmt.Errorf("wire: MaxInflightPerConn %d < 1", o.MaxInflightPerConn))
	}
	if o.StreamFrames < 1 {
		errs = append(errs, fmt.Errorf("wire: StreamFrames %d < 1", o.StreamFrames))
	}
	if o.Keys == nil && !o.AllowUnauthenticated {
		errs = append(errs, errors.New("wire: a server needs Keys to authenticate connections with (AllowUnauthenticated is for tests)"))
	}
	if o.HandshakeTimeout < 10*time.Millisecond || o.IdleTimeout < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("wire: HandshakeTimeout %v and IdleTimeout %v must be at least 10ms", o.HandshakeTimeout, o.IdleTimeout))
	}
	if o.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("wire: MaxConns %d < 1", o.MaxConns))
	}
	if o.MaxAuthFailures < 1 {
		errs = append(errs, fmt.Errorf("wire: MaxAuthFailures %d < 1", o.MaxAuthFailures))
	}
	return errors.Join(errs...)
}

// Stats are counters of a Server.
type Stats struct {
	Conns    int64 // open connections
	Inflight int64 // requests being served
	Refused  int64 // connections refused over MaxConns
	Cut      int64 // connections closed by a deadline (handshake, idle, frame, stalled reader)
	// PeakStreamFrames is the most DATA frames any upload stream ever had
	// buffered between the connection reader and the Service.
	PeakStreamFrames int64
}

// Server serves the native protocol for a Service. See docs/protocol.md.
type Server struct {
	svc  object.Service
	opts ServerOptions
	log  *slog.Logger

	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*serverConn]struct{}
	}
	closing  atomic.Bool
	wg       sync.WaitGroup // Serve loops and connections
	inflight atomic.Int64
	nconns   atomic.Int64
	peak     atomic.Int64
	refused  atomic.Int64
	cut      atomic.Int64
	bufs     sync.Pool     // *[]byte of MaxFrame capacity
	small    sync.Pool     // *[]byte for message bodies
	workers  *workers      // run request handlers
	epoch    time.Time     // connection clocks count from here (now)
	refusing chan struct{} // bounds the refusals being answered at once
	clock    atomic.Int64  // now, as sweep last read it: the hot paths' clock
	sweeping sync.Once
	stopSwp  chan struct{}
}

// now is the server's monotonic clock for connection deadlines.
func (s *Server) now() int64 { return int64(time.Since(s.epoch)) }

// coarse is now as the sweeper last read it (a few times per deadline):
// what the per-frame and per-request paths note times with, without
// reading the clock.
func (s *Server) coarse() int64 { return s.clock.Load() }

// NewServer builds a Server. It panics if o (after EnsureDefaults) fails
// Validate; call Validate first to check options from users.
func NewServer(svc object.Service, o ServerOptions) *Server {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		panic(err)
	}
	s := &Server{svc: svc, opts: o, log: o.Logger, workers: newWorkers(10 * time.Second), epoch: time.Now(), stopSwp: make(chan struct{}), refusing: make(chan struct{}, 16)}
	s.mu.listeners = map[net.Listener]struct{}{}
	s.mu.conns = map[*serverConn]struct{}{}
	max := o.MaxFrame
	s.bufs.New = func() any { b := make([]byte, max); return &b }
	s.small.New = func() any { b := make([]byte, 0, 512); return &b }
	return s
}

// Stats returns current counters.
func (s *Server) Stats() Stats {
	return Stats{Conns: s.nconns.Load(), Inflight: s.inflight.Load(), PeakStreamFrames: s.peak.Load(),
		Refused: s.refused.Load(), Cut: s.cut.Load()}
}

// Serve accepts connections on l until Shutdown or Close, and then returns
// ErrServerClosed. l is closed when Serve returns.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.mu.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.sweeping.Do(func() {
		s.wg.Add(1)
		go s.sweep()
	})
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		if len(s.mu.conns) >= s.opts.MaxConns {
			s.mu.Unlock()
			s.refused.Add(1)
			select {
			case s.refusing <- struct{}{}:
				s.wg.Add(1)
				go s.refuse(nc)
			default:
				nc.Close() // too many refusals under way to answer this one
			}
			continue
		}
		c := s.newConn(nc)
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// Shutdown stops accepting connections, answers new requests with
// CodeUnavailable, waits for in-flight requests to finish (or ctx to end),
// then closes every connection and waits for all goroutines. It is
// idempotent. It returns ctx.Err() if ctx ended first.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.closing.CompareAndSwap(false, true) {
		close(s.stopSwp)
	}
	s.mu.Lock()
	for l := range s.mu.listeners {
		l.Close()
	}
	s.mu.Unlock()
	var err error
	if s.inflight.Load() > 0 {
		t := time.NewTicker(5 * time.Millisecond)
	wait:
		for s.inflight.Load() > 0 {
			select {
			case <-ctx.Done():
				err = ctx.Err()
				break wait
			case <-t.C:
			}
		}
		t.Stop()
	}
	s.mu.Lock()
	for c := range s.mu.conns {
		c.close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.workers.close()
	return err
}

// Close is Shutdown without waiting for in-flight requests.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// serverConn is one client connection: a reader goroutine (serve), a writer
// goroutine; requests run on the server's worker pool.
type serverConn struct {
	s      *Server
	raw    net.Conn // as accepted; closing it ends everything
	nc     net.Conn // raw, or the TLS connection over it; set by serve
	w      *frameWriter
	ctx    context.Context // canceled when the connection goes away
	cancel context.CancelFunc
	sem    chan struct{} // in-flight requests
	mu     struct {
		sync.Mutex
		reqs map[uint32]*request
	}
	uploads map[uint32]*bodyStream // reader goroutine only
	txns    struct {
		sync.Mutex
		m      map[uint64]*object.Txn // open transactions (txn.go)
		next   uint64
		closed bool // the connection's end rolled them back: no more
	}
	handlers sync.WaitGroup
	once     sync.Once
	auth     connAuth              // reader goroutine only (see connAuth)
	keyAt    atomic.Pointer[keyAt] // the key, as last looked up (key)

	// Deadlines (sweep): times on the server's clock (Server.now), 0 when
	// not running.
	accepted   int64
	authedAt   atomic.Bool  // past the handshake (or none is needed)
	lastRead   atomic.Int64 // when the last frame (or its header) arrived, or a request finished
	busy       atomic.Int64 // requests in flight
	frameStart atomic.Int64 // a frame's header arrived and its body has not
	writeStart atomic.Int64 // a write to the socket is blocked since
	openUps    atomic.Int64 // uploads open (len(uploads), for the sweeper)
	pushing    atomic.Bool  // the reader waits for a handler to take an upload's frame
}

type request struct {
	// The request's context; it also carries what the service reports
	// about the request for its answer's flags (MarkForwarded).
	context.Context
	cancel    context.CancelFunc
	body      *bodyStream // nil unless a streamed PUT
	forwarded atomic.Bool
}

func (s *Server) newConn(nc net.Conn) *serverConn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &serverConn{
		s: s, raw: nc, ctx: ctx, cancel: cancel,
		sem:      make(chan struct{}, s.opts.MaxInflightPerConn),
		uploads:  map[uint32]*bodyStream{},
		accepted: s.now(),
	}
	c.lastRead.Store(c.accepted)
	c.mu.reqs = map[uint32]*request{}
	return c
}

// close tears the connection down from outside (Shutdown, Close, sweep).
func (c *serverConn) close() {
	c.once.Do(func() {
		c.cancel()
		c.raw.Close()
		// Its transactions end with it (nothing of theirs is locked).
		c.txns.Lock()
		for _, tx := range c.txns.m {
			tx.Rollback()
		}
		c.txns.m, c.txns.closed = nil, true
		c.txns.Unlock()
	})
}

// refuse answers a connection over MaxConns with CodeUnavailable (after
// the TLS handshake on a TLS port, so the client can read it) and closes it.
func (s *Server) refuse(nc net.Conn) {
	defer s.wg.Done()
	defer func() { <-s.refusing }()
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Second))
	var w io.Writer = nc
	if s.opts.TLS != nil {
		tc := tls.Server(nc, s.opts.TLS)
		if tc.Handshake() != nil {
			return
		}
		w = tc
	}
	w.Write(AppendFrame(nil, OpPing, FlagResponse|FlagError, 0, AppendError(nil,
		Errorf(CodeUnavailable, "too many connections (%d): this node refuses more; try another node, or later", s.opts.MaxConns))))
}

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	head []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// startTLS sets c.nc for a TLS port: a TLS handshake when the client
// starts one, CodeTLSRequired when it speaks the protocol in the clear.
// It reports whether the connection goes on.
func (c *serverConn) startTLS() bool {
	s := c.s
	deadline := s.epoch.Add(time.Duration(c.accepted) + s.opts.HandshakeTimeout)
	c.raw.SetDeadline(deadline)
	var first [1]byte
	if _, err := io.ReadFull(c.raw, first[:]); err != nil {
		return false
	}
	pc := &prefixConn{Conn: c.raw, head: first[:]}
	switch first[0] {
	case 0x16: // a TLS handshake record
	case Version:
		c.raw.Write(AppendFrame(nil, OpPing, FlagResponse|FlagError, 0, AppendError(nil,
			Errorf(CodeTLSRequired, "this port serves TLS only: connect with TLS (cairn --ca FILE, or --tls to trust the system's roots)"))))
		lingerClose(c.raw)
		return false
	default:
		return false
	}
	tc := tls.Server(pc, s.opts.TLS)
	if err := tc.Handshake(); err != nil {
		s.log.Debug("wire: TLS handshake failed", "remote", c.raw.RemoteAddr(), "err", err)
		return false
	}
	c.raw.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	c.auth.tlsState = &st
	c.nc = tc
	return true
}

// lingerClose ends the sending side of nc and reads what the client still
// sends (briefly, and a bounded amount), so that the answer written last
// reaches it: closing a socket with unread input resets the connection,
// and a reset can discard the answer before the client reads it.
func lingerClose(nc net.Conn) {
	cw, ok := nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	nc.SetReadDeadline(time.Now().Add(time.Second))
	io.Copy(io.Discard, io.LimitReader(nc, 1<<16))
}

// timedWriter notes when a write to the socket blocks (for sweep).
type timedWriter struct {
	w     io.Writer
	c     *serverConn
	start *atomic.Int64
}

func (t timedWriter) Write(p []byte) (int, error) {
	t.start.Store(max(t.c.s.coarse(), 1))
	n, err := t.w.Write(p)
	t.start.Store(0)
	return n, err
}

// sweep closes connections past their deadlines (ServerOptions). It runs
// from the first Serve until Shutdown.
func (s *Server) sweep() {
	defer s.wg.Done()
	every := min(s.opts.IdleTimeout, s.opts.HandshakeTimeout) / 4
	every = min(max(every, 5*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopSwp:
			return
		case <-t.C:
		}
		now := s.now()
		s.clock.Store(now)
		// Times noted with the coarse clock lag it by up to one tick:
		// the idle limits allow for it, so no connection is cut before a
		// whole IdleTimeout has passed.
		idle, hs := int64(s.opts.IdleTimeout+every), int64(s.opts.HandshakeTimeout)
		s.mu.Lock()
		for c := range s.mu.conns {
			why := ""
			switch fs, ws := c.frameStart.Load(), c.writeStart.Load(); {
			case !c.authedAt.Load() && now-c.accepted > hs:
				why = "no authentication within the handshake timeout"
			case fs != 0 && now-fs > idle:
				why = "a frame not finished within the idle timeout"
			case ws != 0 && now-ws > idle:
				why = "the client took no answer within the idle timeout"
			case (c.busy.Load() == 0 || c.openUps.Load() > 0) && !c.pushing.Load() && now-c.lastRead.Load() > idle:
				why = "idle (nothing received) for the idle timeout"
			}
			if why != "" {
				s.cut.Add(1)
				s.log.Debug("wire: closing a connection", "remote", c.raw.RemoteAddr(), "why", why)
				c.close()
			}
		}
		s.mu.Unlock()
	}
}

func (c *serverConn) serve() {
	s := c.s
	s.nconns.Add(1)
	defer func() {
		s.nconns.Add(-1)
		s.mu.Lock()
		delete(s.mu.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	c.nc = c.raw
	if s.opts.TLS != nil && !c.startTLS() {
		c.close()
		return
	}
	if s.opts.AllowUnauthenticated {
		c.authedAt.Store(true)
	}
	c.w = newFrameWriter(timedWriter{w: c.nc, c: c, start: &c.writeStart}, 64<<10)
	c.w.pool = &s.small
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		if err := c.w.run(); err != nil {
			c.close()
		}
	}()
	err := c.readLoop()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("wire: connection ended", "remote", c.nc.RemoteAddr(), "err", err)
	}
	// Bodies not yet at END are truncated: their Service calls fail and
	// store nothing.
	for id := range c.uploads {
		c.dropUpload(id, true)
	}
	var we *Error
	if !errors.As(err, &we) {
		// The peer is gone: nobody wants the answers.
		c.cancel()
	}
	c.handlers.Wait()
	c.cancel()
	// Flush what is queued (a framing error's reply) but do not wait on a
	// peer that stopped reading.
	c.raw.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.w.close()
	<-writerDone
	c.close()
}

// readLoop reads frames until the connection fails or a framing error makes
// the stream unrecoverable; the latter is answered and returned as *Error.
func (c *serverConn) readLoop() error {
	s := c.s
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var hbuf [HeaderLen]byte
	for {
		h, body, err := c.readFrame(br, hbuf[:])
		if err != nil {
			var we *Error
			if errors.As(err, &we) {
				id := h.ID
				if h.Version != Version {
					id = 0
				}
				c.sendError(h.Op, id, we)
			}
			return err
		}
		if h.Flags&FlagResponse != 0 || h.Flags&^knownFlags != 0 {
			c.sendError(h.Op, h.ID, Errorf(CodeMalformed, "bad flags 0x%04x on a request", h.Flags))
			continue
		}
		if !c.auth.authed && !s.opts.AllowUnauthenticated && h.Op != OpPing && h.Op != OpHello && h.Op != OpAuth {
			c.sendError(h.Op, h.ID, Errorf(CodeUnauthenticated, "authenticate first (HELLO, AUTH) with an access key: cairn and the Go client take one from --access-key/--secret-key, CAIRN_ACCESS_KEY/CAIRN_SECRET_KEY or ~/.config/cairn/credentials"))
			if err := c.strike(); err != nil {
				return err
			}
			continue
		}
		switch h.Op {
		case OpData:
			c.data(h, body)
			continue
		case OpCancel:
			c.cancelRequest(h.ID)
			continue
		case OpPing:
			c.send(OpPing, FlagResponse, h.ID, AppendPingInfo(nil, PingInfo{
				MaxFrame: uint32(s.opts.MaxFrame), MaxInflight: uint32(s.opts.MaxInflightPerConn)}))
			continue
		case OpHello:
			c.hello(h, body)
			continue
		case OpAuth:
			if err := c.authenticate(h, body); err != nil {
				return err
			}
			continue
		}
		if !h.Op.Known() {
			c.sendError(h.Op, h.ID, Errorf(CodeUnknownOp, "opcode 0x%02x", uint8(h.Op)))
			continue
		}
		if h.Flags&FlagMore != 0 && h.Op != OpPut {
			c.sendError(h.Op, h.ID, Errorf(CodeMalformed, "%s cannot stream a body", h.Op))
			continue
		}
		if s.closing.Load() {
			c.sendError(h.Op, h.ID, Errorf(CodeUnavailable, "server shutting down"))
			continue
		}
		c.mu.Lock()
		_, dup := c.mu.reqs[h.ID]
		c.mu.Unlock()
		if dup {
			c.sendError(h.Op, h.ID, Errorf(CodeMalformed, "request id %d is in use", h.ID))
			continue
		}
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			return net.ErrClosed
		}
		c.start(h, body)
	}
}

// preAuthMaxFrame bounds a frame's body before the connection has
// authenticated.
const preAuthMaxFrame = 4 << 10

// readFrame is ReadFrame that notes, for sweep, when the frame arrived and
// whether its body is still on its way.
func (c *serverConn) readFrame(br *bufio.Reader, hbuf []byte) (Header, []byte, error) {
	if _, err := io.ReadFull(br, hbuf[:HeaderLen]); err != nil {
		return Header{}, nil, err
	}
	now := c.s.coarse()
	c.lastRead.Store(now)
	h := ParseHeader(hbuf)
	limit := c.s.opts.MaxFrame
	if !c.auth.authed && !c.s.opts.AllowUnauthenticated {
		// Before authentication only small frames make sense (PING,
		// HELLO, AUTH): a stranger does not get a frame-sized buffer.
		limit = preAuthMaxFrame
	}
	if err := h.Check(limit); err != nil {
		return h, nil, err
	}
	if h.Len == 0 {
		return h, nil, nil
	}
	body := make([]byte, h.Len)
	if br.Buffered() < int(h.Len) {
		c.frameStart.Store(max(now, 1))
		defer c.frameStart.Store(0)
	}
	if _, err := io.ReadFull(br, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, err
	}
	c.lastRead.Store(c.s.coarse())
	return h, body, nil
}

// data routes a DATA frame to its upload stream. Frames for unknown ids
// (finished, canceled or failed requests) are dropped.
func (c *serverConn) data(h Header, body []byte) {
	b := c.uploads[h.ID]
	if b == nil {
		return
	}
	// While the handler is slow to take the body, the server is the one
	// waiting: no idle time accrues against the client.
	c.pushing.Store(true)
	b.push(body, c.ctx.Done())
	c.lastRead.Store(c.s.coarse())
	c.pushing.Store(false)
	if h.Flags&FlagEnd != 0 {
		b.end()
		c.dropUpload(h.ID, false)
	}
}

// dropUpload forgets an upload stream, failing it first if cancel.
// Reader goroutine only.
func (c *serverConn) dropUpload(id uint32, cancel bool) {
	if b := c.uploads[id]; b != nil {
		if cancel {
			b.cancel()
		}
		delete(c.uploads, id)
		c.openUps.Add(-1)
	}
}

func (c *serverConn) cancelRequest(id uint32) {
	c.dropUpload(id, true)
	c.mu.Lock()
	r := c.mu.reqs[id]
	c.mu.Unlock()
	if r != nil {
		r.cancel()
	}
}

type reqContextKey struct{}

func (r *request) Value(k any) any {
	if k == (reqContextKey{}) {
		return r
	}
	return r.Context.Value(k)
}

// MarkForwarded records, in the context of the request being served, that
// this node did not hold the lease of the request's range and passed the
// request on; the answer then carries FlagForwarded. It does nothing with a
// context that is not a request's.
func MarkForwarded(ctx context.Context) {
	if r, ok := ctx.Value(reqContextKey{}).(*request); ok {
		r.forwarded.Store(true)
	}
}

func forwardedFlag(ctx context.Context) uint16 {
	if r, ok := ctx.(*request); ok && r.forwarded.Load() {
		return FlagForwarded
	}
	return 0
}

// start registers a request and runs it on its own goroutine.
func (c *serverConn) start(h Header, body []byte) {
	s := c.s
	cctx, cancel := context.WithCancel(c.ctx)
	r := &request{Context: cctx, cancel: cancel}
	ctx := context.Context(r)
	var txnID uint64
	if h.Flags&FlagTxn != 0 {
		if !inTxn(h.Op) || len(body) < 8 {
			cancel()
			<-c.sem
			c.sendError(h.Op, h.ID, Errorf(CodeMalformed, "%s cannot run in a transaction, or has no transaction id", h.Op))
			return
		}
		txnID, body = binary.BigEndian.Uint64(body), body[8:]
	}
	var put object.PutRequest
	var putBody io.Reader
	if h.Op == OpPut {
		var inline []byte
		var err error
		put, inline, err = DecodePutRequest(body)
		if err != nil {
			cancel()
			<-c.sem
			c.sendError(h.Op, h.ID, err.(*Error))
			return
		}
		if put.Size >= 0 && int64(len(inline)) > put.Size {
			cancel()
			<-c.sem
			c.sendError(h.Op, h.ID, Errorf(CodeInvalidArgument, "body longer than its declared %d bytes", put.Size))
			return
		}
		if e := c.allow(put.Space, auth.Write); e != nil {
			// Refused before the body: its DATA frames find no stream.
			cancel()
			<-c.sem
			c.sendError(h.Op, h.ID, e)
			return
		}
		if h.Flags&FlagMore != 0 {
			b := newBodyStream(inline, put.Size, s.opts.StreamFrames, c.observeQueue)
			c.uploads[h.ID] = b
			c.openUps.Add(1)
			r.body = b
			putBody = b
		} else {
			putBody = bytes.NewReader(inline)
		}
	}
	c.mu.Lock()
	c.mu.reqs[h.ID] = r
	c.mu.Unlock()
	s.inflight.Add(1)
	c.busy.Add(1)
	c.handlers.Add(1)
	s.workers.run(func() {
		var start time.Time
		if s.opts.Metrics != nil {
			start = time.Now()
		}
		code := c.safeHandle(ctx, h, txnID, body, &put, putBody)
		if r.body != nil {
			r.body.finish()
		}
		cancel()
		if s.opts.Metrics != nil {
			s.opts.Metrics.RequestDone(h.Op, code, time.Since(start))
		}
		// Idle time counts from the last answer (sweep reads busy first).
		c.lastRead.Store(s.coarse())
		c.busy.Add(-1)
		<-c.sem
		s.inflight.Add(-1)
		c.handlers.Done()
	})
}

func (c *serverConn) observeQueue(depth int) {
	for {
		p := c.s.peak.Load()
		if int64(depth) <= p || c.s.peak.CompareAndSwap(p, int64(depth)) {
			return
		}
	}
}

// unregister removes a request before its terminal frame is sent, so the id
// is free again when the client sees the answer.
func (c *serverConn) unregister(id uint32) {
	c.mu.Lock()
	delete(c.mu.reqs, id)
	c.mu.Unlock()
}

// safeHandle is handle that turns a panic in the service into a
// CodeInternal answer (logged with its stack) instead of a crash of the
// whole server, as net/http does for its handlers.
func (c *serverConn) safeHandle(ctx context.Context, h Header, txnID uint64, body []byte, put *object.PutRequest, putBody io.Reader) (code Code) {
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("request handler panicked", "op", h.Op, "panic", p, "stack", string(debug.Stack()))
			c.unregister(h.ID)
			code = c.sendError(h.Op, h.ID, Errorf(CodeInternal, "internal error (logged by the server)"))
		}
	}()
	return c.handle(ctx, h, txnID, body, put, putBody)
}

// handle runs one request (in transaction txnID, if not 0) and sends its
// answer. It returns the answer's code.
func (c *serverConn) handle(ctx context.Context, h Header, txnID uint64, body []byte, put *object.PutRequest, putBody io.Reader) Code {
	svc := c.s.svc
	id := h.ID
	var (
		resp []byte
		err  error
	)
	// A request flagged TXN runs in that transaction of the connection.
	var tx *object.Txn
	if txnID != 0 {
		if tx, err = c.txn(txnID); err != nil {
			c.unregister(id)
			return c.sendServiceError(ctx, h.Op, id, err)
		}
	}
	bp := c.s.small.Get().(*[]byte)
	buf := (*bp)[:0]
	switch h.Op {
	case OpCreateSpace:
		var name string
		var st object.SpaceSettings
		if name, st, err = DecodeCreateSpace(body); err == nil {
			if e := c.allow(name, auth.Admin); e != nil {
				err = e
				break
			}
			var info object.SpaceInfo
			if info, err = svc.CreateSpace(ctx, name, st); err == nil {
				resp = AppendSpaceInfo(buf, &info)
			}
		}
	case OpListSpaces:
		if len(body) != 0 {
			err = Errorf(CodeMalformed, "LIST_SPACES takes no body")
			break
		}
		var l []object.SpaceInfo
		if l, err = svc.ListSpaces(ctx); err == nil {
			// A key sees the spaces it holds a grant on.
			if k, e := c.key(); e != nil {
				err = e
				break
			} else if k != nil {
				l = slices.DeleteFunc(l, func(sp object.SpaceInfo) bool { return !k.Sees(sp.Name) })
			}
			resp = AppendSpaceList(buf, l)
		}
	case OpCluster:
		cs, ok := svc.(ClusterService)
		switch {
		case len(body) != 0:
			err = Errorf(CodeMalformed, "CLUSTER takes no body")
		case !ok:
			err = Errorf(CodeUnknownOp, "this server does not report cluster state")
		default:
			if e := c.allowCluster("read the cluster's state"); e != nil {
				err = e
				break
			}
			var doc []byte
			if doc, err = cs.ClusterStatus(ctx); err == nil {
				resp = append(buf, doc...)
			}
		}
	case OpRoutes:
		rs, ok := svc.(RouteService)
		var name string
		switch name, err = DecodeName(body); {
		case err != nil:
		case !ok:
			err = Errorf(CodeUnknownOp, "this server does not report routes")
		default:
			if e := c.allow(name, auth.Read); e != nil {
				err = e
				break
			}
			var t RouteTable
			if t, err = rs.Routes(ctx, name); err == nil {
				resp = AppendRouteTable(buf, &t)
			}
		}
	case OpNode:
		ns, ok := svc.(NodeService)
		switch {
		case len(body) != 9:
			err = Errorf(CodeMalformed, "NODE takes an action u8 and a node id u64, not %d bytes", len(body))
		case !ok:
			err = Errorf(CodeUnknownOp, "this server does not manage cluster nodes")
		case body[0] < byte(NodeDrain) || body[0] > byte(NodeUndrain):
			err = Errorf(CodeInvalidArgument, "unknown NODE action %d", body[0])
		default:
			if e := c.allowCluster("drain, undrain or remove nodes"); e != nil {
				err = e
				break
			}
			if err = ns.NodeAdmin(ctx, NodeAction(body[0]), binary.BigEndian.Uint64(body[1:])); err == nil {
				resp = buf
			}
		}
	case OpKeys:
		ks, ok := svc.(KeyService)
		if !ok {
			err = Errorf(CodeUnknownOp, "this server does not manage access keys")
			break
		}
		if e := c.allowCluster("manage access keys"); e != nil {
			err = e
			break
		}
		var doc []byte
		if doc, err = serveKeys(ctx, ks, body); err == nil {
			resp = append(buf, doc...)
		}
	case OpTokens:
		ts, ok := svc.(TokenService)
		if !ok {
			err = Errorf(CodeUnknownOp, "this server does not manage join tokens")
			break
		}
		if e := c.allowCluster("manage join tokens"); e != nil {
			err = e
			break
		}
		var doc []byte
		if doc, err = serveTokens(ctx, ts, body); err == nil {
			resp = append(buf, doc...)
		}
	case OpDeleteSpace:
		var name string
		if name, err = DecodeName(body); err == nil {
			if e := c.allow(name, auth.Admin); e != nil {
				err = e
				break
			}
			if err = svc.DeleteSpace(ctx, name); err == nil {
				resp = buf
			}
		}
	case OpTxnBegin, OpTxnCommit, OpTxnRollback:
		resp, err = c.txnOp(ctx, h.Op, buf, body)
	case OpPut:
		var info object.Info
		if tx != nil {
			info, err = tx.Put(ctx, put, putBody)
		} else {
			info, err = svc.Put(ctx, put, putBody)
		}
		if err == nil {
			resp = AppendObjectInfo(buf, &info)
		}
	case OpGet:
		c.s.small.Put(bp)
		return c.get(ctx, id, tx, body)
	case OpStat:
		var req object.GetRequest
		if req, err = DecodeGetRequest(body); err == nil {
			if e := c.allow(req.Space, auth.Read); e != nil {
				err = e
				break
			}
			var info object.Info
			if tx != nil {
				info, err = tx.Stat(ctx, &req)
			} else {
				info, err = svc.Stat(ctx, &req)
			}
			if err == nil {
				resp = AppendObjectInfo(buf, &info)
			}
		}
	case OpDelete:
		var req object.DeleteRequest
		if req, err = DecodeDeleteRequest(body); err == nil {
			if e := c.allow(req.Space, auth.Write); e != nil {
				err = e
				break
			}
			var info object.Info
			if tx != nil {
				err = tx.Delete(ctx, &req)
				info = object.Info{Space: req.Space, Key: req.Key, DeleteMarker: true}
			} else {
				info, err = svc.Delete(ctx, &req)
			}
			if err == nil {
				resp = AppendObjectInfo(buf, &info)
			}
		}
	case OpList:
		var req object.ListRequest
		if req, err = DecodeListRequest(body); err == nil {
			if e := c.allow(req.Space, auth.Read); e != nil {
				err = e
				break
			}
			var res object.ListResult
			if tx != nil {
				res, err = tx.List(ctx, &req)
			} else {
				res, err = svc.List(ctx, &req)
			}
			if err == nil {
				resp = AppendListResult(buf, &res)
			}
		}
	case OpVersions:
		var req object.VersionsRequest
		if req, err = DecodeVersionsRequest(body); err == nil {
			if e := c.allow(req.Space, auth.Read); e != nil {
				err = e
				break
			}
			var res object.VersionsResult
			if res, err = svc.Versions(ctx, &req); err == nil {
				resp = AppendVersionsResult(buf, &res)
			}
		}
	case OpClone, OpLineage, OpDiff:
		resp, err = c.versionsOp(ctx, h.Op, tx, buf, body)
	case OpSnapshot:
		resp, err = c.snapshotOp(ctx, buf, body)
	case OpBranch:
		resp, err = c.branchOp(ctx, buf, body)
	case OpDiffSpaces:
		resp, err = c.diffSpacesOp(ctx, buf, body)
	case OpFollow:
		resp, err = c.followOp(ctx, buf, body)
	case OpQuery:
		resp, err = c.queryOp(ctx, buf, body)
	case OpIndex:
		resp, err = c.indexOp(ctx, buf, body)
	case OpSQL:
		resp, err = c.sqlOp(ctx, buf, body)
	case OpWatch:
		resp, err = c.watchOp(ctx, buf, body)
	case OpBatch:
		var items []BatchItem
		if items, err = DecodeBatchRequest(body); err == nil {
			resp = c.batch(ctx, buf, items, tx)
		}
	default:
		err = Errorf(CodeUnknownOp, "opcode 0x%02x", uint8(h.Op))
	}
	c.unregister(id)
	if err != nil {
		*bp = buf
		c.s.small.Put(bp)
		return c.sendServiceError(ctx, h.Op, id, err)
	}
	if len(resp) > c.s.opts.MaxFrame {
		*bp = resp[:0]
		c.s.small.Put(bp)
		return c.sendError(h.Op, id, Errorf(CodeTooLarge, "response of %d bytes over the frame limit", len(resp)))
	}
	f := outFrame{op: h.Op, flags: FlagResponse | forwardedFlag(ctx), id: id, a: resp}
	if cap(resp) <= 64<<10 {
		// Small buffers go back to the pool once written; big ones are
		// left to the collector so the pool stays small.
		*bp = resp
		f.buf = bp
	}
	c.w.send(f)
	return CodeOK
}

// asError converts a Service error to a protocol error.
func (c *serverConn) asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	code, msg := CodeOf(err), err.Error()
	var oe *object.Error
	if errors.As(err, &oe) {
		msg = oe.Message
	}
	if code == CodeInternal {
		c.s.log.Warn("wire: internal error", "err", err)
	}
	return &Error{Code: code, Message: msg}
}

// get answers a GET: a header frame with the ObjectInfo and the first bytes,
// then DATA frames, the last with END. At most StreamFrames frames of one
// stream wait in the writer's queue.
func (c *serverConn) get(ctx context.Context, id uint32, tx *object.Txn, body []byte) Code {
	req, err := DecodeGetRequest(body)
	if err != nil {
		c.unregister(id)
		return c.sendError(OpGet, id, err.(*Error))
	}
	if e := c.allow(req.Space, auth.Read); e != nil {
		c.unregister(id)
		return c.sendError(OpGet, id, e)
	}
	var info object.Info
	var rc io.ReadCloser
	if tx != nil {
		info, rc, err = tx.Get(ctx, &req)
	} else {
		info, rc, err = c.s.svc.Get(ctx, &req)
	}
	if err == nil {
		if err = object.CheckPlain(&info); err != nil {
			rc.Close()
		}
	}
	if err != nil {
		c.unregister(id)
		return c.sendServiceError(ctx, OpGet, id, err)
	}
	defer rc.Close()
	hdr := AppendObjectInfo(make([]byte, 0, ObjectInfoSize(&info)), &info)
	max := c.s.opts.MaxFrame
	if len(hdr) > max/2 {
		c.unregister(id)
		return c.sendError(OpGet, id, Errorf(CodeTooLarge, "object info of %d bytes", len(hdr)))
	}
	// Size the first buffer from the expected length so a small GET is one
	// small frame; one extra byte tells "exactly this long" from "longer".
	want := info.Size - req.Offset
	if req.Length >= 0 && req.Length < want {
		want = req.Length
	}
	want = max64(want, 0) + 1
	var credit chan struct{} // made when the answer turns out to stream
	// A body that hands out read-only views of its bytes (chunks from the
	// node's cache of verified chunks) is sent from them, without a copy
	// into frame buffers.
	views, _ := rc.(object.Viewer)
	first := true
	for {
		var buf []byte
		var bp *[]byte
		room := max
		if first {
			room = max - len(hdr)
		}
		var n int
		var rerr error
		var last, viewed bool
		var pin *chunk.Pin // the view's, released once its frame is out
		small := want < int64(room) && want <= 64<<10
		switch {
		case views != nil && !(first && small):
			v, vpin, err := views.View(room)
			if err == nil && len(v) < 64<<10 && int64(len(v)) < want-1 {
				// A small piece (a byte-range-written version is made of
				// them) and more to come: gathered with what follows
				// into one pooled frame, as a plain body is, not sent as
				// a frame of its own.
				bp = c.s.bufs.Get().(*[]byte)
				buf = (*bp)[:room]
				n = copy(buf, v)
				vpin.Release()
				break
			}
			viewed, buf, n, pin = true, v, len(v), vpin
			last = err == io.EOF || (err == nil && int64(n) >= want-1)
			if err != io.EOF {
				rerr = err
			}
		case small:
			buf = make([]byte, want)
		}
		if !viewed {
			if buf == nil {
				bp = c.s.bufs.Get().(*[]byte)
				buf = (*bp)[:room]
			}
			m := n // (a small view copied in first)
			n, rerr = io.ReadFull(rc, buf[m:])
			n += m
			last = rerr == io.EOF || rerr == io.ErrUnexpectedEOF
		}
		if rerr != nil && !last {
			if bp != nil {
				c.s.bufs.Put(bp)
			}
			pin.Release()
			c.unregister(id)
			return c.sendError(OpGet, id, c.asError(rerr))
		}
		if first && last && bp == nil {
			// The common small GET: one frame, nothing to recycle (but
			// the view's pin, once it is written).
			c.unregister(id)
			f := outFrame{op: OpGet, flags: FlagResponse | forwardedFlag(ctx), id: id, a: hdr, b: buf[:n]}
			if pin != nil {
				f.done = pin.Release
			}
			c.w.send(f)
			return CodeOK
		}
		if credit == nil {
			credit = make(chan struct{}, c.s.opts.StreamFrames)
		}
		select {
		case credit <- struct{}{}:
		case <-ctx.Done():
			if bp != nil {
				c.s.bufs.Put(bp)
			}
			pin.Release()
			c.unregister(id)
			return c.sendError(OpGet, id, c.asError(ctx.Err()))
		}
		f := outFrame{op: OpData, flags: FlagResponse, id: id, b: buf[:n]}
		if first {
			f.op, f.a = OpGet, hdr
			f.flags |= forwardedFlag(ctx)
			if !last {
				f.flags |= FlagMore
			}
		} else if last {
			f.flags |= FlagEnd
		}
		f.done = func() {
			if bp != nil {
				c.s.bufs.Put(bp)
			}
			pin.Release()
			<-credit
		}
		if last {
			c.unregister(id)
		}
		if c.w.send(f) != nil {
			c.unregister(id)
			return CodeCanceled
		}
		if last {
			return CodeOK
		}
		first = false
		want -= int64(n)
		if want < 1 {
			want = 1
		}
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// batch runs the items in order and encodes their results. Each item
// succeeds or fails alone; the batch is not atomic. In a transaction (tx
// not nil) the items are its reads and writes, in order (a client sends
// the writes it buffered in one request).
func (c *serverConn) batch(ctx context.Context, buf []byte, items []BatchItem, tx *object.Txn) []byte {
	svc := c.s.svc
	put, get, stat, del := svc.Put, svc.Get, svc.Stat, svc.Delete
	if tx != nil {
		put, get, stat = tx.Put, tx.Get, tx.Stat
		del = func(ctx context.Context, req *object.DeleteRequest) (object.Info, error) {
			return object.Info{}, tx.Delete(ctx, req)
		}
	}
	budget := c.s.opts.MaxFrame - 16
	buf = appendUvarint(buf, uint64(len(items)))
	for i := range items {
		it := &items[i]
		r := BatchResult{Op: it.Op}
		var info object.Info
		var err error
		switch it.Op {
		case BatchPut, BatchDelete:
			space := it.Put.Space
			if it.Op == BatchDelete {
				space = it.Delete.Space
			}
			if e := c.allow(space, auth.Write); e != nil {
				err = e
			}
		default:
			if e := c.allow(it.Get.Space, auth.Read); e != nil {
				err = e
			}
		}
		switch {
		case err != nil:
		case it.Op == BatchPut:
			info, err = put(ctx, &it.Put, object.MemBody(it.Body))
		case it.Op == BatchStat:
			info, err = stat(ctx, &it.Get)
		case it.Op == BatchDelete:
			info, err = del(ctx, &it.Delete)
		case it.Op == BatchGet:
			var rc io.ReadCloser
			if info, rc, err = get(ctx, &it.Get); err == nil {
				left := int64(budget - len(buf) - 64 - ObjectInfoSize(&info))
				r.Data, err = io.ReadAll(io.LimitReader(rc, max64(left, 0)+1))
				rc.Close()
				if err == nil && int64(len(r.Data)) > left {
					err, r.Data = Errorf(CodeTooLarge, "batch response over the frame limit"), nil
				}
			}
		}
		if err != nil {
			e := c.asError(err)
			r.Code, r.Message, r.Data = e.Code, e.Message, nil
		} else {
			r.Info = info
		}
		next := AppendBatchResult(buf, &r)
		if len(next) > budget {
			// Keep the response in one frame: this item fails instead.
			r = BatchResult{Op: it.Op, Code: CodeTooLarge, Message: "batch response over the frame limit"}
			next = AppendBatchResult(buf, &r)
		}
		buf = next
	}
	return buf
}

func (c *serverConn) send(op Op, flags uint16, id uint32, body []byte) {
	c.w.send(outFrame{op: op, flags: flags, id: id, a: body})
}

// sendError answers id with e and returns e's code.
func (c *serverConn) sendError(op Op, id uint32, e *Error) Code {
	c.send(op, FlagResponse|FlagError, id, AppendError(nil, e))
	return e.Code
}

// sendServiceError answers with the error the service returned, flagged
// FORWARDED if the service passed the request on (a forwarded NOT_FOUND
// says the client's route is stale as much as a forwarded success does).
func (c *serverConn) sendServiceError(ctx context.Context, op Op, id uint32, err error) Code {
	e := c.asError(err)
	c.send(op, FlagResponse|FlagError|forwardedFlag(ctx), id, AppendError(nil, e))
	return e.Code
}
