package cluster

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/segment"
	"github.com/cairn-db/cairn/internal/storage"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/tso"
	"github.com/cairn-db/cairn/internal/txn"
)

// Default listener ports. The native protocol, HTTP and the meta service's
// peer port bind to the loopback address unless Config.Listen says otherwise.
const (
	DefaultMetaPort   = 7090
	DefaultPeerPort   = 7071
	DefaultMetaClient = 7091
)

// Config configures a node. The zero value of every field means its default.
type Config struct {
	// DataDir holds everything the node stores. Default: ./cairn-data.
	DataDir string
	// Listen is the host the listeners bind to. Default: 127.0.0.1.
	Listen string
	// MetaPort is the embedded meta service's peer port. Default: 7090. -1 picks a free port.
	MetaPort int
	// PeerPort is the node-to-node (gRPC) port. Default: 7071. -1 picks a free port.
	PeerPort int
	// Advertise is the host other nodes and clients reach this node at.
	// Default: Listen, or the host name when Listen is 0.0.0.0 or ::.
	Advertise string
	// Zone is the node's failure domain. Default: "default".
	Zone string
	// Join is the peer address (host:port) of any node of an existing
	// cluster; a node with an empty data directory joins that cluster,
	// with JoinToken.
	Join string
	// JoinToken admits this node when it joins (cairn cluster token
	// create makes one).
	JoinToken string
	// BootstrapToken, at the first start of a new cluster (no Join), is
	// registered as a join token that admits any number of nodes until
	// BootstrapTokenTTL (default 1h) later: for deploy files that start
	// every node at once with one shared token.
	BootstrapToken    string
	BootstrapTokenTTL time.Duration
	// MetaClientPort is the embedded meta service's client port (other
	// nodes' meta clients use it). Default: 7091. -1 picks a free port.
	MetaClientPort int
	// InlineThreshold: bodies up to this many bytes are stored inside the
	// version record (one hop, one fsync). Default: 64 KiB. Max 1 MiB.
	InlineThreshold int
	// DefaultRanges is the number of ranges a new space starts with when its
	// settings do not say. Default: 4. Max 256.
	DefaultRanges int
	// MaxObjectSize bounds one object's size. Default: 5 TiB.
	MaxObjectSize int64
	// MaxRangeWrite bounds the body of one byte-range write or append, which
	// is held in memory while its chunks are re-cut. Default: 64 MiB.
	MaxRangeWrite int64
	// TxnTTL is how long a transaction's locks outlive its coordinator's
	// last heartbeat (0: txn.DefaultTTL).
	TxnTTL time.Duration
	// LockSweep is how often a leaseholder looks for expired locks in its
	// ranges and resolves them (default 10 s): a transaction whose
	// coordinator died leaves no lock behind on keys nobody reads.
	LockSweep time.Duration
	// Chunking configures content-defined chunking of uploads.
	Chunking chunk.Options
	// RecordCache is the memory, in bytes, of the cache of each hot
	// object's latest version record (reads of the latest version skip
	// pebble when it hits). Default: 64 MiB; -1 disables it.
	RecordCache int64
	// ChunkCache is the memory, in bytes, of the cache of chunks this
	// node read from its disk and verified (segment.Options.DataCache): a
	// read of a hot chunk costs neither a disk read nor a hash. Default: an
	// eighth of the memory the process may use (the machine's, a
	// container's limit or GOMEMLIMIT, the least; large chunks are read
	// and written around the page cache, so this is where they are
	// cached; it is memory of its own, off the Go heap); -1 disables it.
	ChunkCache int64
	// PopulateChunkCache faults the chunk cache's memory in at low
	// priority from the start (segment.Options.PopulateCache), so that
	// writes and reads do not pay for touching it the first time.
	// The server sets it; tests that run many nodes in one process do not.
	PopulateChunkCache bool
	// HeartbeatTTL is the lease a node's heartbeat holds in the meta
	// service: a node that stops is suspect this long after its last
	// renewal. Default: 3s.
	HeartbeatTTL time.Duration
	// DownAfter is how long a node stays suspect before it is down and
	// its copies are restored elsewhere. Default: 5m.
	DownAfter time.Duration
	// MinCopies is the fewest durable copies a chunk may be acknowledged
	// with (capped by the space's replicas); a write that cannot make
	// them fails and commits nothing. Default (0): 2 when the space keeps
	// two copies or more and the cluster has two nodes or more, else 1.
	MinCopies int
	// RepairRate bounds the bytes per second the chunk repairer copies
	// from this node, so that restoring copies does not starve requests.
	// Default: 64 MiB/s; -1: no limit.
	RepairRate int64
	// RepairCheck is how often the node checks whether the cluster map
	// changed since its last chunk repair pass. Default: 5s.
	RepairCheck time.Duration
	// TestingAfterTouch is a testing knob (object.StoreConfig).
	TestingAfterTouch func()
	// SegmentSize is the size at which a chunk segment file is sealed
	// (segment.Options). Default: 256 MiB.
	SegmentSize int64
	// GCGrace is how long a chunk no version references stays before the
	// chunk collector deletes it (gc.go): an upload must commit within it
	// of writing its chunks. Default: 1h.
	GCGrace time.Duration
	// GCInterval is how often the node collects its chunks. Default: 10m;
	// -1: never on its own (CollectGarbage still runs one).
	GCInterval time.Duration
	// WatchRetention is how long each range keeps its change feed (the
	// watch's source): a watch whose cursor is older is told its cursor
	// expired. Trimmed every minute by the ranges' leaseholders.
	// Default: 24h; -1: forever.
	WatchRetention time.Duration
	// RebalanceAfter is how long every node must have been up before range
	// replicas and leases move to their best-placed nodes (so a restart or
	// a fault moves nothing back and forth). Default: 10s.
	RebalanceAfter time.Duration
	// SplitSize: a range whose versions take more than this many bytes on
	// disk (pebble's estimate) splits in two. Default: 64 MiB; -1: never.
	SplitSize int64
	// SplitLoad: a range that serves more than this many requests per
	// second for 5 seconds in a row splits at the median key it served.
	// Default: 2,500; -1: never.
	SplitLoad int
	// MergeSize: two neighbouring ranges on the same nodes whose versions
	// together take fewer bytes merge into one, once both have served
	// under a quarter of SplitLoad for MergeAfter. Default: 16 MiB, at
	// most a quarter of SplitSize (so the halves of a split do not merge
	// back); -1: never.
	MergeSize int64
	// MergeAfter: see MergeSize. Default: 1 minute.
	MergeAfter time.Duration
	// MetaMembers bounds the meta service's embedded etcd members (voters
	// and learners): nodes beyond it reach the meta service as clients, and
	// it caps the voters (meta.TargetVoters). 1, 3, 5 or 7; default 5. Read
	// by a node admitting another and by every node's membership
	// reconciler, so give every node the same value.
	MetaMembers int
	// MemberStartGrace is how long a meta service member may stay added
	// but unstarted (its joiner admitted, its etcd member never heard
	// from) before the membership reconciler removes it: until then every
	// later admission waits for it. Default: 2 minutes.
	MemberStartGrace time.Duration

	// Link, if set, reports whether node from can reach node to now: a
	// seam for tests that inject network faults into node-to-node traffic
	// (raft messages, snapshots, peer calls; not the meta service's own
	// etcd traffic). Default: every node reaches every node.
	Link func(from, to uint64) bool

	// RootAccessKey and RootSecretKey are the S3 root key (both or
	// neither). Default: the key saved in the meta service, which the
	// cluster's first node makes at its first start.
	RootAccessKey, RootSecretKey string
	// OnRootKey, if set, is called once with a root key this node made
	// and saved, so that it can be shown to the operator.
	OnRootKey func(auth.Key)

	// NativeAddr and HTTPAddr are the bound addresses (host:port) of the
	// node's native protocol and HTTP listeners: the cluster map
	// advertises their ports (at Advertise) to clients and other nodes.
	NativeAddr, HTTPAddr string
	// Bind, if set, binds those listeners and returns their addresses
	// (replacing NativeAddr and HTTPAddr). Open calls it once the node is
	// about to serve, just before it registers in the cluster map, so
	// that clients are refused rather than kept waiting while a node
	// joins or recovers.
	Bind func() (nativeAddr, httpAddr string, err error)
	// PeerCodes carries the failures of the object service across the
	// range client's peer envelope (the native protocol's codes).
	PeerCodes rangeclient.Codes
	// Forwarded, if set, is told of each request the range client passes
	// to another node (the native protocol tells its client its route
	// was stale).
	Forwarded func(ctx context.Context)

	// FS is the disk seam. Default: the real disk.
	FS vfs.FS
	// Meta, if set, is used instead of starting embedded etcd (tests).
	Meta meta.Store
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Seed seeds the node's random choices (merge tokens). Zero: one is
	// drawn at start and logged, so a run can be repeated with it.
	Seed uint64
}

