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
}

func nodeKey(id uint64) string { return fmt.Sprintf("%s%016x", keyNodePrefix, id) }

// AllocNodeID hands out a new node id (the first node of a cluster is 1:
// the counter starts there).
func (c *Catalog) AllocNodeID(ctx context.Context) (uint64, error) {
	return c.allocIDs(ctx, keyNodeCounter, 1, 1<<62)
}

// RegisterNode writes (creates or replaces) n's entry in the cluster map.
func (c *Catalog) RegisterNode(ctx context.Context, n NodeInfo) error {
	if n.ID == 0 {
		return errors.New("meta: node id 0 is reserved")
	}
	if n.State == "" {
		n.State = NodeUp
	}
	b, _ := json.Marshal(nodeRecord{V: formatVersionOne, ID: n.ID, Native: n.Native, Peer: n.Peer, HTTP: n.HTTP,
		MetaPeerURL: n.MetaPeerURL, Zone: n.Zone, Capacity: n.Capacity, State: n.State, Started: n.Started.UTC()})
	_, err := c.store.Put(ctx, nodeKey(n.ID), b, AnyRev)
	return err
}

// Nodes returns the cluster map's nodes in id order.
func (c *Catalog) Nodes(ctx context.Context) ([]NodeInfo, error) {
	kvs, err := c.store.List(ctx, keyNodePrefix)
	if err != nil {
		return nil, err
	}
	nodes := make([]NodeInfo, 0, len(kvs))
	for _, kv := range kvs {
		var r nodeRecord
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("meta: decode %s: %w", kv.Key, err)
		}
		if r.V != formatVersionOne {
			return nil, fmt.Errorf("meta: %s has format version %d, want %d", kv.Key, r.V, formatVersionOne)
		}
		nodes = append(nodes, NodeInfo{ID: r.ID, Native: r.Native, Peer: r.Peer, HTTP: r.HTTP, MetaPeerURL: r.MetaPeerURL,
			Zone: r.Zone, Capacity: r.Capacity, State: r.State, Started: r.Started})
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

// MapEpoch returns the meta service revision of the newest change to the
// cluster map or the range table (0 when both are empty). It increases with
// every change to either, so clients can tell a stale copy.
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
