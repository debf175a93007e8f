// Package node is the composition root of a Cairn node: it binds the
// native protocol and HTTP listeners, opens the node's part in the
// cluster (internal/cluster: storage, meta service, replicas, membership,
// spaces and the object service), and serves the native protocol (wire)
// and HTTP (S3, /healthz, /metrics) over them.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/cairn-db/cairn/internal/console"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/s3"
	"github.com/cairn-db/cairn/internal/sqlsrv"
	"github.com/cairn-db/cairn/internal/wire"
)

// Default listener ports. The native protocol and HTTP bind to the
// loopback address unless Config.Listen says otherwise.
const (
	DefaultNativePort = 7070
	DefaultHTTPPort   = 7080
)

// Config configures a node: its part in the cluster (cluster.Config) and
// its listeners. The zero value of every field means its default.
type Config struct {
	cluster.Config
	// NativePort is the native protocol port. Default: 7070. -1 picks a free port.
	NativePort int
	// HTTPPort is the HTTP port (S3, /healthz, /metrics). Default: 7080. -1 picks a free port.
	HTTPPort int
	// S3Region is the region the S3 API reports. Default: us-east-1.
	S3Region string
	// S3Domains are the host names under which S3 requests may name their
	// bucket virtual-host style (BUCKET.DOMAIN).
	S3Domains []string
	// MultipartExpiry is how long an S3 multipart upload may stay
	// incomplete before it is aborted and its parts removed. Default: 24h.
	MultipartExpiry time.Duration
	// MultipartSweep is how often the node looks for expired uploads.
	// Default: 1h.
	MultipartSweep time.Duration
	// LifecycleSweep is how often the node carries out the buckets' S3
	// lifecycle rules (default: hourly; rules count whole days).
	LifecycleSweep time.Duration
	// TLSCertFile and TLSKeyFile (both or neither) are PEM files of the
	// certificate (chain) and key the HTTP port serves HTTPS with, and
	// the native port TLS. Default: plain HTTP and TCP.
	TLSCertFile, TLSKeyFile string
	// IdleTimeout is how long a connection may go without progress: an
	// HTTP body or native frame stalled, a keep-alive connection or a
	// native one left idle, a client that takes no answer. Default: 60s.
	IdleTimeout time.Duration
	// MaxConnections bounds the native protocol's open connections; more
	// are refused with a clear error. Default: 4096.
	MaxConnections int
	// Pprof serves Go's profiles at /debug/pprof/ on the HTTP port to
	// whoever reaches it. Default: off; cluster admins' signed requests
	// get them at /_cairn/debug/pprof/ either way.
	Pprof bool
	// SQLPort, when set, serves the spaces read-only over the MySQL
	// protocol on it (-1 picks a free port). Default: off.
	SQLPort int
	// SQLListen is the address the SQL port binds to. Default: 127.0.0.1
	// (loopback, whatever Listen says).
	SQLListen string
}

// EnsureDefaults fills in zero fields.
func (c *Config) EnsureDefaults() {
	c.Config.EnsureDefaults()
	if c.NativePort == 0 {
		c.NativePort = DefaultNativePort
	}
	if c.HTTPPort == 0 {
		c.HTTPPort = DefaultHTTPPort
	}
	if c.MultipartExpiry == 0 {
		c.MultipartExpiry = 24 * time.Hour
	}
	if c.MultipartSweep == 0 {
		c.MultipartSweep = time.Hour
	}
	if c.LifecycleSweep == 0 {
		c.LifecycleSweep = time.Hour
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 60 * time.Second
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = 4096
	}
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	errs := []error{c.Config.Validate()}
	port := func(name string, p int) {
		if p < -1 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s %d is not a port (1-65535, 0 for the default, -1 for any free port)", name, p))
		}
	}
	port("native port", c.NativePort)
	port("http port", c.HTTPPort)
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("a TLS certificate and its key must be given together"))
	}
	if c.IdleTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("idle timeout %v is under 100ms", c.IdleTimeout))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("max connections %d must be at least 1", c.MaxConnections))
	}
	return errors.Join(errs...)
}

