// Package kv is the state machine of a range: the commands a range's Raft
// log carries, their deterministic application over package mvcc, and the
// local reads a leaseholder serves.
//
// A command is evaluated at apply time, on every replica, in log order: the
// proposer sends what it wants ("write this version of this key if the
// latest version is still V") and the apply step reads the range's state,
// checks the conditions, and writes. So replicas never diverge, and a
// condition checked at apply time cannot race with another write.
//
// # Command format (inside a Raft entry)
//
//	+--------+---------+-------------------------------------------+
//	| op u8  | ver u8  | op-specific fields (uvarint-length bytes) |
//	+--------+---------+-------------------------------------------+
//
//	opPut:           obj, version, record (mvcc encoding), retention, ifMatch u64, flags u8
//	opDeleteVersion: obj, version u64
//	opSetTags:       obj, version u64, count u64, count x (key, value), keys in order
//
// The result handed back to the proposer is a *Result or an error.
package kv
