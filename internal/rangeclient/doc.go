// Package rangeclient routes the range part of every object operation
// (proposing a command, reading version records, listing a span) to the
// leaseholder of the range that owns the key: here when this node holds
// the lease, else over the peer service cairn.Range to the node that does.
//
// It keeps each open space's range table (Table, Range), finds the
// leaseholder (the local replica's raft leader, the node last found holding
// the lease, then the range's other replicas), forwards, and retries while
// a range splits, merges or changes leader. Its failures are classed by
// the sentinel errors in errors.go; the object service maps them to its
// own kinds.
//
// The serving half answers cairn.Range calls from other nodes: a request
// is served only while the local replica holds the range's lease (reads)
// or raft takes it (proposals), and only for keys the replica still holds
// (else ErrRangeMoved, with nothing done).
package rangeclient
