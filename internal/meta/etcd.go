package meta

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	etcdtransport "go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	etcderrors "go.etcd.io/etcd/server/v3/etcdserver/errors"
	"go.etcd.io/raft/v3"
)

// EtcdOptions configure OpenEtcd. The zero value of each field means its
// default.
type EtcdOptions struct {
	// Dir is etcd's data directory. Required.
	Dir string
	// Name is this member's name. Default: "cairn".
	Name string
	// PeerURL is where this member advertises itself to raft peers.
	// Default: "http://127.0.0.1:7073".
	PeerURL string
	// ListenPeerURL is where it listens for them. Default: PeerURL.
	ListenPeerURL string
	// ListenClientURL is where the client listener binds. Default: ClientURL.
	ListenClientURL string
	// InitialCluster ("name=peerURL,...", this member included) and Join
	// start a member that joins an existing cluster which has already added
	// it (AddLearner). Ignored when Dir holds data. Default: a new
	// single-member cluster.
	InitialCluster string
	Join           bool
	// ClientURL is etcd's client listener (for etcdctl; Cairn itself uses an
	// in-process client). Default: the unix socket "unix://<Dir>/client.sock",
	// or "http://127.0.0.1:7072" when that path is too long for a socket.
	ClientURL string
	// QuotaBytes is the backend quota; past it etcd raises the NOSPACE alarm
	// and writes fail with ErrQuota. Default: 2 GiB.
	QuotaBytes int64
	// CompactionRetention is how much history periodic auto-compaction keeps.
	// Default: 1h.
	CompactionRetention time.Duration
	// StartTimeout bounds the wait for the member to become ready.
	// Default: 1 minute.
	StartTimeout time.Duration
	// Logger receives etcd's error-level messages. Default: slog.Default().
	Logger *slog.Logger
	// CertFile, KeyFile and CAFile (PEM), when set, make the member's peer
	// and client ports mutual TLS: each side shows a certificate issued by
	// CAFile's authority (the cluster's), and anything else is refused.
	// The URLs are then https.
	CertFile, KeyFile, CAFile string
}

// tlsInfo is the member's TLS configuration, or the zero value.
func (o *EtcdOptions) tlsInfo() etcdtransport.TLSInfo {
	if o.CertFile == "" {
		return etcdtransport.TLSInfo{}
	}
	return etcdtransport.TLSInfo{CertFile: o.CertFile, KeyFile: o.KeyFile, TrustedCAFile: o.CAFile, ClientCertAuth: true,
		// Members reach each other from whatever source address the
		// route gives; the certificate's chain is what is checked.
		SkipClientSANVerify: true, MinVersion: tls.VersionTLS12}
}

// maxUnixSocketPath is a safe bound for sun_path (108 bytes on Linux).
const maxUnixSocketPath = 100

// EnsureDefaults fills in zero fields.
func (o *EtcdOptions) EnsureDefaults() {
	if o.Name == "" {
		o.Name = "cairn"
	}
	if o.PeerURL == "" {
		o.PeerURL = "http://127.0.0.1:7073"
	}
	if o.ClientURL == "" && o.Dir != "" {
		sock := filepath.Join(o.Dir, "client.sock")
		if abs, err := filepath.Abs(sock); err == nil {
			sock = abs
		}
		if len(sock) <= maxUnixSocketPath {
			o.ClientURL = "unix://" + sock
		} else {
			o.ClientURL = "http://127.0.0.1:7072"
		}
	}
	if o.QuotaBytes == 0 {
		o.QuotaBytes = 2 << 30
	}
	if o.CompactionRetention == 0 {
		o.CompactionRetention = time.Hour
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem with o at once.
func (o *EtcdOptions) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("Dir is required"))
	}
	for _, u := range []struct{ name, v string }{{"PeerURL", o.PeerURL}, {"ClientURL", o.ClientURL}} {
		if _, err := url.Parse(u.v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.name, err))
		}
	}
	if o.QuotaBytes < 0 {
		errs = append(errs, fmt.Errorf("QuotaBytes %d is negative", o.QuotaBytes))
	}
	if o.CompactionRetention < 0 || o.StartTimeout < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("meta: etcd options: %w", err)
	}
	return nil
}

// EtcdStore is the production Store: an embedded etcd member reached through
// an in-process client (OpenEtcd), or a client of members run elsewhere
// (DialEtcd).
type EtcdStore struct {
	etcd   *embed.Etcd
	client *clientv3.Client
	name   string
	log    *slog.Logger
	// closing quiets etcd's shutdown noise (see newZapSlog).
	closing *atomic.Bool
	mu      struct {
		sync.Mutex
		closed  bool
		leaders map[*etcdLeadership]struct{}
	}
}