// EnsureDefaults fills in zero fields.
func (c *Config) EnsureDefaults() {
	if c.DataDir == "" {
		c.DataDir = "cairn-data"
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1"
	}
	if c.MetaPort == 0 {
		c.MetaPort = DefaultMetaPort
	}
	if c.PeerPort == 0 {
		c.PeerPort = DefaultPeerPort
	}
	if c.MetaClientPort == 0 {
		c.MetaClientPort = DefaultMetaClient
	}
	if c.Zone == "" {
		c.Zone = "default"
	}
	if c.InlineThreshold == 0 {
		c.InlineThreshold = 64 << 10
	}
	if c.DefaultRanges == 0 {
		c.DefaultRanges = 4
	}
	if c.MaxObjectSize == 0 {
		c.MaxObjectSize = 5 << 40
	}
	if c.MaxRangeWrite == 0 {
		c.MaxRangeWrite = 64 << 20
	}
	if c.RecordCache == 0 {
		c.RecordCache = 64 << 20
	}
	if c.ChunkCache == 0 {
		c.ChunkCache = defaultChunkCache()
	}
	if c.HeartbeatTTL == 0 {
		c.HeartbeatTTL = 3 * time.Second
	}
	if c.DownAfter == 0 {
		c.DownAfter = 5 * time.Minute
	}
	if c.RepairRate == 0 {
		c.RepairRate = 64 << 20
	}
	if c.RebalanceAfter == 0 {
		c.RebalanceAfter = 10 * time.Second
	}
	if c.RepairCheck == 0 {
		c.RepairCheck = 5 * time.Second
	}
	if c.GCGrace == 0 {
		c.GCGrace = time.Hour
	}
	if c.GCInterval == 0 {
		c.GCInterval = 10 * time.Minute
	}
	if c.WatchRetention == 0 {
		c.WatchRetention = 24 * time.Hour
	}
	if c.SplitSize == 0 {
		c.SplitSize = 64 << 20
	}
	if c.SplitLoad == 0 {
		c.SplitLoad = 2500
	}
	if c.MergeSize == 0 {
		c.MergeSize = 16 << 20
	}
	if c.MergeSize > 0 && c.SplitSize > 0 {
		c.MergeSize = min(c.MergeSize, c.SplitSize/4)
	}
	if c.MergeAfter == 0 {
		c.MergeAfter = time.Minute
	}
	if c.MetaMembers == 0 {
		c.MetaMembers = 5
	}
	if c.MemberStartGrace == 0 {
		c.MemberStartGrace = 2 * time.Minute
	}
	if c.LockSweep == 0 {
		c.LockSweep = 10 * time.Second
	}
	if c.BootstrapTokenTTL == 0 {
		c.BootstrapTokenTTL = time.Hour
	}
	c.Chunking.EnsureDefaults()
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	port := func(name string, p int) {
		if p < -1 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s %d is not a port (1-65535, 0 for the default, -1 for any free port)", name, p))
		}
	}
	port("meta port", c.MetaPort)
	port("peer port", c.PeerPort)
	port("meta client port", c.MetaClientPort)
	if c.InlineThreshold < 0 || c.InlineThreshold > 1<<20 {
		errs = append(errs, fmt.Errorf("inline threshold %d must be between 0 and 1 MiB", c.InlineThreshold))
	}
	if c.HeartbeatTTL < time.Second {
		errs = append(errs, fmt.Errorf("heartbeat TTL %v is under the meta service's 1s lease granularity", c.HeartbeatTTL))
	}
	if c.DownAfter < 0 {
		errs = append(errs, fmt.Errorf("down-after %v is negative", c.DownAfter))
	}
	if c.MergeSize < -1 {
		errs = append(errs, fmt.Errorf("merge size %d must be bytes, or -1 for never", c.MergeSize))
	}
	if c.MergeAfter < 0 {
		errs = append(errs, fmt.Errorf("merge-after %v is negative", c.MergeAfter))
	}
	if c.MetaMembers < 1 || c.MetaMembers > 7 || c.MetaMembers%2 == 0 {
		errs = append(errs, fmt.Errorf("meta members %d must be 1, 3, 5 or 7", c.MetaMembers))
	}
	if c.MinCopies < 0 || c.MinCopies > 7 {
		errs = append(errs, fmt.Errorf("min copies %d must be between 1 and 7 (0: the default)", c.MinCopies))
	}
	if c.GCGrace < 0 {
		errs = append(errs, fmt.Errorf("gc grace %v must not be negative", c.GCGrace))
	}
	if c.GCInterval < -1 || c.GCInterval > 0 && c.GCInterval < time.Second {
		errs = append(errs, fmt.Errorf("gc interval %v must be a second or more, or -1 for never", c.GCInterval))
	}
	if c.RepairRate < -1 {
		errs = append(errs, fmt.Errorf("repair rate %d must be bytes per second, or -1 for no limit", c.RepairRate))
	}
	if c.ChunkCache < -1 {
		errs = append(errs, fmt.Errorf("chunk cache %d must be a size in bytes, or -1 to disable it", c.ChunkCache))
	}
	if c.RecordCache < -1 {
		errs = append(errs, fmt.Errorf("record cache %d must be a size in bytes, or -1 to disable it", c.RecordCache))
	}
	if c.DefaultRanges < 1 || c.DefaultRanges > 256 {
		errs = append(errs, fmt.Errorf("default ranges %d must be between 1 and 256", c.DefaultRanges))
	}
	if net.ParseIP(c.Listen) == nil && c.Listen != "localhost" {
		errs = append(errs, fmt.Errorf("listen address %q is not an IP address", c.Listen))
	}
	if err := c.Chunking.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.JoinToken != "" && c.Join == "" {
		errs = append(errs, errors.New("a join token is for joining: give --join HOST:PORT too"))
	}
	if c.JoinToken != "" {
		if _, err := auth.ParseJoinToken(c.JoinToken); err != nil {
			errs = append(errs, fmt.Errorf("join token: %w", err))
		}
	}
	if c.BootstrapToken != "" {
		if _, err := auth.ParseJoinToken(c.BootstrapToken); err != nil {
			errs = append(errs, fmt.Errorf("bootstrap token: %w", err))
		}
	}
	if (c.RootAccessKey == "") != (c.RootSecretKey == "") {
		errs = append(errs, errors.New("root access key and root secret key must be given together"))
	} else if c.RootAccessKey != "" && (len(c.RootAccessKey) < 3 || len(c.RootSecretKey) < 8) {
		errs = append(errs, errors.New("root access key must be at least 3 characters and its secret at least 8"))
	}
	return errors.Join(errs...)
}

