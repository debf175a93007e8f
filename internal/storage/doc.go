// Package storage owns a node's pebble instance and its disk seam.
//
// Every file a node touches goes through one vfs.FS (pebble's), so tests can
// run the whole node on memory, simulate a crash that drops unsynced writes
// (vfs.NewCrashableMem + CrashClone) and inject errors (vfs/errorfs).
//
// # Keyspace map
//
// One pebble instance holds the state of every component of a node. The first
// byte of a key says who owns it; nobody writes outside their prefix.
// The ranges' raft logs are apart, in a second instance (Engine.LogDB,
// in the subdirectory raftlog of db), under the same range-local keys
// (0x01 'r' rangeID 'l' index): entries live there only until they are
// applied and truncated, and the state store's memtables, flushes and
// compactions see none of them.
//
//	0x01 'r' rangeID(8, BE) suffix   replica: hard state, applied index, truncation
//	0x02 'c' hash(32)                 segment: chunk index (hash -> segment, offset, length)
//	0x02 's' ...                      segment: segment-store bookkeeping
//	0x02 'w' hash(32)                 segment: copies wanted of the chunk in the cluster
//	0x03 ...                          node-local: identity, format version
//	'l'  object-key                   mvcc: transaction locks (intents)
//	'l'  object-key ^start_ts         mvcc: transaction records (on a primary)
//	'p'  object-key ^ts object-key    kv: children index (clones of a version)
//	't'  rangeID kind name value object-key ^ts   kv: tag and field index entries
//	'v'  object-key ^ts               mvcc: version records
//
// Object keys (space | placement prefix | key) are built by package keys.
//
// The comparer (Comparer) orders keys as bytes and splits version keys
// into object and timestamp (keys.Split), so the bloom filters skip the
// tables that hold no version of an object a seek looks for. The state
// store's tables are cut into 32 KiB blocks (256 KiB index blocks): older
// versions go to value blocks, and pebble compresses each into a buffer
// of its own held until the table is finished, so small blocks cost more
// allocation than they save in reads.
package storage
