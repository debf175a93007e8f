// Package config is the one place that reads command-line flags, CAIRN_*
// environment variables and the config file, in that order of precedence
// (flags > environment > file > defaults), and turns them into plain option
// structs for the rest of the code.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/cairn-db/cairn/internal/cluster"
	"github.com/cairn-db/cairn/internal/node"
)

// Server is the server's configuration as a user writes it. Keys are the
// flag names; the environment variable of key "data-dir" is CAIRN_DATA_DIR.
type Server struct {
	DataDir         string        `koanf:"data-dir"`
	Listen          string        `koanf:"listen"`
	Port            int           `koanf:"port"`
	HTTPPort        int           `koanf:"http-port"`
	MetaPort        int           `koanf:"meta-port"`
	PeerPort        int           `koanf:"peer-port"`
	Advertise       string        `koanf:"advertise"`
	Zone            string        `koanf:"zone"`
	Join            string        `koanf:"join"`
	Token           string        `koanf:"token"`
	TokenTTL        time.Duration `koanf:"token-ttl"`
	MetaClientPort  int           `koanf:"meta-client-port"`
	InlineThreshold int           `koanf:"inline-threshold"`
	Ranges          int           `koanf:"ranges"`
	RecordCache     int64         `koanf:"record-cache"`
	ChunkCache      int64         `koanf:"chunk-cache"`
	DownAfter       time.Duration `koanf:"down-after"`
	RepairRate      int64         `koanf:"repair-rate"`
	GCGrace         time.Duration `koanf:"gc-grace"`
	GCInterval      time.Duration `koanf:"gc-interval"`
	WatchRetention  time.Duration `koanf:"watch-retention"`
	MinCopies       int           `koanf:"min-copies"`
	RebalanceAfter  time.Duration `koanf:"rebalance-after"`
	SplitSize       int64         `koanf:"split-size"`
	SplitLoad       int           `koanf:"split-load"`
	MergeSize       int64         `koanf:"merge-size"`
	MergeAfter      time.Duration `koanf:"merge-after"`
	MetaMembers     int           `koanf:"meta-members"`
	RootAccessKey   string        `koanf:"root-access-key"`
	RootSecretKey   string        `koanf:"root-secret-key"`
	S3Region        string        `koanf:"s3-region"`
	S3Domain        []string      `koanf:"s3-domain"`
	MultipartExpiry time.Duration `koanf:"multipart-expiry"`
	TLSCert         string        `koanf:"tls-cert"`
	TLSKey          string        `koanf:"tls-key"`
	IdleTimeout     time.Duration `koanf:"idle-timeout"`
	MaxConnections  int           `koanf:"max-connections"`
	Pprof           bool          `koanf:"pprof"`
	SQLPort         int           `koanf:"sql-port"`
	SQLListen       string        `koanf:"sql-listen"`
	LogLevel        string        `koanf:"log-level"`
}

