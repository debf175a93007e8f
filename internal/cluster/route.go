package cluster

import (
	"context"
	"time"

	"github.com/cairn-db/cairn/internal/rangeclient"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
)

// Any node serves any request. The body of a write goes to the chunk
// nodes from whichever node took the request; only the range's part of an
// operation (proposing a command, reading version records, listing) must
// run on the range's leaseholder, and the range client
// (internal/rangeclient) takes it there. The wrappers below map its
// classed failures to the object service's kinds.

// newRangeClient builds the range client over the node's replicas, state
// and peers; the node's identity must be known.
func (n *Node) newRangeClient() *rangeclient.Client {
	return rangeclient.New(rangeclient.Config{
		Self:     n.id.NodeID,
		Replicas: n.ranges,
		DB:       n.eng.DB(),
		Cache:    n.cache,
		Call: func(ctx context.Context, id uint64, method string, req []byte, timeout time.Duration) ([]byte, error) {
			return n.callNode(ctx, id, rangeclient.Service, method, req, timeout)
		},
		Entry:      n.rangeEntry,
		Stale:      n.kickSync,
		Forwarded:  n.cfg.Forwarded,
		Timestamps: n.tso.Next,
		Codes:      n.cfg.PeerCodes,
		Clock:      n.cfg.Clock,
		Metrics: rangeclient.Metrics{Forwards: n.metrics.forwards, CacheHits: n.metrics.cacheHits,
			CacheMisses: n.metrics.cacheMiss, Corrupt: n.metrics.corrupt},
	})
}

// rangeEntry is the table entry of range id, with local replica rep, that
// a request from a peer is served on (so that it counts towards the
// range's load); a replica the table does not show yet gets one.
func (n *Node) rangeEntry(id uint64, rep *replica.Replica) *rng {
	if _, r := n.tableEntry(id); r != nil && r.Replica() == rep {
		return r
	}
	return newRng(rangedesc.Range{ID: id}, rep)
}
