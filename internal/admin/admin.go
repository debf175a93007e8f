// Package admin is the contract of the cluster's administration: access
// keys, join tokens, membership, routes and the cluster report, as the
// protocols serve them. The native protocol (wire) carries these types;
// the node implements the interfaces.
package admin

import (
	"context"
	"time"
)

// ClusterService is implemented by a Service that reports the state of its
// cluster (the native protocol's CLUSTER op). The report is a JSON document whose fields
// docs/protocol.md describes; a Service without it answers CodeUnknownOp.
type ClusterService interface {
	ClusterStatus(ctx context.Context) ([]byte, error)
}

// NodeAction is what a NODE request asks of a node of the cluster.
type NodeAction uint8

const (
	// NodeDrain marks the node draining: its range replicas, leases and
	// chunk copies move to other nodes.
	NodeDrain NodeAction = 1
	// NodeRemove takes a drained (or down) node out of the cluster for
	// good, with its meta service member. It fails with CodeNotDrained
	// while the node still holds data other nodes lack.
	NodeRemove NodeAction = 2
	// NodeUndrain takes a draining node back: it may hold new chunks and
	// range replicas again (what already moved off it stays where it is
	// until the rebalancer moves it).
	NodeUndrain NodeAction = 3
)

// NodeService is implemented by a Service that can change the cluster's
// membership (the NODE op); a Service without it answers CodeUnknownOp.
type NodeService interface {
	NodeAdmin(ctx context.Context, action NodeAction, nodeID uint64) error
}

// ClusterKeyRotation is the answer to KeyRotateCluster.
type ClusterKeyRotation struct {
	KeyID    uint32 `json:"key_id"`   // the cluster key that seals from now on
	Nodes    int    `json:"nodes"`    // the nodes that hold it
	Resealed int    `json:"resealed"` // the secrets sealed again under it
}

// KeyRotator is implemented by a KeyService that can rotate the root key
// and the cluster key; without it those KEYS actions answer CodeUnknownOp.
type KeyRotator interface {
	RotateRootKey(ctx context.Context) (KeySpec, error)
	RotateClusterKey(ctx context.Context) (ClusterKeyRotation, error)
}

// KeySpec is an access key as the KEYS op carries it (JSON).
type KeySpec struct {
	Access string `json:"access"`
	Secret string `json:"secret,omitempty"`
	// Grants are permissions ("read", "write", "admin") by space name;
	// "*" names every space.
	Grants map[string]string `json:"grants"`
	// ClusterAdmin allows managing keys, join tokens and nodes.
	ClusterAdmin bool  `json:"cluster_admin,omitempty"`
	Created      int64 `json:"created,omitempty"` // Unix nanoseconds
}

// KeyService is implemented by a Service that manages S3 access keys (the
// KEYS op); a Service without it answers CodeUnknownOp.
type KeyService interface {
	// CreateKey saves a new key; an empty Access or Secret is made up.
	CreateKey(ctx context.Context, k KeySpec) (KeySpec, error)
	ListKeys(ctx context.Context) ([]KeySpec, error)
	DeleteKey(ctx context.Context, access string) error
}

// KMSKeySpec is a key of the cluster's KMS as the KEYS op carries it
// (JSON): its id, never its material.
type KMSKeySpec struct {
	ID      string `json:"id"`
	Created int64  `json:"created,omitempty"` // Unix nanoseconds
}

// KMSService is implemented by a Service that keeps the keys S3's
// SSE-KMS encrypts under (the KEYS op's KMS actions); a Service without
// it answers CodeUnknownOp.
type KMSService interface {
	// CreateKMSKey makes a key with fresh random material under id.
	CreateKMSKey(ctx context.Context, id string) (KMSKeySpec, error)
	ListKMSKeys(ctx context.Context) ([]KMSKeySpec, error)
}

// TokenSpec is a join token as the TOKENS op carries it (JSON).
type TokenSpec struct {
	// Token is the whole token (id and secret), set only in the answer
	// to create.
	Token string `json:"token,omitempty"`
	ID    string `json:"id,omitempty"`
	// TTLSeconds is how long the token is valid (create; 0: one hour).
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
	// Uses is how many nodes may join with it (create; 0: one).
	Uses    int   `json:"uses,omitempty"`
	Expires int64 `json:"expires,omitempty"` // Unix nanoseconds
	Created int64 `json:"created,omitempty"` // Unix nanoseconds
}

// TokenService is implemented by a Service that manages join tokens (the
// TOKENS op); a Service without it answers CodeUnknownOp.
type TokenService interface {
	CreateToken(ctx context.Context, t TokenSpec) (TokenSpec, error)
	ListTokens(ctx context.Context) ([]TokenSpec, error)
	RevokeToken(ctx context.Context, id string) error
}

// RouteTable is a space's ranges with the node holding each one's lease:
// the answer to ROUTES, which lets a client send a keyed request straight
// to the node that serves it.
type RouteTable struct {
	// Space is the space's id. A key's position among the ranges is its
	// object key, internal/keys.Object(Space, nil, key); Start and End are
	// object keys too.
	Space uint32
	// Routes are the ranges, sorted by Start, together covering the space.
	Routes []Route
}