// Node is one running Cairn node: its part in the cluster (which serves
// the object service and the space and administration operations), with
// the native protocol and HTTP served over it.
type Node struct {
	*cluster.Node
	cfg Config
	log *slog.Logger

	wireSrv *wire.Server
	httpSrv *http.Server
	nativeL net.Listener
	httpL   net.Listener
	sqlL    net.Listener // nil without Config.SQLPort
	sqlSrv  *sqlsrv.Server
	sqlRun  *sqlsrv.Runner // the native protocol's and the JSON API's SQL
	s3api   *s3.Handler    // the S3 API (s3.go)
	stats   *console.Stats // request counts for the console's charts

	closeOnce sync.Once
	closeErr  error
	serveWG   sync.WaitGroup
}

// Open starts a node: it opens or creates everything under cfg.DataDir,
// recovers, binds the listeners (once the node is about to serve; see
// cluster.Config.Bind), and starts the node's background work. Serving
// starts with Serve.
func Open(ctx context.Context, cfg Config) (_ *Node, err error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	n := &Node{cfg: cfg, log: cfg.Logger}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	nativeTLS, httpTLS, err := n.tlsConfigs()
	if err != nil {
		return nil, err
	}
	cc := cfg.Config
	cc.Bind = func() (string, string, error) {
		if err := n.listen(httpTLS); err != nil {
			return "", "", err
		}
		return n.nativeL.Addr().String(), n.httpL.Addr().String(), nil
	}
	cc.PeerCodes, cc.Forwarded = wire.PeerCodes{}, wire.MarkForwarded
	if n.Node, err = cluster.Open(ctx, cc); err != nil {
		return nil, err
	}
	n.sqlRun = sqlsrv.NewRunner(n, n.Keyring())
	n.stats = console.NewStats()
	n.wireSrv = wire.NewServer(lockGuard{n}, wire.ServerOptions{Logger: n.log, Keys: n.Keyring(), TLS: nativeTLS,
		IdleTimeout: cfg.IdleTimeout, MaxConns: cfg.MaxConnections, Metrics: nativeStats{n.stats}})
	n.httpSrv = &http.Server{
		Handler:           n.httpHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelDebug),
	}
	n.Start()
	n.Go(func(ctx context.Context) {
		t := time.NewTicker(cfg.MultipartSweep)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n.sweepUploads(ctx)
			}
		}
	})
	n.Go(func(ctx context.Context) {
		t := time.NewTicker(cfg.LifecycleSweep)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n.SweepLifecycle(ctx, cfg.Clock())
			}
		}
	})
	return n, nil
}

// tlsConfigs loads Config.TLSCertFile for the native port and HTTP (nil
// without one).
func (n *Node) tlsConfigs() (native, web *tls.Config, err error) {
	if n.cfg.TLSCertFile == "" {
		return nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(n.cfg.TLSCertFile, n.cfg.TLSKeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS certificate %s, key %s: %w", n.cfg.TLSCertFile, n.cfg.TLSKeyFile, err)
	}
	web = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	native = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return native, web, nil
}

// listen binds the native protocol and HTTP ports.
func (n *Node) listen(httpTLS *tls.Config) error {
	port := func(p int) int {
		if p == -1 {
			return 0
		}
		return p
	}
	var err error
	n.nativeL, err = net.Listen("tcp", net.JoinHostPort(n.cfg.Listen, fmt.Sprint(port(n.cfg.NativePort))))
	if err != nil {
		return fmt.Errorf("native protocol listener: %w (is another cairn server running? use --port)", err)
	}
	n.httpL, err = net.Listen("tcp", net.JoinHostPort(n.cfg.Listen, fmt.Sprint(port(n.cfg.HTTPPort))))
	if err != nil {
		return fmt.Errorf("HTTP listener: %w (is another cairn server running? use --http-port)", err)
	}
	if httpTLS != nil {
		n.httpL = tls.NewListener(n.httpL, httpTLS)
	}
	if n.cfg.SQLPort != 0 {
		host := n.cfg.SQLListen
		if host == "" {
			host = "127.0.0.1"
		}
		if n.sqlL, err = net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(port(n.cfg.SQLPort)))); err != nil {
			return fmt.Errorf("SQL listener: %w (use another --sql-port)", err)
		}
	}
	return nil
}

