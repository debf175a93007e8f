// Package replica runs a node's range replicas: each range is a Raft group
// driven through go.etcd.io/raft/v3's RawNode, and every group of the node
// keeps its state in the node's state store and its log entries in the
// raft log's own pebble instance beside it (storage.Engine.LogDB).
//
// # The loop
//
// A Store owns one goroutine that drives every replica of the node, and a
// writer goroutine that commits log batches for it (persist.go: raft's
// asynchronous storage writes). Propose and Step only queue work and wake
// the loop; each cycle of the loop
//
//  1. steps the queued inbound messages, ticks every replica (on the
//     ticker), and hands the queued proposals to raft, each command framed
//     with an 8-byte proposal id;
//  2. collects a Ready from every replica that has one;
//  3. sends every outbound message through the Transport in one call:
//     raft keeps what must wait for the log write (append and vote
//     responses) inside the Ready's MsgStorageAppend;
//  4. queues each MsgStorageAppend (entries and hard state) for the
//     writer. The writer has one job in flight at a time: the entries of
//     ALL queued appends of all replicas in one batch of the log's
//     instance, committed with pebble.Sync if any must sync, then their
//     hard states in one batch of the state store (synced only when a
//     term or vote changed: the commit index needs no sync). This is the group commit: one WAL fsync
//     for many proposers and many ranges, and the loop does not wait for
//     it; what comes meanwhile joins the next batch (BenchmarkPropose: one
//     single-voter range on ext4, ~5,000 ops/s with 1 proposer, 62,000 to
//     75,000 ops/s with 64). When a batch is durable the loop delivers
//     the responses raft attached to its appends (to this node's raft by
//     Step, to others by the Transport);
//  5. applies each replica's committed entries (raft hands them out only
//     once they are durable here) into an indexed batch that also carries
//     the new applied index (and the ConfState after a conf change, and log
//     truncation), committed with pebble.NoSync: the log is durable, so an
//     apply batch lost in a crash is applied again from the log on restart,
//     exactly once because the applied index moves with it; then answers
//     the proposers whose entries applied and steps raft's apply response;
//  6. runs again at once if raft has more.
//
// Whatever else writes or deletes a range's raft state (installing a
// snapshot, a split over an uninitialized replica, a merge, RemoveReplica,
// DropFrozen) first drains the writer (flush), so no queued or in-flight
// write lands after it.
//
// A proposal knows the index and term its entry was appended at; if an
// entry of another leader is applied at that index, or raft drops the
// proposal, the proposer gets ErrNotLeader instead of waiting forever.
// Replicas refuse proposals unless they lead (no forwarding).
//
// Membership changes (Replica.ChangeReplicas) are conf change entries,
// checked against the current configuration before they are proposed,
// applied with RawNode.ApplyConfChange, and persisted as the ConfState in
// the same apply batch. Nothing assumes a single voter. A replica is added
// as a learner on a node where AddReplica started it uninitialized (no
// Peers, no state), catches up by snapshot, and is then promoted, usually
// in one joint change that also removes the replica it replaces.
// TransferLeadership moves leadership off a node before it is removed;
// RemoveReplica deletes a removed replica's state.
//
// # Snapshots
//
// A follower that is new, or behind the leader's truncated log, gets the
// range's state as pebble SSTs, one per span the StateMachine names
// (Spanner): a range deletion of the span and every key in it. The loop
// answers raft's MsgSnap in the send step of a cycle, before that cycle's
// apply, so a pebble snapshot taken there holds exactly the applied state;
// the message's metadata is rewritten to that applied index, its term and
// the ConfState as of it. The SSTs are built from the pebble snapshot into
// files under the engine's directory (never whole in memory) and streamed
// from them off the loop (SnapshotTransport, SnapshotSST); the outcome goes
// back to raft with ReportSnapshot, and the files go.
//
// The receiver (ReceiveSnapshot) writes the SSTs to files under the
// engine's directory, reads them through (block checksums, every key a set
// inside its span), and steps the message with a token naming them. When
// raft takes it, the loop ingests the SSTs together with one more holding
// the range's new raft state (a range deletion of the range's raft keys,
// then hard state, ConfState, applied index and a log truncated at the
// snapshot) in one atomic pebble ingestion, before the Ready's entries are
// persisted. Just before it, the log's entries past the snapshot's index
// are deleted (synced; raft installs a snapshot only where the log does
// not hold its index and term, so they are of another history); those up
// to it go after (a load ignores entries at or below the truncation). A
// crash before the ingestion leaves the old state; the files are removed
// at the next start. The range's key bounds travel as the
// snapshot's Data; a snapshot whose bounds overlap another replica here
// that has state is declined (see split.go).
//
// # Splits
//
// A range splits by an entry in its own log (Replica.Split): at that
// position every replica shrinks its bounds and bootstraps the new range's
// group on the same voters, in the apply batch; no data moves. split.go
// explains how the new range's first leader and the old range's lease
// stay apart, and how a replica behind the split catches up.
//
// # Key layout
//
// Under storage.PrefixRangeLocal, per range:
//
//	0x01 'r' | rangeID (8, BE) | 'a'                 applied index (8)
//	                           | 'b'                 key bounds: Start, End (see encodeBounds)
//	                           | 'c'                 raftpb.ConfState as of the applied index
//	                           | 'h'                 raftpb.HardState
//	                           | 'l' | index (8, BE) raftpb.Entry (in the log's instance)
//	                           | 't'                 truncated state: index (8) | term (8)
//	                           | 'x'                 tombstone: merged into the range named (8)
//
// The entries live in the raft log's own pebble instance, the rest in the
// state store: the state store's memtables, flushes and compactions see
// no entry. Being two instances, they are written in an order that a crash
// cannot break (see raftStorage): entries before the hard state that
// commits them; a truncation synced in the state store before its entries
// leave the log; a removed or merged range's entries dropped after its
// state, and swept at the next open if a crash came between (sweepLogs).
// A store written when the entries lived in the state store has them
// moved at open (moveLogs).
//
// Every value is framed as
//
//	+------+---------+-----------------------+---------------------------+
//	| 0xCA | version | payload               | crc32c (4, BE) of all     |
//	| magic| 0x01    | (protobuf or BE ints) | preceding bytes           |
//	+------+---------+-----------------------+---------------------------+
//
// and a command inside an entry's data as version 0x01 | proposal id (8, BE)
// | command. An entry with empty data is raft's (a new leader's entry).
//
// A new group is bootstrapped without log entries: every replica writes the
// same state, a log truncated at index 5 term 5, commit and applied 5, and
// the ConfState of rangedesc.Range.Peers; so all replicas of a range must be
// bootstrapped from the same Peers.
//
// # Log truncation
//
// When the log holds more than Options.TruncateEvery applied entries, the
// apply batch records the truncated state (all but the last
// Options.LogKeep of them), whose term answers raft's Term query at the
// truncation point, and is synced; then one range deletion removes them
// from the log. A leader does not truncate entries a
// recently active follower still lacks.
//
// # Leases
//
// ReadReady allows a local linearizable read when the replica leads, has
// applied an entry of its term, and holds a lease that expires at
//
//	(send time of the latest heartbeat round a quorum acknowledged)
//	  - MaxClockOffset + ElectionTicks*TickInterval
//
// The heartbeat rounds are RawNode.ReadIndex requests stamped with the term
// and the Store's Clock, issued on every tick; raft's CheckQuorum keeps
// followers that heard from the leader within an election timeout from
// voting for anyone else, which is the promise the lease relies on. A
// restarted replica refuses votes for its first ElectionTicks ticks, since
// it no longer knows what it promised. With defaults (100ms ticks, 10 ticks,
// 500ms offset) a lease lasts 500ms past the last acknowledged round and is
// renewed every 100ms. A leader drops its lease when it starts a
// leadership transfer. See lease.go.
//
// # Quiescence
//
// A group idle for Options.QuiesceTicks stops ticking on every replica and
// sends no raft messages; stores exchange one heartbeat per node pair per
// tick instead, to notice a dead leader or an isolated one. A quiesced
// leader holds no lease: AwaitRead wakes it and waits for one renewal.
// See quiesce.go.
//
// # Deferred
//
//   - A scheduler with a worker pool: one goroutine applies every
//     replica's entries, one writes every replica's log; an I/O error
//     stops the loop (Close returns it).
//   - Merge. A snapshot that shrinks a replica's bounds (it missed a
//     split) leaves the keys it no longer covers on the node until the
//     new range's snapshot replaces them.
package replica