// Route is one range of a RouteTable.
type Route struct {
	Range uint64
	Epoch uint64 // the range descriptor's epoch
	// Start and End bound the range's object keys, [Start, End); a nil End
	// is the end of the space.
	Start, End []byte
	// Leaseholder is the native address of the node holding the lease as
	// far as the answering node knows; empty when it does not know.
	Leaseholder string
	// Replicas are the native addresses of the range's voters.
	Replicas []string
}

// RouteService is implemented by a Service that can tell where a space's
// ranges are served (the ROUTES op); a Service without it answers
// CodeUnknownOp, and a client then sends every request to any node.
type RouteService interface {
	Routes(ctx context.Context, space string) (RouteTable, error)
}

// ClusterReport is the CLUSTER op's answer, encoded as JSON.
type ClusterReport struct {
	Cluster string `json:"cluster"` // the cluster's id
	// Epoch is the meta service revision of the newest entry of the
	// cluster map or the range table: it grows with every write to them,
	// but deleting a space's ranges can lower it, so it tells a copy is
	// stale by differing, not by being smaller.
	Epoch int64  `json:"epoch"`
	Node  uint64 `json:"node"` // the node that answered
	// Oracle is the node leading the timestamp oracle (0: none right now).
	Oracle uint64          `json:"oracle"`
	Nodes  []ClusterNode   `json:"nodes"`
	Meta   []ClusterMember `json:"meta"`
	// Ranges lists every range with its replicas; Leader is known for the
	// ranges the answering node holds a replica of (0 otherwise).
	Ranges []ClusterRange `json:"ranges"`
	// GC is each node's chunk collector, as the node last reported it.
	GC []GCNode `json:"gc,omitempty"`
}

// GCNode is one node's chunk collector: its settings, the current or last
// collection, and totals since the node started.
type GCNode struct {
	Node     uint64 `json:"node"`
	Grace    string `json:"grace,omitempty"`    // a chunk unreferenced this long goes
	Interval string `json:"interval,omitempty"` // between collections ("" : only on request)
	// Phase is idle, pruning (versions by their space's retention),
	// marking (asking the ranges which chunks they reference), sweeping
	// (deleting the others) or compacting.
	Phase string `json:"phase,omitempty"`
	// Started, Finished and Cutoff are the current or last collection's:
	// only chunks untouched since Cutoff (Started less Grace) may go.
	Started  time.Time `json:"started,omitempty"`
	Finished time.Time `json:"finished,omitempty"`
	Cutoff   time.Time `json:"cutoff,omitempty"`
	// SafePoint is the time the last collection pruned versions at: a
	// version a newer one replaced after it stays, whatever the
	// retention, for the open transactions that may read it.
	// SafePointBy says what held it ("now", "a transaction on node N"),
	// or why it was unknown (nothing was pruned). Spaces with snapshots
	// or branches prune nothing.
	SafePoint   time.Time `json:"safe_point,omitempty"`
	SafePointBy string    `json:"safe_point_by,omitempty"`
	// Examined chunks were old enough to be candidates; Garbage of them
	// no range referenced; RangesRead counts the ranges asked.
	Examined   int `json:"examined"`
	Garbage    int `json:"garbage"`
	RangesRead int `json:"ranges_read"`
	// Totals since the node started. PrunedVersions are versions removed
	// by their space's retention from keys not written again.
	Runs              int64 `json:"runs"`
	PrunedVersions    int64 `json:"pruned_versions"`
	DeletedChunks     int64 `json:"deleted_chunks"`
	DeletedBytes      int64 `json:"deleted_bytes"`
	CompactedSegments int64 `json:"compacted_segments"`
	MovedBytes        int64 `json:"moved_bytes"`
	ReclaimedBytes    int64 `json:"reclaimed_bytes"`
	// The segment files now, and as of the last collection the bytes
	// live chunks take and the bytes compaction could still give back.
	Segments     int   `json:"segments"`
	SegmentBytes int64 `json:"segment_bytes"`
	LiveBytes    int64 `json:"live_bytes"`
	Reclaimable  int64 `json:"reclaimable_bytes"`
	// Error is why the last collection stopped, or why the node did not
	// answer.
	Error string `json:"error,omitempty"`
}

// ClusterNode is one node of the cluster map.
type ClusterNode struct {
	ID       uint64    `json:"id"`
	Native   string    `json:"native"`
	Peer     string    `json:"peer"`
	HTTP     string    `json:"http"`
	Zone     string    `json:"zone"`
	State    string    `json:"state"`
	Capacity uint64    `json:"capacity"`
	Started  time.Time `json:"started"`
	// Replicas and Leaders count the ranges the node holds and leads (as
	// far as the answering node knows).
	Replicas int `json:"replicas"`
	Leaders  int `json:"leaders"`
}

// ClusterMember is one member of the meta service.
type ClusterMember struct {
	Name    string `json:"name"`
	Voter   bool   `json:"voter"`
	PeerURL string `json:"peer_url"`
}

// ClusterRange is one range of the range table.
type ClusterRange struct {
	ID       uint64   `json:"id"`
	Space    string   `json:"space"`
	Start    []byte   `json:"start"`
	End      []byte   `json:"end"`
	Replicas []uint64 `json:"replicas"`
	Learners []uint64 `json:"learners,omitempty"`
	Leader   uint64   `json:"leader"`
	Epoch    uint64   `json:"epoch"`
}