var _ Store = (*EtcdStore)(nil)

// OpenEtcd starts an embedded etcd member on o.Dir (a single-member cluster
// when the directory is new; an existing directory recovers its data) and
// waits until it is ready.
func OpenEtcd(o EtcdOptions) (*EtcdStore, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("meta: create %s: %w", o.Dir, err)
	}
	peer, err := url.Parse(o.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("meta: PeerURL: %w", err)
	}
	listenPeer := peer
	if o.ListenPeerURL != "" {
		if listenPeer, err = url.Parse(o.ListenPeerURL); err != nil {
			return nil, fmt.Errorf("meta: ListenPeerURL: %w", err)
		}
	}
	client, err := url.Parse(o.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("meta: ClientURL: %w", err)
	}

	cfg := embed.NewConfig()
	cfg.Dir = o.Dir
	cfg.Name = o.Name
	cfg.ListenPeerUrls = []url.URL{*listenPeer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	listenClient := client
	if o.ListenClientURL != "" {
		if listenClient, err = url.Parse(o.ListenClientURL); err != nil {
			return nil, fmt.Errorf("meta: ListenClientURL: %w", err)
		}
	}
	cfg.ListenClientUrls = []url.URL{*listenClient}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.InitialCluster = cfg.InitialClusterFromName(o.Name)
	if o.InitialCluster != "" {
		cfg.InitialCluster = o.InitialCluster
	}
	if o.Join {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	if info := o.tlsInfo(); info.CertFile != "" {
		cfg.PeerTLSInfo = info
		cfg.ClientTLSInfo = info
		// With TLS on the client port, etcd serves gRPC through net/http
		// unless its plain-HTTP endpoints (health, metrics) listen
		// elsewhere; gRPC then owns the port and its TLS. Under load the
		// net/http path answered some calls with an HTTP 200 that is not
		// gRPC ("malformed header: missing HTTP content-type"). The HTTP
		// endpoints go to a socket in the member's own directory.
		sock, err := filepath.Abs(filepath.Join(o.Dir, "http.sock"))
		if err == nil && len(sock) <= maxUnixSocketPath {
			cfg.ListenClientHttpUrls = []url.URL{{Scheme: "unix", Path: sock}}
		}
	}
	cfg.InitialClusterToken = "cairn-meta"
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = o.CompactionRetention.String()
	cfg.QuotaBackendBytes = o.QuotaBytes
	cfg.EnableGRPCGateway = false
	// Nodes join as learners and are promoted as the cluster grows; up to
	// four may wait at once (a five-member service starting from one).
	cfg.MaxLearners = 4
	cfg.LogLevel = "error"
	closing := new(atomic.Bool)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newZapSlog(o.Logger, closing))

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("meta: start etcd in %s: %w", o.Dir, err)
	}
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("meta: etcd in %s failed while starting: %w", o.Dir, err)
	case <-timer.C:
		closing.Store(true)
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("meta: etcd in %s not ready after %v", o.Dir, o.StartTimeout)
	}
	s := &EtcdStore{etcd: e, client: v3client.New(e.Server), name: o.Name, log: o.Logger, closing: closing}
	s.mu.leaders = make(map[*etcdLeadership]struct{})
	return s, nil
}

// DialOptions configure DialEtcd.
type DialOptions struct {
	// Endpoints are client URLs of the meta service's voting members; the
	// client learns the others from the member list. Required.
	Endpoints []string
	// Name identifies this node as a holder of leaderships. Required.
	Name string
	// DialTimeout bounds reaching the first endpoint. Default: 5s.
	DialTimeout time.Duration
	// Logger receives the client's error-level messages. Default: slog.Default().
	Logger *slog.Logger
	// TLS, if set, is the client's configuration: the node's certificate
	// and the cluster CA (the members' client ports take nothing else).
	TLS *tls.Config
}