// RegisterServerFlags adds the server's flags, with their defaults, to fs.
func RegisterServerFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "config file (YAML; keys are the flag names)")
	fs.String("data-dir", "cairn-data", "directory holding all of the node's data")
	fs.String("listen", "127.0.0.1", "address the listeners bind to (0.0.0.0 for all interfaces)")
	fs.Int("port", node.DefaultNativePort, "native protocol port")
	fs.Int("http-port", node.DefaultHTTPPort, "HTTP port (the S3 API, /healthz, /metrics)")
	fs.Int("meta-port", cluster.DefaultMetaPort, "meta service (embedded etcd) peer port")
	fs.Int("peer-port", cluster.DefaultPeerPort, "node-to-node (gRPC) port")
	fs.String("advertise", "", "host other nodes and clients reach this node at (default: the listen address)")
	fs.String("zone", "default", "failure domain of this node; replicas are spread across zones")
	fs.String("join", "", "peer address (HOST:PORT) of any node of a cluster to join, with --token; used when the data directory is new")
	fs.String("token", "", "with --join: the join token that admits this node (cairn cluster token create); without --join, at a new cluster's first start: a token any number of nodes may join with until --token-ttl (prefer CAIRN_TOKEN: flags show in the process list)")
	fs.Duration("token-ttl", time.Hour, "how long a bootstrap --token (one given to a new cluster's first node) admits nodes")
	fs.Int("meta-client-port", cluster.DefaultMetaClient, "meta service (embedded etcd) client port")
	fs.Int("inline-threshold", 64<<10, "bodies up to this many bytes are stored inside the version record")
	fs.Int("ranges", 4, "number of ranges a new space starts with")
	fs.Int64("record-cache", 64<<20, "bytes of memory for the latest-version record cache (-1 disables it)")
	fs.Int64("chunk-cache", 0, "bytes of memory for the cache of chunks read and verified (0: an eighth of the machine's memory; -1 disables it)")
	fs.Duration("down-after", 5*time.Minute, "how long a node that stopped heartbeating stays suspect before it is down and its data is copied elsewhere")
	fs.Int("min-copies", 0, "fewest durable copies of a chunk a write may be acknowledged with; fewer nodes to hold them fail the write (0: 2 when a space keeps 2+ copies and the cluster has 2+ nodes, else 1)")
	fs.Int64("repair-rate", 64<<20, "bytes per second this node copies to restore other nodes' lost copies (-1: no limit)")
	fs.Duration("gc-grace", time.Hour, "how long a chunk no version references stays on disk before the collector deletes it (an upload must finish within it)")
	fs.Duration("gc-interval", 10*time.Minute, "how often each node collects its unreferenced chunks and compacts its segments (-1: never)")
	fs.Duration("watch-retention", 24*time.Hour, "how long each range keeps its committed changes for watches; a watch further behind starts again (-1: forever)")
	fs.Duration("rebalance-after", 10*time.Second, "how long every node must have been up before range replicas and leases move to balance the cluster")
	fs.Int64("split-size", 64<<20, "bytes on disk above which a range splits in two (-1: never)")
	fs.Int("split-load", 2500, "requests per second above which (for 5s) a range splits at its median key (-1: never)")
	fs.Int64("merge-size", 16<<20, "two neighbouring ranges smaller than this many bytes together merge once both are quiet (at most a quarter of --split-size; -1: never)")
	fs.Duration("merge-after", time.Minute, "how long both ranges must have served under a quarter of --split-load before they merge")
	fs.Int("meta-members", 5, "most embedded etcd members of the meta service (1, 3, 5 or 7; further nodes are its clients); the same on every node")
	fs.String("root-access-key", "", "S3 root access key (with --root-secret-key; default: the cluster's saved key, made and shown once at its first start)")
	fs.String("root-secret-key", "", "S3 root secret key (prefer CAIRN_ROOT_SECRET_KEY: flags show in the process list)")
	fs.String("s3-region", "us-east-1", "region the S3 API reports to clients")
	fs.StringSlice("s3-domain", nil, "host name under which S3 clients may name buckets virtual-host style (BUCKET.DOMAIN); repeatable")
	fs.Duration("multipart-expiry", 24*time.Hour, "how long an S3 multipart upload may stay incomplete before it is aborted and its parts removed")
	fs.String("tls-cert", "", "PEM certificate (chain) file: the HTTP port (S3, /healthz, /metrics) serves HTTPS (with --tls-key)")
	fs.String("tls-key", "", "PEM private key file of --tls-cert")
	fs.Duration("idle-timeout", 60*time.Second, "connections without progress this long are closed: a stalled HTTP body or native frame, an idle keep-alive or native connection, a client that takes no answer")
	fs.Int("max-connections", 4096, "most native protocol connections open at once; more are refused with a clear error")
	fs.Int("sql-port", 0, "serve the spaces read-only over the MySQL protocol on this port (mariadb/mysql clients; users are access keys); 0: off")
	fs.String("sql-listen", "127.0.0.1", "address the SQL port binds to (loopback by default, whatever --listen says)")
	fs.Bool("pprof", false, "serve Go's profiles at /debug/pprof/ on the HTTP port to anyone who reaches it (cluster admins' signed requests get them at /_cairn/debug/pprof/ always)")
	fs.String("log-level", "info", "log level: debug, info, warn, error")
}

var serverKeys = []string{"data-dir", "listen", "port", "http-port", "meta-port", "peer-port", "meta-client-port", "advertise", "zone", "join", "token", "token-ttl", "inline-threshold", "ranges", "record-cache", "chunk-cache", "down-after", "min-copies", "repair-rate", "gc-grace", "gc-interval", "watch-retention", "rebalance-after", "split-size", "split-load", "merge-size", "merge-after", "meta-members", "root-access-key", "root-secret-key", "s3-region", "s3-domain", "multipart-expiry", "tls-cert", "tls-key", "idle-timeout", "max-connections", "pprof", "sql-port", "sql-listen", "log-level"}

