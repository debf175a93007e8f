// Package keys is Cairn's internal key encoding: pure functions that build
// and split the keys of the meta plane so that byte order is the order the
// product needs (objects by space and key, versions newest first).
//
// # Escaped strings
//
// Variable-length strings are escaped as in FoundationDB's tuple layer:
//
//	byte 0x00  ->  0x00 0xFF
//	any other  ->  itself
//	end        ->  0x00 0x01
//
// The encoding of a string sorts before the encoding of every string it is a
// proper prefix of (0x00 0x01 is below 0x00 0xFF and below every other byte),
// so comparing encodings compares the strings, and the escaped body of a key
// prefix, without terminator, is a byte prefix of the encoding of exactly the
// keys that start with it.
//
// # Object keys
//
//	+---------------+---------------------+---------------------+
//	| space id (4)  | escaped(pprefix)    | escaped(user key)   |
//	| big-endian    | ... 0x00 0x01       | ... 0x00 0x01       |
//	+---------------+---------------------+---------------------+
//
// The placement prefix (pprefix) decides where an object lives: empty in an
// "ordered" space (key order), HashPrefix(key) in a "hash" space (one
// byte: the key's bucket, its 32-bit FNV-1a modulo HashBuckets). Object keys are prefix-free. User keys are 1..MaxKeyLen
// bytes (CheckKey).
//
// # Meta-plane keys built on object keys
//
//	+-----+------------+--------------------+
//	| 'v' | object key | ^commit_ts (8, BE) |   version record (package mvcc)
//	+-----+------------+--------------------+
//	+-----+------------+
//	| 'l' | object key |                        lock / intent (package mvcc)
//	+-----+------------+
//	+-----+------------+-------------------+
//	| 'l' | object key | ^start_ts (8, BE) |    record of a transaction whose
//	+-----+------------+-------------------+    primary lock is on the object
//
//	+-----+-------+------+-----------+-------+------------+-----+
//	| 't' | range | kind | esc(name) | value | object key | ^ts |  index entry
//	+-----+-------+------+-----------+-------+------------+-----+  (package kv)
//
// The timestamp is stored inverted so the newest version of an object sorts
// first: "latest" is one seek to 'v'|obj and "as of T" one seek to
// Version(obj, T).
//
// Everything here is a persistent format; it only moves forward.
package keys
