package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/wire"
)

// Options configure a Client. The zero value of every field but Addrs
// means its default.
type Options struct {
	// Addrs are the nodes' native-protocol addresses (host:port), the
	// seeds. At least one is required (default: the credentials
	// profile's server). A request on one key goes straight
	// to the node holding its range's lease, as the route table the
	// client keeps says; other requests, and keyed ones when the table does
	// not know, go to the first reachable seed, in order.
	Addrs []string
	// NoRouting turns the route table off: every request goes to the
	// seeds, which pass keyed requests on to the leaseholder.
	NoRouting bool
	// Conns is the number of connections per address (default 2).
	Conns int
	// DialTimeout bounds each connection attempt (default 5s).
	DialTimeout time.Duration
	// RetryAttempts is how many times a retryable failure is retried
	// (default 3; -1 disables retries).
	RetryAttempts int
	// RetryBackoff is the first retry's delay, doubled each time up to 1s
	// (default 20ms).
	RetryBackoff time.Duration
	// MaxInflightPerConn bounds the requests in flight on one connection
	// (default 256, the server's default).
	MaxInflightPerConn int
	// Liveness is how long requests on a connection may wait with nothing
	// coming from its node before the connection is given up (a paused or
	// cut-off node keeps TCP connections open): its requests fail as on a
	// broken connection, reads are retried on another node, and the node
	// is tried last for a while. Default wire.DefaultLiveness (3s);
	// negative: never (requests wait for their context).
	Liveness time.Duration
	// Logger receives retries and reconnects at debug level (default:
	// discarded).
	Logger *slog.Logger
	// AccessKey and SecretKey authenticate every connection. Empty: they
	// are found as FindCredentials says (CAIRN_ACCESS_KEY and
	// CAIRN_SECRET_KEY, else Profile of CredentialsFile).
	AccessKey, SecretKey string
	// Profile names the credentials file's profile (default
	// $CAIRN_PROFILE, else "default").
	Profile string
	// CredentialsFile is the credentials file (default CredentialsPath:
	// $CAIRN_CREDENTIALS_FILE, else ~/.config/cairn/credentials).
	CredentialsFile string
	// TLS, if set, connects with TLS (the nodes serve it with --tls-cert);
	// its RootCAs verify them. Default: TLS verified with the credentials
	// profile's ca_file, if it names one; else plain TCP.
	TLS *tls.Config
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Conns == 0 {
		o.Conns = 2
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.RetryAttempts == 0 {
		o.RetryAttempts = 3
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = 20 * time.Millisecond
	}
	if o.MaxInflightPerConn == 0 {
		o.MaxInflightPerConn = 256
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	var errs []error
	if len(o.Addrs) == 0 {
		errs = append(errs, errors.New("client: no addresses"))
	}
	for _, a := range o.Addrs {
		if a == "" {
			errs = append(errs, errors.New("client: empty address"))
		}
	}
	if o.Conns < 1 || o.Conns > 64 {
		errs = append(errs, fmt.Errorf("client: Conns %d outside [1, 64]", o.Conns))
	}
	if o.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("client: negative DialTimeout"))
	}
	if o.RetryAttempts < -1 {
		errs = append(errs, fmt.Errorf("client: RetryAttempts %d < -1", o.RetryAttempts))
	}
	if o.MaxInflightPerConn < 1 {
		errs = append(errs, fmt.Errorf("client: MaxInflightPerConn %d < 1", o.MaxInflightPerConn))
	}
	return errors.Join(errs...)
}

// Client talks to a Cairn cluster over the native protocol. It is safe for
// concurrent use; Close it when done.
type Client struct {
	opts   Options
	creds  Credentials // the key it connects with, and where it came from
	log    *slog.Logger
	nodes  []*node       // the seeds
	pref   atomic.Uint32 // index of the seed tried first
	routes router
	done   chan struct{}
	once   sync.Once
	// frameMin is the smallest frame limit of a node connected to (0: none
	// yet): what one request may carry.
	frameMin atomic.Int64
}

// node is one address and its connection pool.
type node struct {
	addr string
	rr   atomic.Uint32
	// failed is when dialing it last failed (Unix ns; 0: it answered since).
	// Routing skips it for a while after.
	failed atomic.Int64
	mu     struct {
		sync.Mutex
		conns []*wire.Conn // nil: not dialed yet
	}
}

// errDial marks a failure to connect: nothing was sent.
type errDial struct{ err error }

func (e *errDial) Error() string { return "client: dial: " + e.err.Error() }
func (e *errDial) Unwrap() error { return e.err }