// Node is one running Cairn node. It serves the object service (the
// embedded Store) and the space operations.
type Node struct {
	kms kmsCache // KMS key material used here (kms.go)
	*object.Store
	cfg     Config
	log     *slog.Logger
	eng     *storage.Engine
	meta    meta.Store
	ownMeta bool // meta was opened by the node (and is closed by it)
	oracle  *meta.Oracle
	tso     *tso.Client  // timestamps from the oracle, here or on its leader
	txns    *txn.Manager // transactions, and the resolution of their locks
	catalog *meta.Catalog
	rootKey atomic.Pointer[auth.Key] // the root key (a cluster admin)
	keys    auth.Keyring             // the root key and the others (keys.go)
	sec     security                 // CA, certificate, cluster keys (security.go)
	keysMu  sync.Mutex               // serializes changes of the cluster keys (security.go)
	keysErr atomic.Pointer[string]   // the access keys' read problem last logged (keys.go)
	rnd     struct {
		sync.Mutex
		r *rand.Rand
	}
	keysLearned time.Time // when learnClusterKeys last asked another node; keysMu
	// unstarted is when reconcileMeta first saw each meta member that is
	// added but not started; owned by that loop.
	unstarted map[uint64]time.Time
	// promoteFailed is, for each learner still unpromoted, when
	// reconcileMeta first failed to promote it and when it last said so;
	// that loop's.
	promoteFailed map[uint64]promoteFailure
	joins         challenges // join challenges answered (join.go)
	chunks        *segment.Store
	ranges        *replica.Store
	id            identity
	metrics       *metrics
	cache         *kv.Cache // latest records; nil when disabled
	peers         *peers
	rc            *rangeclient.Client // routes range operations to leaseholders (route.go)
	builds        indexBuilds         // field index builds running here (indexes.go)
	plane         *object.ChunkPlane  // stores and reads chunks on their nodes
	// rangeMethods serve the peer service rangeclient.Service; set in
	// Open before the peer server serves.
	rangeMethods map[string]transport.Unary
	// metaPeerURL is the embedded etcd member's peer URL ("" with cfg.Meta).
	metaPeerURL string
	// member is the node's own etcd member when it is not n.meta itself (a
	// joined node reaches the meta service through a client). Set at open,
	// or later by topUpMeta.
	member atomic.Pointer[meta.EtcdStore]
	bg     sync.WaitGroup // background loops, stopped by Close
	openMu sync.Mutex     // serializes openSpace
	// savedEndpoints are the meta endpoints last saved with the identity
	// (reconcileMeta's goroutine only).
	savedEndpoints []string
	bgc            context.Context    // the loops' context (Start)
	stopBG         context.CancelFunc // ends the loops Start started
	stopOnce       sync.Once
	chunkPass      atomic.Pointer[chunkPass]
	gc             gcState
	moving         atomic.Int64      // ranges this node leads that have a learner (repairRanges)
	rangec         chan rangeEvent   // splits and merges applied here (onSplit, onMerge -> followRanges)
	merged         sync.Map          // range id -> true: merged away here (merges.go)
	metaMoveAfter  time.Time         // oracleOffMetaLeader waits until then after a failed move
	syncKick       chan struct{}     // asks syncRanges to run now
	repairPace     pacer             // bounds the repairer's copy rate (repairStep only)
	repairLog      map[uint64]string // range id -> why its last repair step failed (repairRanges only)
	hbMu           sync.Mutex
	heartbeat      meta.Leadership // held by keepBeating

	mu struct {
		sync.RWMutex
		spaces map[string]*space // by name
		snaps  map[string]*space // snapshot views, by name (snapshots.go)
	}
	// snapMu runs refreshSnapshots one at a time: a slow refresh that read
	// the catalog before a snapshot was made must not lower the mark a
	// later one raised.
	snapMu sync.Mutex

	closeOnce sync.Once
	closeErr  error
	serveWG   sync.WaitGroup
}

