package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Node states in the cluster map.
const (
	NodeUp       = "up"       // heartbeating
	NodeSuspect  = "suspect"  // missed heartbeats
	NodeDown     = "down"     // gone past the down timeout
	NodeDraining = "draining" // being emptied before it leaves
	NodeRemoved  = "removed"  // left the cluster for good; may not come back
)

// NodeInfo is one node's entry in the cluster map.
type NodeInfo struct {
	ID uint64
	// Native, Peer and HTTP are the node's advertised addresses
	// (host:port): client protocol, node-to-node gRPC, HTTP/S3.
	Native, Peer, HTTP string
	// MetaPeerURL is its embedded etcd member's peer URL.
	MetaPeerURL string
	// Zone is the failure domain replicas are spread over.
	Zone string
	// Capacity is the disk space of its data directory in bytes (0 unknown).
	Capacity uint64
	// State is one of the Node* constants.
	State string
	// Started is when the node last started.
	Started time.Time
	// Since is when State last changed.
	Since time.Time
}

type nodeRecord struct {
	V           int       `json:"v"`
	ID          uint64    `json:"id,string"`
	Native      string    `json:"native"`
	Peer        string    `json:"peer"`
	HTTP        string    `json:"http"`
	MetaPeerURL string    `json:"meta_peer_url"`
	Zone        string    `json:"zone"`
	Capacity    uint64    `json:"capacity,string"`
	State       string    `json:"state"`
	Started     time.Time `json:"started"`
	Since       time.Time `json:"since"`
}

func nodeKey(id uint64) string { return fmt.Sprintf("%s%016x", keyNodePrefix, id) }

// AllocNodeID hands out a new node id (the first node of a cluster is 1:
// the counter starts there).
func (c *Catalog) AllocNodeID(ctx context.Context) (uint64, error) {
	return c.allocIDs(ctx, keyNodeCounter, 1, 1<<62)
}

// ErrNodeRemoved is returned by RegisterNode for a node removed from the
// cluster: it may not come back under its old id.
var ErrNodeRemoved = errors.New("meta: node was removed from the cluster")

// RegisterNode writes (creates or replaces) n's entry in the cluster map.
// A node that is draining stays draining; a removed node gets
// ErrNodeRemoved.
func (c *Catalog) RegisterNode(ctx context.Context, n NodeInfo) error {
	if n.ID == 0 {
		return errors.New("meta: node id 0 is reserved")
	}
	if n.State == "" {
		n.State = NodeUp
	}
	if n.Since.IsZero() {
		n.Since = n.Started
	}
	// A write whose outcome is unknown is tried again from the read: if
	// it applied, the read finds it and the write repeats it.
	deadline := time.Now().Add(counterRetry)
	for {
		rev := int64(0)
		kv, err := c.store.Get(ctx, nodeKey(n.ID))
		if err == nil {
			old, err := decodeNode(kv)
			if err != nil {
				return err
			}
			switch old.State {
			case NodeRemoved:
				return fmt.Errorf("%w: node %d", ErrNodeRemoved, n.ID)
			case NodeDraining:
				n.State, n.Since = old.State, old.Since
			}
			rev = kv.Rev
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		_, err = c.store.Put(ctx, nodeKey(n.ID), encodeNode(n), rev)
		if retry, werr := againAfterUnknown(ctx, err, deadline); retry {
			continue
		} else if werr != nil {
			return werr
		}
		if !errors.Is(err, ErrConflict) {
			return err
		}
	}
}

func encodeNode(n NodeInfo) []byte {
	b, _ := json.Marshal(nodeRecord{V: formatVersionOne, ID: n.ID, Native: n.Native, Peer: n.Peer, HTTP: n.HTTP,
		MetaPeerURL: n.MetaPeerURL, Zone: n.Zone, Capacity: n.Capacity, State: n.State, Started: n.Started.UTC(),
		Since: n.Since.UTC()})
	return b
}

func decodeNode(kv KV) (NodeInfo, error) {
	var r nodeRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return NodeInfo{}, fmt.Errorf("meta: decode %s: %w", kv.Key, err)
	}
	if r.V != formatVersionOne {
		return NodeInfo{}, fmt.Errorf("meta: %s has format version %d, want %d", kv.Key, r.V, formatVersionOne)
	}
	return NodeInfo{ID: r.ID, Native: r.Native, Peer: r.Peer, HTTP: r.HTTP, MetaPeerURL: r.MetaPeerURL,
		Zone: r.Zone, Capacity: r.Capacity, State: r.State, Started: r.Started, Since: r.Since}, nil
}

