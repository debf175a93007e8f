// Package node is the composition root of a Cairn node: it opens the disk
// (storage), the meta service (meta), the data plane (segment), the range
// replicas (replica, with kv as their state machine), and serves the native
// protocol (wire) and HTTP (/healthz, /metrics) on top of them.
//
// The node implements wire.Service. A write travels:
//
//	body -> inline bytes, or chunker -> segment (group-committed, fsync'd)
//	     -> TSO timestamp -> kv.PutCmd proposed to the range's Raft group
//	     -> raft log fsync (group commit) -> apply to pebble -> ack
//
// A read asks the range's replica whether it may serve locally (leader with a
// valid lease), reads the version record from pebble, and streams inline
// bytes or verified chunks from the segment store.
package node