// identity is the node's persisted identity.
type identity struct {
	V       int    `json:"v"`
	NodeID  uint64 `json:"node_id"`
	Cluster string `json:"cluster"`
	// Joined is set on a node that joined an existing cluster: it reaches
	// the meta service through Endpoints (client URLs of voting members,
	// refreshed from the member list while running), and Member says
	// whether it also runs an etcd member of its own.
	Joined    bool     `json:"joined,omitempty"`
	Member    bool     `json:"member,omitempty"`
	Endpoints []string `json:"endpoints,omitempty"`
}

var identityKey = []byte(storage.PrefixNodeLocal + "identity")

// Open starts a node: it opens or creates everything under cfg.DataDir,
// recovers, and binds the listeners. Serving starts with Serve.
func Open(ctx context.Context, cfg Config) (_ *Node, err error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	n := &Node{cfg: cfg, log: cfg.Logger, cache: kv.NewCache(cfg.RecordCache)}
	if cfg.PopulateChunkCache && cfg.ChunkCache > 0 {
		// A server's chunk cache is memory of its own, off the Go heap:
		// a memory limit set for the process (GOMEMLIMIT) is the heap's,
		// so the cache comes out of it.
		if m := debug.SetMemoryLimit(-1); m > 0 && m < math.MaxInt64 {
			debug.SetMemoryLimit(max(m-cfg.ChunkCache, m/2))
			n.log.Info("Go memory limit lowered by the chunk cache", "was", m, "cache", cfg.ChunkCache)
		}
	}
	// The loops' context exists from the start, so that Stop and Go work
	// whenever they are called (a loop started after Stop exits at once).
	n.bgc, n.stopBG = context.WithCancel(context.Background())
	seed := cfg.Seed
	for seed == 0 {
		var b [8]byte
		_, _ = crand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	n.rnd.r = rand.New(rand.NewPCG(seed, 0))
	n.log.Debug("random seed", "seed", seed)
	n.repairPace.rate = float64(cfg.RepairRate)
	n.mu.spaces = make(map[string]*space)
	n.mu.snaps = make(map[string]*space)
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if err := storage.MkdirAllSync(cfg.FS, cfg.DataDir); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", cfg.DataDir, err)
	}
	n.eng, err = storage.Open(storage.Options{Dir: filepath.Join(cfg.DataDir, "db"), FS: cfg.FS, Logger: n.log})
	if err != nil {
		return nil, err
	}
	found, err := n.loadIdentity()
	if err != nil {
		return nil, err
	}
	if err := n.startPeers(); err != nil {
		return nil, err
	}
	var joined *joinResponse
	newCluster, upgraded := false, false
	switch {
	case !found && cfg.Join != "":
		if cfg.JoinToken == "" {
			return nil, fmt.Errorf("joining the cluster at %s needs a join token: make one on a node of the cluster with `cairn cluster token create`, and start this node with --token", cfg.Join)
		}
		if joined, err = n.join(ctx); err != nil {
			return nil, err
		}
	case !found:
		if err := n.newIdentity(); err != nil {
			return nil, err
		}
		if err := n.newSecurity(); err != nil {
			return nil, fmt.Errorf("make the cluster's security material: %w", err)
		}
		newCluster = true
	case cfg.Join != "":
		n.log.Info("already a member of a cluster; --join is ignored", "node", n.id.NodeID)
	}
	if found {
		ok, err := n.loadSecurity()
		if err != nil {
			return nil, err
		}
		if !ok {
			// Data written before clusters had security material.
			if n.id.Joined {
				return nil, fmt.Errorf("the data directory %s is from a version of Cairn whose clusters had no security material, and this node joined another: a cluster of several nodes cannot be secured in place. Start a new cluster and copy the data over (for example with rclone through the S3 API)", cfg.DataDir)
			}
			// A marker first: until the meta service shows one member, a
			// later start must check again (securePeerURL).
			if err := n.writeSecFile(upgradeMarker, []byte("securing a data directory of an earlier version\n"), false); err != nil {
				return nil, err
			}
			if err := n.newSecurity(); err != nil {
				return nil, fmt.Errorf("make the cluster's security material: %w", err)
			}
			upgraded = true
			n.log.Info("made this cluster's certificate authority and cluster key (the data directory is from a version without them)")
		}
	}
	n.newPeerServer()
	if err := n.openMeta(joined); err != nil {
		return nil, err
	}
	if joined != nil {
		if err := n.saveIdentity(n.id); err != nil {
			return nil, err
		}
	}
	if err := n.securePeerURL(ctx, upgraded); err != nil {
		return nil, err
	}
	n.catalog = meta.NewCatalog(n.meta).WithSecrets(keyBox{n})
	n.peers.catalog.Store(n.catalog)
	if err := n.catalog.ReserveNodeID(ctx, n.id.NodeID); err != nil {
		return nil, fmt.Errorf("reserve node id %d: %w", n.id.NodeID, err)
	}
	n.sealSecrets(ctx)
	if err := n.loadRootKey(ctx); err != nil {
		return nil, err
	}
	if err := n.refreshKeys(ctx); err != nil {
		return nil, fmt.Errorf("read the access keys: %w", err)
	}
	if newCluster && cfg.BootstrapToken != "" {
		if err := n.registerBootstrapToken(ctx); err != nil {
			return nil, err
		}
	}
	n.oracle = meta.NewOracle(n.meta, meta.OracleOptions{Clock: cfg.Clock, Logger: n.log})
	n.tso = tso.New(tso.Options{Self: n.id.NodeID, Oracle: n.oracle, Meta: n.meta, Reserve: n.reserveTimestamps, Logger: n.log})
	// A node alone in its cluster leads the oracle before it serves (no
	// other node could); a node of a larger cluster asks the leader for
	// timestamps, which may be another node for as long as that one
	// lives. Either campaigns again in the background whenever it does not
	// lead (tso.Client.Start).
	if !n.id.Joined {
		nodes, err := n.catalog.Nodes(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the cluster map: %w", err)
		}
		if len(nodes) <= 1 {
			if err := n.oracle.Start(ctx); err != nil {
				return nil, fmt.Errorf("start timestamp oracle: %w", err)
			}
		}
	}
	n.chunks, err = segment.Open(segment.Options{
		Dir: filepath.Join(cfg.DataDir, "segments"), FS: cfg.FS, DB: n.eng.DB(), Logger: n.log,
		SegmentSize: cfg.SegmentSize, Now: cfg.Clock, DataCache: cfg.ChunkCache,
		PopulateCache: cfg.PopulateChunkCache,
	})
	if err != nil {
		return nil, err
	}
	n.rangec, n.syncKick = make(chan rangeEvent, 64), make(chan struct{}, 1)
	n.ranges, err = replica.NewStore(replica.Options{
		NodeID: n.id.NodeID, Engine: n.eng, Transport: n.peers.tr, Logger: n.log,
		NewStateMachine: n.newStateMachine,
		IDSpans:         kv.IDSpans,
		OnSplit:         n.onSplit,
		OnMerge:         n.onMerge,
	})
	if err != nil {
		return nil, err
	}
	n.metrics = newMetrics(n)
	n.plane = object.NewChunkPlane(object.ChunkConfig{
		Self: n.id.NodeID, Zone: cfg.Zone, Local: n.chunks, Nodes: n.peers.view, Call: n.callNode,
		Inflight: n.peers.load, MinCopies: cfg.MinCopies, Logger: n.log, Corrupt: n.metrics.corrupt,
	})
	n.rc = n.newRangeClient()
	n.rangeMethods = n.rc.Methods()
	n.rangeMethods["Merge"] = n.rc.Method(false, n.handleMerge)
	n.txns = txn.New(txn.Config{
		Ranges: n.rc, Table: n.tableOf, Timestamps: n.tso, TTL: cfg.TxnTTL, Clock: cfg.Clock, Logger: n.log,
	})
	n.Store = object.NewStore(object.StoreConfig{
		Spaces: spaceOpener{n}, Ranges: n.rc, Timestamps: n.tso, Chunks: n.plane,
		InlineThreshold: cfg.InlineThreshold, MaxObjectSize: cfg.MaxObjectSize, MaxRangeWrite: cfg.MaxRangeWrite,
		Chunking: cfg.Chunking, ChunkBytes: n.metrics.chunkBytes, Txns: n.txns,
		GCGrace: cfg.GCGrace, TestingAfterTouch: cfg.TestingAfterTouch,
	})
	if err := n.loadSpaces(ctx); err != nil {
		return nil, err
	}
	if n.cfg.Bind != nil {
		// The client ports open only now, once the node can serve soon:
		// until then a client is refused and tries another node.
		if n.cfg.NativeAddr, n.cfg.HTTPAddr, err = n.cfg.Bind(); err != nil {
			return nil, err
		}
	}
	if err := n.register(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// Start starts the node's background work: heartbeats, health, the meta
// service's membership, the oracle's placement, range table sync, splits,
// merges, repair and rebalancing, settings and keys. Call it once, after
// Open; Stop (or Close) ends it.
func (n *Node) Start() {
	bgCtx := n.bgc
	n.bg.Add(10)
	go func() {
		defer n.bg.Done()
		every(bgCtx, n.cfg.RepairCheck, n.repairStep)
	}()
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		every(bgCtx, time.Minute, n.forgetTouches)
	}()
	if n.cfg.GCInterval > 0 {
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			every(bgCtx, n.cfg.GCInterval, n.gcStep)
		}()
	}
	if n.cfg.WatchRetention > 0 {
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			every(bgCtx, time.Minute, n.trimFeeds)
		}()
	}
	go func() {
		defer n.bg.Done()
		n.keepBeating(bgCtx)
	}()
	go func() {
		defer n.bg.Done()
		every(bgCtx, time.Second, n.watchNodes)
	}()
	go func() {
		defer n.bg.Done()
		every(bgCtx, 500*time.Millisecond, n.reconcileMeta)
	}()
	go func() {
		defer n.bg.Done()
		every(bgCtx, 500*time.Millisecond, n.oracleOffMetaLeader)
	}()
	go func() {
		defer n.bg.Done()
		everyOrKick(bgCtx, 500*time.Millisecond, n.syncKick, n.syncRanges)
	}()
	go func() {
		defer n.bg.Done()
		every(bgCtx, time.Second, func(ctx context.Context) {
			n.refreshSettings(ctx)
			if err := n.refreshKeys(ctx); err != nil && ctx.Err() == nil {
				n.log.Warn("could not read the access keys; the ones read last stay in force", "err", err)
			}
		})
	}()
	go func() {
		defer n.bg.Done()
		n.followRanges(bgCtx)
	}()
	go func() {
		defer n.bg.Done()
		every(bgCtx, time.Second, n.repairRanges)
	}()
	go func() {
		defer n.bg.Done()
		every(bgCtx, n.cfg.LockSweep, n.sweepLocks)
	}()
	n.tso.Start()
}

