package node

import (
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cairn-db/cairn/internal/api"
	"github.com/cairn-db/cairn/internal/console"
	"github.com/cairn-db/cairn/internal/s3"
	"github.com/cairn-db/cairn/internal/wire"
)

// maxHeaderBytes bounds a request's header (S3 allows 8 KiB of user
// metadata; signatures and the standard headers add a few more).
const maxHeaderBytes = 64 << 10

// httpHandler serves the S3 API, Cairn's JSON API at /_cairn/v1/ (package
// api), /healthz and /metrics to requests that
// carry no S3 signature (a signed GET of /metrics lists the bucket
// "metrics"), Go's profiles at /_cairn/debug/pprof/ to cluster admins
// (and at /debug/pprof/ to anyone with Config.Pprof). Every request gets
// deadlines that move with its progress (withDeadlines).
func (n *Node) httpHandler() http.Handler {
	ops, s3h := n.opsHandler(), n.s3Handler()
	jsonAPI := api.New(api.Config{Service: lockGuard{n}, Keys: n.Keyring(), Authenticate: n.s3api.Authenticate, Logger: n.log})
	con := console.New(console.Config{Service: lockGuard{n}, Keys: n.Keyring(), Stats: n.stats, Secure: n.cfg.TLSCertFile != "", Logger: n.log})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, r = n.withDeadlines(w, r)
		unsigned := r.Header.Get("Authorization") == "" && !r.URL.Query().Has("X-Amz-Credential")
		switch {
		case strings.HasPrefix(r.URL.Path, adminPprof) && !n.bucketHost(r.Host):
			n.adminProfiles(w, r)
		case strings.HasPrefix(r.URL.Path, api.Prefix) && !n.bucketHost(r.Host):
			n.observed(w, r, jsonAPI, r.URL.Path == api.Prefix+"watch")
		case isOpsPath(r.URL.Path, n.cfg.Pprof) && unsigned:
			ops.ServeHTTP(w, r)
		case isConsolePath(r.URL.Path) && unsigned && !n.bucketHost(r.Host):
			// A browser's: a signed request for a bucket named
			// "console" is still the S3 API's.
			con.ServeHTTP(w, r)
		default:
			n.observed(w, r, s3h, false)
		}
	})
}

func isConsolePath(p string) bool {
	return p == console.Prefix || strings.HasPrefix(p, console.Prefix+"/")
}

// observed serves r with h and counts it for the console's charts (a
// read for GET and HEAD, else a write), unless skip (a long poll).
func (n *Node) observed(w http.ResponseWriter, r *http.Request, h http.Handler, skip bool) {
	if skip {
		h.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	h.ServeHTTP(w, r)
	kind := console.Write
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		kind = console.Read
	}
	n.stats.Observe(kind, time.Since(start))
}

// nativeStats counts the native protocol's requests for the console's
// charts.
type nativeStats struct{ s *console.Stats }

func (m nativeStats) RequestDone(op wire.Op, _ wire.Code, elapsed time.Duration) {
	switch op {
	case wire.OpGet, wire.OpStat, wire.OpList, wire.OpVersions, wire.OpQuery, wire.OpSQL, wire.OpFollow, wire.OpDiff, wire.OpLineage, wire.OpDiffSpaces:
		m.s.Observe(console.Read, elapsed)
	case wire.OpPut, wire.OpDelete, wire.OpBatch, wire.OpTxnCommit, wire.OpClone:
		m.s.Observe(console.Write, elapsed)
	}
}

func isOpsPath(p string, pprof bool) bool {
	return p == "/healthz" || p == "/metrics" || pprof && strings.HasPrefix(p, "/debug/pprof/")
}

// adminPprof is where cluster admins find Go's profiles: "_cairn" is no
// bucket name, so no path-style S3 request is shadowed (and on a bucket's
// own host name, under --s3-domain, the path is the bucket's).
const adminPprof = "/_cairn/debug/pprof/"