// SQL implements object.SQLRunner.
func (n *Node) SQL(ctx context.Context, access, stmt string, maxBytes int) (object.SQLResult, error) {
	return n.sqlRun.Run(ctx, access, stmt, maxBytes)
}

// SQLAddr is the bound SQL address ("" without one).
func (n *Node) SQLAddr() string {
	if n.sqlL == nil {
		return ""
	}
	return n.sqlL.Addr().String()
}

// NativeAddr is the bound native protocol address.
func (n *Node) NativeAddr() string { return n.nativeL.Addr().String() }

// HTTPAddr is the bound HTTP address.
func (n *Node) HTTPAddr() string { return n.httpL.Addr().String() }

// Serve serves the listeners (and the peer port) in the background.
// Close stops them.
func (n *Node) Serve() {
	n.Node.Serve()
	if n.sqlL != nil {
		srv, err := sqlsrv.Start(sqlsrv.Config{Listener: n.sqlL, Service: n, Keys: n.Keyring(), Logger: n.log})
		if err != nil {
			n.log.Error("SQL server did not start", "err", err)
		}
		n.sqlSrv = srv
	}
	n.serveWG.Add(2)
	go func() {
		defer n.serveWG.Done()
		if err := n.wireSrv.Serve(n.nativeL); err != nil && !errors.Is(err, wire.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			n.log.Error("native protocol server stopped", "err", err)
		}
	}()
	go func() {
		defer n.serveWG.Done()
		if err := n.httpSrv.Serve(n.httpL); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("HTTP server stopped", "err", err)
		}
	}()
}

// Shutdown stops accepting requests, lets in-flight ones finish until ctx is
// done, and closes everything.
func (n *Node) Shutdown(ctx context.Context) error {
	var errs []error
	if n.httpSrv != nil {
		errs = append(errs, n.httpSrv.Shutdown(ctx))
	}
	if n.wireSrv != nil {
		errs = append(errs, n.wireSrv.Shutdown(ctx))
	}
	errs = append(errs, n.Close())
	return errors.Join(errs...)
}

// Close closes everything at once; it is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		var errs []error
		if n.httpSrv != nil {
			errs = append(errs, n.httpSrv.Close())
		}
		if n.wireSrv != nil {
			errs = append(errs, n.wireSrv.Close())
		}
		if n.sqlSrv != nil {
			errs = append(errs, n.sqlSrv.Close())
		}
		if n.sqlRun != nil {
			errs = append(errs, n.sqlRun.Close())
		}
		if n.stats != nil {
			n.stats.Close()
		}
		// The servers close only listeners they were serving; close them
		// all in case Serve was never called.
		for _, l := range []net.Listener{n.httpL, n.nativeL, n.sqlL} {
			if l != nil {
				l.Close()
			}
		}
		n.serveWG.Wait()
		if n.Node != nil {
			errs = append(errs, n.Node.Close())
		}
		for _, e := range errs {
			if e != nil && !errors.Is(e, http.ErrServerClosed) && !errors.Is(e, net.ErrClosed) {
				n.closeErr = errors.Join(n.closeErr, e)
			}
		}
	})
	return n.closeErr
}

// The node serves the whole object service and the administration.
var (
	_ object.Service         = (*Node)(nil)
	_ object.Composer        = (*Node)(nil)
	_ object.Tagger          = (*Node)(nil)
	_ object.MarkedDeleter   = (*Node)(nil)
	_ object.RetentionSetter = (*Node)(nil)
	_ admin.KeyService       = (*Node)(nil)
	_ admin.KeyRotator       = (*Node)(nil)
	_ admin.TokenService     = (*Node)(nil)
	_ admin.NodeService      = (*Node)(nil)
	_ admin.ClusterService   = (*Node)(nil)
	_ admin.RouteService     = (*Node)(nil)
)
