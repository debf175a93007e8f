// Package cluster is this node's part in a Cairn cluster: it opens the
// disk (storage), the meta service (meta), the data plane (segment) and
// the range replicas (replica, with kv as their state machine); it joins
// or founds the cluster (join, security material, access keys); it keeps
// the spaces and their range tables, and builds the object service
// (object.Store) over them; and its background work, started by Start and
// ended by Stop, keeps the cluster whole: heartbeats and health, the meta
// service's membership, the oracle's placement, range table sync, splits,
// merges, replica repair and rebalancing, chunk repair, drain and remove.
// The node package serves the native protocol and HTTP over it.
//
// A write travels:
//
//	body -> inline bytes, or chunker -> segment (group-committed, fsync'd)
//	     -> TSO timestamp -> kv.PutCmd proposed to the range's Raft group
//	     -> raft log fsync (group commit) -> apply to pebble -> ack
//
// A read asks the range's replica whether it may serve locally (leader with a
// valid lease), reads the version record from pebble, and streams inline
// bytes or verified chunks from the segment store.
package cluster