// Go runs fn in the background as one of the node's loops: fn must
// return when ctx ends, at Stop.
func (n *Node) Go(fn func(ctx context.Context)) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		fn(n.bgc)
	}()
}

// Stop ends the background work started by Start (and Go) and returns
// when every loop, and the timestamp client's campaign, has exited. It is
// idempotent.
func (n *Node) Stop() {
	n.stop()
	n.bg.Wait()
}

// stop cancels the loops and gives up the heartbeat and the oracle's
// campaign, once.
func (n *Node) stop() {
	n.stopOnce.Do(func() {
		n.stopBG()
		n.stopBeating()
		if n.tso != nil {
			n.tso.Stop()
		}
	})
}

func (n *Node) loadIdentity() (found bool, err error) {
	v, c, err := n.eng.DB().Get(identityKey)
	if err == nil {
		defer c.Close()
		if err := json.Unmarshal(v, &n.id); err != nil || n.id.V != 1 || n.id.NodeID == 0 {
			return false, fmt.Errorf("node identity in %s is unreadable (%v); the data directory is damaged", n.cfg.DataDir, err)
		}
		return true, nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return false, err
	}
	return false, nil
}

// newIdentity makes this node node 1 of a new cluster.
func (n *Node) newIdentity() error {
	return n.saveIdentity(identity{V: 1, NodeID: 1, Cluster: fmt.Sprintf("%016x", n.cfg.Clock().UnixNano())})
}