// DialEtcd returns a Store on a meta service run by other nodes (a node
// that holds no voting etcd member reaches the cluster this way). Once one
// endpoint answers, the client is pointed at the current voters; the member
// list is re-read every 10 s, so it follows membership changes (learners
// are not used as endpoints).
func DialEtcd(o DialOptions) (*EtcdStore, error) {
	if len(o.Endpoints) == 0 || o.Name == "" {
		return nil, errors.New("meta: DialEtcd needs endpoints and a name")
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	closing := new(atomic.Bool)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:        o.Endpoints,
		DialTimeout:      o.DialTimeout,
		AutoSyncInterval: 10 * time.Second,
		Logger:           newZapSlog(o.Logger, closing),
		TLS:              o.TLS,
	})
	if err != nil {
		return nil, fmt.Errorf("meta: connect to the meta service at %s: %w", strings.Join(o.Endpoints, ","), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.DialTimeout)
	defer cancel()
	// Start from the started voters as they are now, not as the caller
	// last saw them (the given endpoints may be a stale list); this is
	// also the reachability check.
	err = cli.Sync(ctx)
	for err != nil && errors.Is(err, rpctypes.ErrGRPCNotSupportedForLearner) && ctx.Err() == nil {
		// The endpoint is a member promoted a moment ago that has not
		// applied its promotion yet: it answers as a learner until then.
		time.Sleep(50 * time.Millisecond)
		err = cli.Sync(ctx)
	}
	if err != nil {
		closing.Store(true)
		cli.Close()
		return nil, fmt.Errorf("meta: reach the meta service at %s: %w", strings.Join(o.Endpoints, ","), err)
	}
	s := &EtcdStore{client: cli, name: o.Name, log: o.Logger, closing: closing}
	s.mu.leaders = make(map[*etcdLeadership]struct{})
	return s, nil
}

// Client returns the in-process etcd client, for maintenance (alarms,
// defragmentation) and for membership changes. It is closed by Close.
func (s *EtcdStore) Client() *clientv3.Client { return s.client }

// read runs a (linearizable) read, again while it fails because the meta
// service's leader just changed (an election, a leadership transfer, a
// member removed): a read is safe to repeat, and the new leader answers
// within an election or two.
func (s *EtcdStore) read(ctx context.Context, key string, opts ...clientv3.OpOption) (resp *clientv3.GetResponse, err error) {
	// A read changes nothing, so it is retried after a timeout as well:
	// a linearizable read times out (after 7 s) when the meta service lost
	// its leader while the read waited.
	err = retryWhile(ctx, unsettled, func() error {
		resp, err = s.client.Get(ctx, key, opts...)
		return err
	})
	return resp, err
}

// retryWhile runs op, again (every 50ms) while its error is one that
// transient says may pass and the attempt that failed began within 3s of
// the first.
func retryWhile(ctx context.Context, transient func(error) bool, op func() error) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		began := time.Now()
		err := op()
		if err == nil || !transient(err) || began.After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// leaderChanging reports whether err says the meta service is between
// leaders.
func leaderChanging(err error) bool {
	return hasEtcdError(err, rpctypes.ErrLeaderChanged, rpctypes.ErrNoLeader, rpctypes.ErrTimeoutDueToLeaderFail)
}

// Unsettled reports whether err says the meta service could not settle a
// request because it was between leaders or timed out waiting: a read
// may be tried again, and a write's outcome is unknown.
func Unsettled(err error) bool { return unsettled(err) }

// unsettled reports whether the meta service could not settle a request
// because it was between leaders or timed out waiting: a read may be
// tried again, and a write's outcome is unknown (it may have applied).
func unsettled(err error) bool {
	return leaderChanging(err) || hasEtcdError(err, rpctypes.ErrTimeout)
}

// hasEtcdError reports whether err carries one of the etcd server's errors
// es, by message: as the client returns them (gRPC statuses) and wrapped
// by this package (mapErr), where rpctypes.Error no longer knows them.
func hasEtcdError(err error, es ...error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	for _, e := range es {
		if strings.Contains(msg, e.Error()) {
			return true
		}
	}
	return false
}

// Get implements Store.
func (s *EtcdStore) Get(ctx context.Context, key string) (KV, error) {
	resp, err := s.read(ctx, key)
	if err != nil {
		return KV{}, s.mapErr("get "+key, err)
	}
	if len(resp.Kvs) == 0 {
		return KV{}, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	kv := resp.Kvs[0]
	return KV{Key: string(kv.Key), Value: kv.Value, Rev: kv.ModRevision}, nil
}

// List implements Store.
func (s *EtcdStore) List(ctx context.Context, prefix string) ([]KV, error) {
	resp, err := s.read(ctx, prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, s.mapErr("list "+prefix, err)
	}
	out := make([]KV, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, KV{Key: string(kv.Key), Value: kv.Value, Rev: kv.ModRevision})
	}
	return out, nil
}

