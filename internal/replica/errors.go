package replica

import "errors"

// Sentinel errors. Test them with errors.Is; they may be wrapped with context.
var (
	// ErrNotLeader is returned by Propose when this replica is not the leader
	// of its range, or when raft dropped the proposal (leadership changed
	// before the command was appended, or the entry it was appended as was
	// overwritten by another leader's). The command was not and will not be
	// applied; it is safe to retry on the leader. ReadReady returns it (wrapped)
	// when the replica may not serve a linearizable read.
	ErrNotLeader = errors.New("replica: not the leader")
	// ErrClosed is returned by operations on a Store that was closed, and to
	// proposers still waiting when it closes (their command may still apply).
	ErrClosed = errors.New("replica: store closed")
	// ErrRangeNotFound is returned by Store.Step for a message to a range
	// that has no replica on this node.
	ErrRangeNotFound = errors.New("replica: range not found")
	// ErrReplicaExists is returned by AddReplica for a range that already
	// has a replica on this Store.
	ErrReplicaExists = errors.New("replica: replica already exists")
	// ErrSnapshotUnsupported is returned by Store.Step for a raft snapshot
	// message: snapshots carry SSTs and arrive through ReceiveSnapshot.
	ErrSnapshotUnsupported = errors.New("replica: snapshots are not taken through Step (use ReceiveSnapshot)")
	// ErrInboxFull is returned by Store.Step when inbound messages arrive
	// faster than the loop consumes them; the message is dropped (raft
	// retransmits).
	ErrInboxFull = errors.New("replica: inbound message queue full")
	// ErrConfChangeRefused is returned by ChangeReplicas when the change is
	// invalid for the current configuration (e.g. it removes every voter)
	// or raft refused it (another change is pending, or the group is in a
	// joint configuration that must be left first). Nothing was changed.
	ErrConfChangeRefused = errors.New("replica: membership change refused")
	// ErrCorrupt is returned when persisted replica state fails its checksum
	// or does not decode. It is a corruption-class error: do not retry.
	ErrCorrupt = errors.New("replica: corrupt persisted state")
)