// saveIdentity makes id the node's identity and saves it. Only Open calls
// it: n.id is read without a lock once the node runs.
func (n *Node) saveIdentity(id identity) error {
	n.id = id
	return n.writeIdentity(id)
}

func (n *Node) writeIdentity(id identity) error {
	b, _ := json.Marshal(id)
	return n.eng.DB().Set(identityKey, b, pebble.Sync)
}

// every runs fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	everyOrKick(ctx, d, nil, fn)
}

// newStateMachine makes a range's state machine.
func (n *Node) newStateMachine(rangedesc.Range) replica.StateMachine {
	return &kv.StateMachine{Cache: n.cache}
}

// cutDialWait is how long a peer call to a node an injected network fault
// cuts off waits before it fails (as a dial to an unreachable host would).
const cutDialWait = 200 * time.Millisecond

// linkFunc adapts Config.Link for the transport; nil without one.
func (n *Node) linkFunc() func(uint64) bool {
	if n.cfg.Link == nil {
		return nil
	}
	return func(to uint64) bool { return n.cfg.Link(n.id.NodeID, to) }
}

// everyOrKick is every, also running fn at once when kick fires.
func everyOrKick(ctx context.Context, d time.Duration, kick <-chan struct{}, fn func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		fn(ctx)
	}
}