// SetNodeState moves node id from state from to state to, as of at. It
// reports false (and changes nothing) if the node is not in state from,
// so that concurrent observers agree on one transition.
func (c *Catalog) SetNodeState(ctx context.Context, id uint64, from, to string, at time.Time) (bool, error) {
	kv, err := c.store.Get(ctx, nodeKey(id))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	n, err := decodeNode(kv)
	if err != nil || n.State != from {
		return false, err
	}
	n.State, n.Since = to, at
	_, err = c.store.Put(ctx, kv.Key, encodeNode(n), kv.Rev)
	if errors.Is(err, ErrConflict) {
		return false, nil
	}
	return err == nil, err
}

// HeartbeatName is the leadership (see Store.Campaign) node id holds while
// it is alive: its lease is the node's heartbeat.
func HeartbeatName(id uint64) string { return fmt.Sprintf("node/%016x", id) }

// LiveNodes returns the ids of the nodes whose heartbeat lease is held.
func (c *Catalog) LiveNodes(ctx context.Context) (map[uint64]bool, error) {
	prefix := leaderKey("node/")
	kvs, err := c.store.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	live := make(map[uint64]bool, len(kvs))
	for _, kv := range kvs {
		var id uint64
		if _, err := fmt.Sscanf(kv.Key[len(prefix):], "%016x", &id); err == nil {
			live[id] = true
		}
	}
	return live, nil
}

// NextState is the state a node in state cur moves to, given whether its
// heartbeat is held and when it entered cur. A node that heartbeats is up
// (a draining one stays draining); one that does not is suspect once it has
// been up for grace (a node registers before its first heartbeat lands),
// and down after downAfter as suspect.
func NextState(cur string, alive bool, since, now time.Time, grace, downAfter time.Duration) string {
	switch {
	case cur == NodeDraining || cur == NodeRemoved:
		return cur
	case alive:
		return NodeUp
	case cur == NodeUp && now.Sub(since) >= grace:
		return NodeSuspect
	case cur == NodeSuspect && now.Sub(since) >= downAfter:
		return NodeDown
	}
	return cur
}

// Nodes returns the cluster map's nodes in id order.
func (c *Catalog) Nodes(ctx context.Context) ([]NodeInfo, error) {
	kvs, err := c.store.List(ctx, keyNodePrefix)
	if err != nil {
		return nil, err
	}
	nodes := make([]NodeInfo, 0, len(kvs))
	for _, kv := range kvs {
		n, err := decodeNode(kv)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodes, nil
}

// ReserveNodeID raises the node id counter to at least id, so that AllocNodeID
// never hands out an id already taken (the first node takes id 1 itself).
func (c *Catalog) ReserveNodeID(ctx context.Context, id uint64) error {
	_, err := c.updateCounter(ctx, keyNodeCounter, func(last uint64) (uint64, error) { return max(last, id), nil })
	return err
}

// MapEpoch returns the meta service revision of the newest entry of the
// cluster map or the range table (0 when both are empty). It increases with
// every write to either; deleting range entries (a deleted space) can lower
// it, so a copy is stale when its epoch differs.
func (c *Catalog) MapEpoch(ctx context.Context) (int64, error) {
	var epoch int64
	for _, prefix := range []string{keyNodePrefix, keyRangePrefix} {
		kvs, err := c.store.List(ctx, prefix)
		if err != nil {
			return 0, err
		}
		for _, kv := range kvs {
			epoch = max(epoch, kv.Rev)
		}
	}
	return epoch, nil
}