// LoadServer merges the config file (from --config or CAIRN_CONFIG), the
// CAIRN_* environment (environ, e.g. os.Environ) and the flags of fs.
func LoadServer(fs *pflag.FlagSet, environ func() []string) (Server, error) {
	k := koanf.New(".")
	known := map[string]bool{}
	for _, key := range serverKeys {
		known[key] = true
	}
	envKey := func(name string) (string, bool) {
		if !strings.HasPrefix(name, "CAIRN_") {
			return "", false
		}
		key := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "CAIRN_")), "_", "-")
		return key, known[key]
	}
	path, _ := fs.GetString("config")
	if !fs.Changed("config") {
		for _, kv := range environ() {
			if v, ok := strings.CutPrefix(kv, "CAIRN_CONFIG="); ok {
				path = v
			}
		}
	}
	if path != "" {
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Server{}, fmt.Errorf("config file %s: %w", path, err)
		}
		var unknown []string
		for _, key := range k.Keys() {
			if !known[key] {
				unknown = append(unknown, key)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return Server{}, fmt.Errorf("config file %s: unknown keys %s (known: %s)", path, strings.Join(unknown, ", "), strings.Join(serverKeys, ", "))
		}
	}
	err := k.Load(env.Provider(".", env.Opt{
		Prefix:      "CAIRN_",
		EnvironFunc: environ,
		TransformFunc: func(name, v string) (string, any) {
			key, ok := envKey(name)
			if !ok {
				return "", nil
			}
			return key, v
		},
	}), nil)
	if err != nil {
		return Server{}, err
	}
	if err := k.Load(posflag.Provider(fs, ".", k), nil); err != nil {
		return Server{}, err
	}
	var s Server
	if err := k.UnmarshalWithConf("", &s, koanf.UnmarshalConf{Tag: "koanf", FlatPaths: true}); err != nil {
		return Server{}, fmt.Errorf("configuration: %w", err)
	}
	return s, nil
}

// NodeConfig turns s into the node's options, with a logger writing to stderr.
func (s Server) NodeConfig() (node.Config, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(s.LogLevel)); err != nil {
		return node.Config{}, fmt.Errorf("log-level %q: use debug, info, warn or error", s.LogLevel)
	}
	if s.DataDir == "" {
		return node.Config{}, errors.New("data-dir is empty")
	}
	var joinToken, bootstrap string
	if s.Join != "" {
		joinToken = s.Token
	} else {
		bootstrap = s.Token
	}
	return node.Config{
		Config: cluster.Config{
			JoinToken:          joinToken,
			BootstrapToken:     bootstrap,
			BootstrapTokenTTL:  s.TokenTTL,
			DataDir:            s.DataDir,
			Listen:             s.Listen,
			MetaPort:           s.MetaPort,
			PeerPort:           s.PeerPort,
			Advertise:          s.Advertise,
			Zone:               s.Zone,
			Join:               s.Join,
			MetaClientPort:     s.MetaClientPort,
			InlineThreshold:    s.InlineThreshold,
			DefaultRanges:      s.Ranges,
			RecordCache:        s.RecordCache,
			ChunkCache:         s.ChunkCache,
			PopulateChunkCache: true, // a server's cache memory is faulted in while it idles
			DownAfter:          s.DownAfter,
			RepairRate:         s.RepairRate,
			GCGrace:            s.GCGrace,
			GCInterval:         s.GCInterval,
			WatchRetention:     s.WatchRetention,
			MinCopies:          s.MinCopies,
			RebalanceAfter:     s.RebalanceAfter,
			SplitSize:          s.SplitSize,
			SplitLoad:          s.SplitLoad,
			MergeSize:          s.MergeSize,
			MergeAfter:         s.MergeAfter,
			MetaMembers:        s.MetaMembers,
			RootAccessKey:      s.RootAccessKey,
			RootSecretKey:      s.RootSecretKey,
			Logger:             slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})),
		},
		NativePort:      s.Port,
		HTTPPort:        s.HTTPPort,
		S3Region:        s.S3Region,
		S3Domains:       s.S3Domain,
		MultipartExpiry: s.MultipartExpiry,
		TLSCertFile:     s.TLSCert,
		TLSKeyFile:      s.TLSKey,
		IdleTimeout:     s.IdleTimeout,
		MaxConnections:  s.MaxConnections,
		Pprof:           s.Pprof,
		SQLPort:         s.SQLPort,
		SQLListen:       s.SQLListen,
	}, nil
}
