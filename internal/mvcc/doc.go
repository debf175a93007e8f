// Package mvcc keeps the versions of objects: writing a version, reading
// the latest or as of a timestamp, listing what is visible, and pruning
// history by a retention policy.
//
// It is pure: it reads and writes through the small Reader/Writer
// interfaces (shaped like pebble's iterator and batch; MemKV is the
// in-memory implementation), takes time as an argument (a tstamp timestamp),
// starts no goroutines and does no I/O of its own. Put is deterministic, as
// it must be inside a replicated state machine.
//
// # Keys
//
// A version of object obj (a keys.Object key) written at commit timestamp ts
// is stored at
//
//	'v' | obj | ^ts (8, big-endian)
//
// so an object's versions are contiguous and newest first: Latest is one
// seek to 'v'|obj, At(ts) one seek to keys.Version(obj, ts), and List moves
// from one object to the next with one seek past 'v'|obj (or a Next, for
// an object that likely has one version).
//
// # Record format (the value), format version 1
//
//	+------+------+-----+-------+--------+---------+--------+-----------+
//	| 0xCA | 0x7E | 0x01| flags | parent | startTS |  size  | hash (32) |
//	|    magic   | fmt |  (1)  | uvarint| uvarint | varint |  BLAKE3   |
//	+------+------+-----+-------+--------+---------+--------+-----------+
//	| etag | content type | meta map | tags map | inline | manifest | [headers map] | CRC32C |
//	| str  |     str      |          |          | bytes  |  bytes   |  if flag bit 1 | (4,BE) |
//	+------+--------------+----------+----------+--------+----------+---------------+--------+
//
//	flags    bit 0: delete marker; bit 1: a headers map follows the
//	         manifest (content headers, checksums; records without one
//	         keep their encoding); other bits must be 0
//	str      uvarint length | bytes          (bytes alike)
//	map      uvarint count  | count x (str key, str value), keys strictly
//	         ascending
//	varint   zig-zag (encoding/binary); every varint is minimal-length
//	CRC32C   Castagnoli, over every byte before it
//
// The commit timestamp (Record.Version) is not in the value: it is in the
// key. The encoding is canonical: a record has exactly one encoding, and a
// value that is not some record's encoding fails with ErrCorrupt. A later
// format gets a new format byte; readers keep decoding the old ones.
//
// # Visibility and retention
//
// A delete marker is a version. Latest/At/Exact return it (callers decide);
// List hides objects whose visible version is one. Parent is the lineage at
// write time and is not rewritten when versions are pruned or deleted, nor
// when an older version is written out of order.
//
// Retention applies on Put to the key being written: KeepAll keeps every
// version, KeepLast N the N newest (delete markers count), KeepFor D every
// version that became noncurrent (its next newer version was written) less
// than D before now. The newest version is never pruned, so a key whose
// newest version is a delete marker keeps that marker.
//
// # Transactions
//
// Multi-object transactions are Percolator's protocol over the versions
// (txn.go): a transaction reads at its start timestamp and, to commit,
// locks every key it writes (prewrite), takes a commit timestamp, commits
// its primary key's lock and then the others (secondaries), which point to
// the primary. A lock of object obj is stored at
//
//	'l' | obj                 -> lock
//	'l' | obj | ^start_ts (8) -> transaction record (on the primary only)
//
// The committed version is an ordinary version record whose StartTS is the
// transaction's start: the Percolator "write" record is the version
// itself. The transaction record keeps the outcome of a transaction with
// locks in other ranges (committed at C, or rolled back) until its
// coordinator has resolved them all; a rolled-back record also makes a late
// prewrite of the primary fail. The rules:
//
//   - Prewrite refuses a key locked by another transaction, a key with a
//     version newer than the start (first committer wins), and a key whose
//     expected version does not hold; it writes all its locks or none.
//   - Commit turns a write lock into its version at the commit timestamp
//     (a read lock, taken by serializable transactions for what they read,
//     just goes). Rollback removes a lock; on the primary it leaves the
//     rolled-back record, and it never undoes a commit.
//   - A reader at T meets the write locks of transactions that started at
//     or before T and resolves them through the primary (CheckTxn): pending
//     until the primary's lock expires (the coordinator's heartbeat extends
//     it), then rolled back; committed at C, the lock's version is the one
//     to read if C <= T.
//   - A transaction whose keys are all in one range commits in one step
//     (CommitOnePhase).
//
// Lock (value), format version 1:
//
//	+------+------+-----+------+---------+---------+---------+-----------+-----------+--------+
//	| 0xCA | 0x4C | 0x01| kind | startTS | expires | primary | retention | record    | CRC32C |
//	|            |     | (1)  | uvarint | varint  | bytes   | mode(1),  | bytes     | (4,BE) |
//	|            |     |      |         | (ms)    |         | N, D (uv) | (empty    |        |
//	|            |     |      |         |         |         |           |  for read)|        |
//	+------+------+-----+------+---------+---------+---------+-----------+-----------+--------+
//
// Transaction record (value), format version 1:
//
//	| 0xCA | 0x58 | 0x01 | state (2 committed, 3 rolled back) | commitTS uvarint | CRC32C |
package mvcc
