// Package segment stores a node's chunks: append-only segment files plus a
// chunk index (hash -> segment, offset, length) in the node's pebble
// instance.
//
// # Zone-append
//
// A Store appends only at the tail of its one open segment file,
// seg-%016x.cairn (the segment number in hex). When the next record would
// take it past Options.SegmentSize the segment is sealed and never written
// again; numbers only grow. This is the zone-append discipline of zoned
// storage, so the store could later run on raw zones.
//
// # Group commit and durability
//
// Put and PutAsync hash-check and encode the record in the caller's
// goroutine and queue it (PutAsyncHashed, for a caller that has just
// hashed the data itself, skips the hash check). One writer goroutine takes everything queued,
// appends it, issues one fsync of the segment, then commits every index
// entry of the batch (and the segment's bookkeeping) in one synced pebble
// batch, and only then releases the waiters. Segment data is therefore
// durable before any index entry points at it, and an acknowledged Put
// survives a crash. A chunk already indexed, or already queued by a
// concurrent Put of the same hash, is not written again (dedup).
//
// Each group commit starts on a 4 KiB block boundary and ends with a
// padding record up to the next one. So no append ever rewrites a block
// holding acknowledged records (a torn write cannot reach back into them),
// and on the real disk the writer appends with O_DIRECT through one
// block-aligned 4 MiB staging buffer: the data goes from that buffer to the
// device without a copy into the page cache, which for large objects was
// the biggest single CPU cost of a PUT (see docs/benchmarks.md). The fsync
// stays: it makes the file's new length and the device's write cache
// durable. Where O_DIRECT is refused, at open or by a write (some file
// systems; any FS but vfs.Default), the same blocks are written through
// the page cache. Reads always go through the page cache, so data written
// moments ago is read from the device once. The crash tests run on a
// memory file system, which has the same layout but no direct I/O; the
// O_DIRECT calls themselves are exercised by the tests on the real disk.
//
// Rotation pads and syncs the old segment, creates the new file with its
// header block, syncs it and the directory; the seal is recorded in the
// same pebble batch as the records that follow it.
//
// After a failed write or fsync the store refuses further writes (the state
// of the file after a failed fsync is unknown); reads go on.
//
// # Recovery
//
// Open rescans every segment not marked sealed in the bookkeeping: the open
// one, and one whose seal was lost by a crash during rotation. Each record is
// validated (magic, version, length, CRC32C, BLAKE3); valid records missing
// from the index are synced and re-indexed (their Put may have crashed after
// the fsync but before the index commit). At the first bad record, if it
// lies past the prefix the bookkeeping says was acknowledged it is a torn
// tail and the file is truncated there; if it lies inside that prefix the
// data was damaged after the fact, nothing is truncated, the segment is
// sealed as it is and Get reports the damaged chunk as ErrCorrupt. An open
// segment whose recovered length is not a whole number of blocks (a tail
// torn inside a group commit, or a segment written before appends were
// block-aligned) is sealed too, and writing goes on in a new segment.
// Sealed segments are not rescanned.
//
// # Reads
//
// Get finds a chunk's record through the index and checks it before
// returning a byte: the header's magic, version, flags and reserved bytes
// against the format, its length and hash against the index entry, and the
// data against its BLAKE3 address. It does not compute the record's CRC32C:
// those checks already cover every header byte but the CRC field and every
// data byte, with a stronger hash. Recovery, which scans records that no
// index entry vouches for, checks both.
//
// # Formats
//
// All integers are big-endian. A segment file starts with a 20-byte header:
//
//	0        4     5         8                  16         20
//	+--------+-----+---------+------------------+----------+
//	| magic  | ver | 0 0 0   | segment number   | crc32c   |
//	| "CRSG" |  1  |         |                  | of 0..16 |
//	+--------+-----+---------+------------------+----------+
//
// and a padding record filling the first 4 KiB block, followed by records,
// each a 48-byte header and the chunk data:
//
//	0        4     5       6     8          12                     44         48
//	+--------+-----+-------+-----+----------+----------------------+----------+-------------+
//	| magic  | ver | flags | 0 0 | data len | BLAKE3-256(data)     | crc32c   | data ...    |
//	| "CRCK" |  1  |   0   |     | (uint32) | (32 bytes)           | (note)   | (data len)  |
//	+--------+-----+-------+-----+----------+----------------------+----------+-------------+
//
//	note: CRC32C (Castagnoli) over header bytes 0..44 followed by the data.
//
// The two bytes after the flags are reserved and must be zero. Flags 0 is
// a chunk. Flags 1 is a padding record: its hash field and its data are
// zero, it is never indexed, and recovery skips it (after checking its
// CRC). Segments written before padding existed hold only chunk records
// and read the same.
//
// The chunk index lives in pebble under storage.PrefixChunkIndex:
//
//	"\x02c" hash(32) -> ver(1)=1 | segment(8) | record offset(8) | data len(4)
//
// and the segment bookkeeping under storage.PrefixSegment:
//
//	"\x02s" segment(8) -> ver(1)=1 | state(1: 1 open, 2 sealed) | size(8) | records(8)
//
// where size is the length of the synced, indexed prefix (for a sealed
// segment, the file length). The copies of each chunk the cluster wants
// (the largest replication factor of the spaces that wrote it; see
// RaiseCopies) are under storage.PrefixChunkWant:
//
//	"\x02w" hash(32) -> ver(1)=1 | copies(1)
//
// # Not yet
//
// Compaction (rewriting the live chunks out of segments that are mostly
// garbage, then deleting them) comes with garbage collection, which decides
// what is live; until then segments are never deleted.
package segment