// Dial connects to the first reachable address with default options.
func Dial(ctx context.Context, addrs ...string) (*Client, error) {
	return DialOptions(ctx, Options{Addrs: addrs})
}

// DialOptions connects with o. It fails unless at least one address
// answers and accepts the credentials.
func DialOptions(ctx context.Context, o Options) (*Client, error) {
	o.Addrs = append([]string(nil), o.Addrs...)
	o.EnsureDefaults()
	creds, err := FindCredentials(o.AccessKey, o.SecretKey, o.Profile, o.CredentialsFile)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	o.AccessKey, o.SecretKey = creds.AccessKey, creds.SecretKey
	// A profile may say where its cluster is and how to verify it.
	if len(o.Addrs) == 0 && creds.Server != "" {
		o.Addrs = strings.Split(creds.Server, ",")
	}
	if o.TLS == nil && creds.CAFile != "" {
		if o.TLS, err = CAConfig(creds.CAFile); err != nil {
			return nil, fmt.Errorf("client: %s: %w", creds.Source, err)
		}
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c0 := creds
	c := &Client{opts: o, log: o.Logger, done: make(chan struct{}), creds: c0}
	c.routes.init(c)
	for _, a := range o.Addrs {
		c.nodes = append(c.nodes, c.routes.node(a))
	}
	var errs []error
	for i := range c.nodes {
		if _, err := c.conn(ctx, i); err != nil {
			errs = append(errs, err)
			continue
		}
		c.pref.Store(uint32(i))
		return c, nil
	}
	c.Close()
	return nil, errors.Join(errs...)
}

// CAConfig is a TLS configuration that verifies servers with the PEM CA
// certificates in file.
func CAConfig(file string) (*tls.Config, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Credentials is the key the client connects with, and where it was found.
func (c *Client) Credentials() Credentials { return c.creds }

// Close closes every connection; requests in flight fail.
func (c *Client) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.routes.close()
		for _, n := range c.routes.allNodes() {
			n.mu.Lock()
			conns := n.mu.conns
			n.mu.conns = make([]*wire.Conn, len(conns))
			n.mu.Unlock()
			for _, cn := range conns {
				if cn != nil {
					cn.Close()
				}
			}
		}
	})
	return nil
}

// conn returns a working connection to node i, dialing one if its slot is
// empty or broken.
func (c *Client) conn(ctx context.Context, i int) (*wire.Conn, error) {
	return c.connTo(ctx, c.nodes[i])
}

// connTo returns a working connection to n, dialing one if its slot is
// empty or broken.
func (c *Client) connTo(ctx context.Context, n *node) (*wire.Conn, error) {
	select {
	case <-c.done:
		return nil, fmt.Errorf("%w: client closed", wire.ErrConnClosed)
	default:
	}
	slot := int(n.rr.Add(1)) % c.opts.Conns
	n.mu.Lock()
	cn := n.mu.conns[slot]
	n.mu.Unlock()
	if cn != nil && cn.Err() == nil && !cn.Stale() {
		return cn, nil
	}
	dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	fresh, err := wire.DialConn(dctx, n.addr, wire.ConnOptions{MaxInflight: c.opts.MaxInflightPerConn, Logger: c.log, OnForwarded: c.routes.forwarded,
		Liveness: c.opts.Liveness, AccessKey: c.opts.AccessKey, SecretKey: c.opts.SecretKey, TLS: c.opts.TLS})
	if err != nil {
		if refused(err) {
			// The node answered and refused these credentials (or wants
			// TLS): another node would say the same.
			return nil, err
		}
		n.failed.Store(time.Now().UnixNano())
		return nil, &errDial{err: err}
	}
	n.failed.Store(0)
	for {
		m := c.frameMin.Load()
		if m != 0 && int64(fresh.SendMax()) >= m || c.frameMin.CompareAndSwap(m, int64(fresh.SendMax())) {
			break
		}
	}
	n.mu.Lock()
	cur := n.mu.conns[slot]
	if cur != nil && cur != cn && cur.Err() == nil && !cur.Stale() {
		// Someone else replaced it meanwhile.
		n.mu.Unlock()
		fresh.Close()
		return cur, nil
	}
	n.mu.conns[slot] = fresh
	n.mu.Unlock()
	if cur != nil && cur.Err() == nil {
		// Stale (idle near the node's timeout): closed once its
		// requests, if any raced in, are done.
		go func(old *wire.Conn) {
			for old.Inflight() > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			old.Close()
		}(cur)
		cur = nil
	}
	select {
	case <-c.done: // closed while dialing
		fresh.Close()
		return nil, fmt.Errorf("%w: client closed", wire.ErrConnClosed)
	default:
	}
	if cur != nil {
		cur.Close()
		c.log.Debug("client: replaced a broken connection", "addr", n.addr, "err", cur.Err())
	}
	return fresh, nil
}