// Put implements Store.
func (s *EtcdStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	if expect == AnyRev {
		var resp *clientv3.PutResponse
		err := s.unlessDropped(ctx, func() (err error) {
			resp, err = s.client.Put(ctx, key, string(value))
			return err
		})
		if err != nil {
			return 0, s.mapErr("put "+key, err)
		}
		return resp.Header.Revision, nil
	}
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", expect)
	if expect == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	var resp *clientv3.TxnResponse
	err := s.unlessDropped(ctx, func() (err error) {
		resp, err = s.client.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, string(value))).Commit()
		return err
	})
	if err != nil {
		return 0, s.mapErr("put "+key, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("put %s at revision %d: %w", key, expect, ErrConflict)
	}
	return resp.Header.Revision, nil
}

// Delete implements Store.
func (s *EtcdStore) Delete(ctx context.Context, key string, expect int64) error {
	if expect == 0 {
		return fmt.Errorf("meta: delete %s: expected revision 0 is invalid", key)
	}
	if expect == AnyRev {
		var resp *clientv3.DeleteResponse
		err := s.unlessDropped(ctx, func() (err error) {
			resp, err = s.client.Delete(ctx, key)
			return err
		})
		if err != nil {
			return s.mapErr("delete "+key, err)
		}
		if resp.Deleted == 0 {
			return fmt.Errorf("delete %s: %w", key, ErrNotFound)
		}
		return nil
	}
	var resp *clientv3.TxnResponse
	err := s.unlessDropped(ctx, func() (err error) {
		resp, err = s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", expect)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key, clientv3.WithCountOnly())).
			Commit()
		return err
	})
	if err != nil {
		return s.mapErr("delete "+key, err)
	}
	if !resp.Succeeded {
		if r := resp.Responses[0].GetResponseRange(); r != nil && r.Count == 0 {
			return fmt.Errorf("delete %s: %w", key, ErrNotFound)
		}
		return fmt.Errorf("delete %s at revision %d: %w", key, expect, ErrConflict)
	}
	return nil
}

// unlessDropped runs a write, again while the meta service's raft dropped
// it (a leadership transfer is under way): a dropped proposal never
// reached the log, so it is safe to send again. Other failures (leader
// changed: the write may have applied) are the caller's.
func (s *EtcdStore) unlessDropped(ctx context.Context, write func() error) error {
	return retryWhile(ctx, proposalDropped, write)
}

// proposalDropped reports whether err is raft's ErrProposalDropped as the
// etcd client returns it (a gRPC status with the message only).
func proposalDropped(err error) bool {
	return err != nil && strings.Contains(err.Error(), raft.ErrProposalDropped.Error())
}

// Close resigns the leaderships still held, then stops the etcd member and
// waits for it. Idempotent.
func (s *EtcdStore) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	leaders := make([]*etcdLeadership, 0, len(s.mu.leaders))
	for l := range s.mu.leaders {
		leaders = append(leaders, l)
	}
	s.mu.Unlock()
	for _, l := range leaders {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := l.Resign(ctx); err != nil {
			s.log.Warn("meta: resign on close", "leadership", l.name, "err", err)
		}
		cancel()
	}
	err := s.client.Close()
	s.closing.Store(true)
	if s.etcd != nil {
		s.etcd.Close() // stops the server and waits for its goroutines
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("meta: close etcd client: %w", err)
	}
	return nil
}

// mapErr wraps an etcd error with context, turning the NOSPACE alarm into
// ErrQuota.
func (s *EtcdStore) mapErr(op string, err error) error {
	if isNoSpace(err) {
		return fmt.Errorf("%s: %w (%v)", op, ErrQuota, err)
	}
	return fmt.Errorf("meta: %s: %w", op, err)
}

func isNoSpace(err error) bool {
	if errors.Is(err, etcderrors.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) {
		return true
	}
	if rpctypes.Error(err) == rpctypes.ErrNoSpace {
		return true
	}
	return strings.Contains(err.Error(), "database space exceeded")
}

// Forget drops the meta service's history: every revision older than the
// current one is compacted away, and an embedded member's database file is
// rewritten without the pages that held them (a value overwritten in
// place, a secret sealed that was in clear, leaves no copy behind there;
// the member's write-ahead log keeps it until etcd cuts the log).
func (s *EtcdStore) Forget(ctx context.Context) error {
	resp, err := s.client.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return s.mapErr("read the revision", err)
	}
	if _, err := s.client.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil && !strings.Contains(err.Error(), "compacted") {
		return s.mapErr("compact", err)
	}
	if s.etcd != nil {
		if err := s.etcd.Server.Backend().Defrag(); err != nil {
			return fmt.Errorf("meta: defragment: %w", err)
		}
	}
	return nil
}