// pickPort returns port, or for -1 a port of host free now. The port is
// drawn below Linux's ephemeral range (32768 and up), not asked of the
// kernel: the service binds it only later (etcd's listeners), and a port
// the kernel hands out for a listener is one it also hands out to outgoing
// connections meanwhile.
func pickPort(host string, port int) (int, error) {
	if port != -1 {
		return port, nil
	}
	var err error
	for range 200 {
		var b [2]byte
		_, _ = crand.Read(b[:]) // (a port to try needs no seeded source)
		p := 20000 + (int(b[0])<<8|int(b[1]))%12768
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s: %w", host, err)
}

// Serve serves the peer port (node-to-node calls, raft, snapshots) in
// the background. Close stops it.
func (n *Node) Serve() {
	n.serveWG.Add(1)
	go func() {
		defer n.serveWG.Done()
		if err := n.peers.srv.Serve(n.peers.l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			n.log.Error("peer server stopped", "err", err)
		}
	}()
}

// Close closes everything at once; it is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		var errs []error
		n.stop()
		n.peers.close()
		n.serveWG.Wait()
		// The loops exit before what they use closes (a loop's last read of
		// the meta service must happen before its Close).
		n.bg.Wait()
		if n.txns != nil {
			n.txns.Close()
		}
		if n.ranges != nil {
			errs = append(errs, n.ranges.Close())
		}
		if n.chunks != nil {
			errs = append(errs, n.chunks.Close())
		}
		if n.tso != nil {
			n.tso.Stop()
		}
		if n.oracle != nil {
			n.oracle.Close()
		}
		if n.ownMeta && n.meta != nil {
			errs = append(errs, n.meta.Close())
		}
		if m := n.member.Swap(nil); m != nil {
			errs = append(errs, m.Close())
		}
		if n.eng != nil {
			errs = append(errs, n.eng.Close())
		}
		for _, e := range errs {
			if e != nil && !errors.Is(e, net.ErrClosed) {
				n.closeErr = errors.Join(n.closeErr, e)
			}
		}
	})
	return n.closeErr
}

// NodeID is the node's id in the cluster.
func (n *Node) NodeID() uint64 { return n.id.NodeID }

// Keyring returns the access keys the node authenticates requests with.
func (n *Node) Keyring() *auth.Keyring { return &n.keys }

// Registry returns the node's Prometheus registry.
func (n *Node) Registry() *prometheus.Registry { return n.metrics.reg }

// random draws from the node's seeded source (Config.Seed).
func (n *Node) random() uint64 {
	n.rnd.Lock()
	defer n.rnd.Unlock()
	return n.rnd.r.Uint64()
}