// refused reports whether a dial failed because the node refused the
// connection's credentials or its transport: not a reason to try another.
func refused(err error) bool {
	switch wire.CodeOf(err) {
	case wire.CodeUnauthenticated, wire.CodeTLSRequired:
		var we *wire.Error
		return errors.As(err, &we)
	}
	return false
}

// NotApplied reports whether err, returned by a request, proves that the
// request had no effect: it was never sent, or the cluster refused it
// before doing anything (NOT_LEADER, UNAVAILABLE, RANGE_MOVED). Any other error from a
// write leaves its outcome unknown: it may have been applied.
func NotApplied(err error) bool {
	var d *errDial
	if errors.As(err, &d) || errors.Is(err, wire.ErrConnClosed) {
		return true
	}
	c := wire.CodeOf(err)
	var we *wire.Error
	return errors.As(err, &we) && (c == wire.CodeNotLeader || c == wire.CodeUnavailable || c == wire.CodeRangeMoved)
}

// retryable reports whether a request that failed with err may be sent
// again: always when it was not applied, and for idempotent requests also
// when the connection broke under it.
func retryable(err error, idempotent bool) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if NotApplied(err) {
		return true
	}
	return idempotent && errors.Is(err, wire.ErrConnLost)
}

// do runs fn on a connection, retrying as retryable allows. mayRetry, if
// set, is consulted too (a streamed body can be sent only once).
func (c *Client) do(ctx context.Context, idempotent bool, mayRetry func() bool, fn func(*wire.Conn) error) error {
	var err error
	delay := c.opts.RetryBackoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return errors.Join(err, ctx.Err())
			case <-c.done:
				t.Stop()
				return err
			case <-t.C:
			}
			delay = min(2*delay, time.Second)
		}
		var cn *wire.Conn
		var n *node
		cn, n, err = c.pick(ctx)
		if err == nil {
			err = fn(cn)
			if err == nil {
				return nil
			}
			if suspect(err) {
				// No answer in time (a paused or cut-off node looks like
				// this): pick tries it last for a while.
				n.failed.Store(time.Now().UnixNano())
			}
		}
		if attempt >= c.opts.RetryAttempts || !retryable(err, idempotent) || mayRetry != nil && !mayRetry() {
			return err
		}
		if NotApplied(err) || errors.Is(err, wire.ErrConnLost) {
			// That node may be down or not the one to ask: start elsewhere.
			c.advance()
		}
		c.log.Debug("client: retrying", "attempt", attempt+1, "err", err)
	}
}

// pick returns a connection to the preferred node, moving on to the next
// address when one cannot be reached.
func (c *Client) pick(ctx context.Context) (*wire.Conn, *node, error) {
	var errs []error
	start := int(c.pref.Load())
	// Nodes that recently failed to answer are tried last.
	var tried []bool
	for pass := range 2 {
		for k := range c.nodes {
			i := (start + k) % len(c.nodes)
			if pass == 0 && c.nodes[i].recentlyFailed() || pass == 1 && tried != nil && tried[i] {
				continue
			}
			cn, err := c.conn(ctx, i)
			if err == nil {
				if i != start {
					c.pref.Store(uint32(i))
				}
				return cn, c.nodes[i], nil
			}
			if ctx.Err() != nil {
				return nil, nil, err
			}
			if tried == nil {
				tried = make([]bool, len(c.nodes))
			}
			tried[i] = true
			errs = append(errs, err)
		}
	}
	return nil, nil, &errDial{err: errors.Join(errs...)}
}

// recentlyFailed reports whether dialing n or a request to it failed
// within skipFailedFor.
func (n *node) recentlyFailed() bool {
	f := n.failed.Load()
	return f != 0 && time.Since(time.Unix(0, f)) < skipFailedFor
}

// suspect reports whether err says the node did not answer: its
// connection broke, or the request ran out of time there.
func suspect(err error) bool {
	return errors.Is(err, wire.ErrConnLost) || errors.Is(err, context.DeadlineExceeded)
}

func (c *Client) advance() {
	if len(c.nodes) > 1 {
		p := c.pref.Load()
		c.pref.CompareAndSwap(p, (p+1)%uint32(len(c.nodes)))
	}
}

// minSendMax is the smallest frame limit of the nodes connected to (the
// protocol's default before any).
func (c *Client) minSendMax() int {
	if m := c.frameMin.Load(); m > 0 {
		return int(m)
	}
	return wire.DefaultMaxFrame
}