// bucketHost reports whether host names a bucket virtual-host style
// (BUCKET.DOMAIN for one of Config.S3Domains).
func (n *Node) bucketHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	for _, d := range n.cfg.S3Domains {
		if strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

func (n *Node) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", n.Healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.Registry(), promhttp.HandlerOpts{Registry: n.Registry()}))
	if n.cfg.Pprof {
		// Not the command line: it may hold secrets given as flags.
		addProfiles(mux, "/debug/pprof/", false)
	}
	return mux
}

func addProfiles(mux *http.ServeMux, prefix string, cmdline bool) {
	mux.HandleFunc(prefix, pprof.Index)
	if cmdline {
		mux.HandleFunc(prefix+"cmdline", pprof.Cmdline)
	}
	mux.HandleFunc(prefix+"profile", pprof.Profile)
	mux.HandleFunc(prefix+"symbol", pprof.Symbol)
	mux.HandleFunc(prefix+"trace", pprof.Trace)
}

// adminProfiles serves Go's profiles to a request signed (SigV4, as for
// S3, service "s3") by a key with the cluster-admin grant.
func (n *Node) adminProfiles(w http.ResponseWriter, r *http.Request) {
	access, err := n.s3api.Authenticate(r)
	if err != nil {
		s3.WriteError(w, r, "AccessDenied", http.StatusForbidden, "Profiles are for cluster admins: sign the request with a key that holds the cluster-admin grant ("+err.Error()+").")
		return
	}
	if !n.Keyring().IsClusterAdmin(access) {
		s3.WriteError(w, r, "AccessDenied", http.StatusForbidden, "Profiles are for cluster admins: access key "+access+" does not hold the cluster-admin grant.")
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/debug/pprof/" + strings.TrimPrefix(r.URL.Path, adminPprof)
	mux := http.NewServeMux()
	addProfiles(mux, "/debug/pprof/", true)
	mux.ServeHTTP(w, r2)
}

// withDeadlines gives a request read and write deadlines that move with
// its progress: a body that stops arriving, or a client that stops taking
// the answer, for Config.IdleTimeout is cut, however long a steady
// transfer (a 5 GiB upload) takes in all.
func (n *Node) withDeadlines(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	d := &deadlines{rc: http.NewResponseController(w), idle: n.cfg.IdleTimeout}
	// The write deadline is set by the first write (a handler may take a
	// long body before it answers).
	d.extendRead()
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &progressBody{ReadCloser: r.Body, d: d}
	}
	return &progressWriter{ResponseWriter: w, d: d}, r
}

// deadlines moves a request's deadlines, at most every eighth of the idle
// timeout (setting one is cheap, but a body arrives in many reads).
type deadlines struct {
	rc                  *http.ResponseController
	idle                time.Duration
	lastRead, lastWrite atomic.Int64 // Unix ns of the last move
}

func (d *deadlines) extendRead() {
	now := time.Now()
	if now.UnixNano()-d.lastRead.Load() < int64(d.idle/8) {
		return
	}
	d.lastRead.Store(now.UnixNano())
	_ = d.rc.SetReadDeadline(now.Add(d.idle))
}

func (d *deadlines) extendWrite() {
	now := time.Now()
	if now.UnixNano()-d.lastWrite.Load() < int64(d.idle/8) {
		return
	}
	d.lastWrite.Store(now.UnixNano())
	_ = d.rc.SetWriteDeadline(now.Add(d.idle))
}

type progressBody struct {
	io.ReadCloser
	d *deadlines
}

func (b *progressBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	if k > 0 {
		b.d.extendRead()
	}
	return k, err
}

type progressWriter struct {
	http.ResponseWriter
	d *deadlines
}

func (w *progressWriter) WriteHeader(code int) {
	w.d.extendWrite()
	w.ResponseWriter.WriteHeader(code)
}

func (w *progressWriter) Write(p []byte) (int, error) {
	w.d.extendWrite()
	return w.ResponseWriter.Write(p)
}

func (w *progressWriter) Flush() {
	w.d.extendWrite()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *progressWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
