package keys

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
)

// MaxKeyLen is the largest user object key, in bytes (S3's limit).
const MaxKeyLen = 1024

// Key-space prefixes owned by this package (see the storage package's map).
const (
	// PrefixVersion starts every version key: 'v' | object | ^ts.
	PrefixVersion byte = 'v'
	// PrefixLock starts every lock (intent) key: 'l' | object.
	PrefixLock byte = 'l'
	// PrefixChild starts every entry of the children index:
	// 'p' | object | ^ts | child object.
	PrefixChild byte = 'p'
)

// HashBuckets is how many buckets a "hash" space spreads its keys over;
// HashPrefix names one, in one byte.
const HashBuckets = 16

var (
	// ErrMalformedKey is returned by the decoders when their input is not a
	// key this package produced: a bad escape, a missing terminator, a short
	// or over-long key, or a wrong key-space prefix.
	ErrMalformedKey = errors.New("keys: malformed key")
	// ErrKeyTooLong is returned by CheckKey for a user key longer than
	// MaxKeyLen.
	ErrKeyTooLong = errors.New("keys: key longer than 1024 bytes")
	// ErrEmptyKey is returned by CheckKey for an empty user key.
	ErrEmptyKey = errors.New("keys: empty key")
)

const (
	escByte  = 0x00 // introduces an escape or the terminator
	escFF    = 0xFF // 0x00 0xFF is an escaped 0x00
	escTerm  = 0x01 // 0x00 0x01 ends a string
	spaceLen = 4
	tsLen    = 8
)

// CheckKey reports whether key is an acceptable user object key: 1 to
// MaxKeyLen bytes, any byte values.
func CheckKey(key []byte) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes", ErrKeyTooLong, len(key))
	}
	return nil
}

// appendEscapedBody appends b with every 0x00 escaped, without terminator.
func appendEscapedBody(dst, b []byte) []byte {
	for {
		i := bytes.IndexByte(b, escByte)
		if i < 0 {
			return append(dst, b...)
		}
		dst = append(dst, b[:i+1]...)
		dst = append(dst, escFF)
		b = b[i+1:]
	}
}

// AppendEscaped appends the order-preserving encoding of b to dst: every
// 0x00 becomes 0x00 0xFF and the string ends with 0x00 0x01. The encoding of
// a string sorts before the encoding of every longer string it prefixes, so
// comparing encodings compares the strings.
func AppendEscaped(dst, b []byte) []byte {
	dst = appendEscapedBody(dst, b)
	return append(dst, escByte, escTerm)
}

// DecodeEscaped decodes one escaped string from the front of b and returns
// it and the bytes after its terminator. value aliases b when b[:len(value)]
// holds no escape; otherwise it is a fresh slice. Callers must not modify it.
func DecodeEscaped(b []byte) (value, rest []byte, err error) {
	i := bytes.IndexByte(b, escByte)
	if i < 0 || i+1 >= len(b) {
		return nil, nil, ErrMalformedKey
	}
	if b[i+1] == escTerm {
		return b[:i:i], b[i+2:], nil
	}
	// Slow path: at least one escaped 0x00.
	out := make([]byte, 0, len(b))
	for {
		if i < 0 || i+1 >= len(b) {
			return nil, nil, ErrMalformedKey
		}
		out = append(out, b[:i]...)
		switch b[i+1] {
		case escTerm:
			return out, b[i+2:], nil
		case escFF:
			out = append(out, escByte)
			b = b[i+2:]
			i = bytes.IndexByte(b, escByte)
		default:
			return nil, nil, ErrMalformedKey
		}
	}
}

// HashPrefix returns the placement prefix of key in a "hash" space: its
// bucket, the 32-bit FNV-1a hash of key (hash/fnv's New32a) modulo
// HashBuckets, in one byte. Sequential keys spread over the buckets;
// within a bucket keys keep their order, so a listing merges HashBuckets
// ordered streams. This is a persistent format: changing it moves every
// object of every hash space.
func HashPrefix(key []byte) []byte {
	h := fnv.New32a()
	h.Write(key)
	return []byte{byte(h.Sum32() % HashBuckets)}
}

// Placement prefixes of a "tag:NAME" space. Its objects live under
// TagPrefix(value of their tag NAME), so objects that share the value are
// neighbours (one range, unless they outgrow it); its directory, under
// DirPrefix, names each key's value, as the place to find the key.
var (
	// DirPrefix is the placement prefix of a tag space's directory.
	DirPrefix = []byte{'d'}
	// TagPrefixes is the placement prefix span of a tag space's objects:
	// every TagPrefix(v) starts with it.
	TagPrefixes = []byte{'t'}
)

// TagPrefix returns the placement prefix of the objects whose placement
// tag has value v in a "tag:NAME" space: 't' and a 64-bit hash of v,
// big-endian: hash/fnv's New64a, whose high bits barely differ between
// short values, mixed by the finalizer of MurmurHash3 (each input bit
// flips about half of the output bits), so values spread evenly over the
// space's ranges. This is a persistent format.
func TagPrefix(v string) []byte {
	h := fnv.New64a()
	h.Write([]byte(v))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return binary.BigEndian.AppendUint64(append([]byte(nil), TagPrefixes...), x)
}

// TagSpan returns the span [lo, hi) of every object of tag space spaceID
// (all its TagPrefix placement prefixes; not its directory).
func TagSpan(spaceID uint32) (lo, hi []byte) {
	lo = binary.BigEndian.AppendUint32(nil, spaceID)
	lo = append(lo, TagPrefixes...)
	return lo, PrefixEnd(lo)
}

// Object returns the object key of key in space spaceID with placement prefix
// pprefix (empty for ordered spaces):
//
//	spaceID (4, BE) | escaped(pprefix) | escaped(key)
//
// Object keys are prefix-free: no object key is a proper prefix of another.
func Object(spaceID uint32, pprefix, key []byte) []byte {
	dst := make([]byte, 0, spaceLen+len(pprefix)+len(key)+6)
	return AppendObject(dst, spaceID, pprefix, key)
}

// AppendObject appends Object(spaceID, pprefix, key) to dst.
func AppendObject(dst []byte, spaceID uint32, pprefix, key []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, spaceID)
	dst = AppendEscaped(dst, pprefix)
	return AppendEscaped(dst, key)
}

// DecodeObject splits an object key into its parts. pprefix and key may
// alias obj. Trailing bytes are an error.
func DecodeObject(obj []byte) (spaceID uint32, pprefix, key []byte, err error) {
	if len(obj) < spaceLen {
		return 0, nil, nil, ErrMalformedKey
	}
	spaceID = binary.BigEndian.Uint32(obj)
	pprefix, rest, err := DecodeEscaped(obj[spaceLen:])
	if err != nil {
		return 0, nil, nil, err
	}
	key, rest, err = DecodeEscaped(rest)
	if err != nil {
		return 0, nil, nil, err
	}
	if len(rest) != 0 {
		return 0, nil, nil, ErrMalformedKey
	}
	return spaceID, pprefix, key, nil
}

// ObjectPrefix returns the prefix shared by the object keys of exactly those
// objects of (spaceID, pprefix) whose user key starts with keyPrefix: the
// space, the escaped placement prefix and the escaped keyPrefix without its
// terminator. Use [ObjectPrefix, PrefixEnd(ObjectPrefix)) as a span.
//
// In a hash space the placement prefix depends on the whole key, so a key
// prefix cannot be turned into one span; scan SpaceStart..SpaceEnd instead.
func ObjectPrefix(spaceID uint32, pprefix, keyPrefix []byte) []byte {
	dst := make([]byte, 0, spaceLen+len(pprefix)+len(keyPrefix)+4)
	dst = binary.BigEndian.AppendUint32(dst, spaceID)
	dst = AppendEscaped(dst, pprefix)
	return appendEscapedBody(dst, keyPrefix)
}

// SpaceStart returns the smallest object key of space spaceID (inclusive).
func SpaceStart(spaceID uint32) []byte {
	return binary.BigEndian.AppendUint32(nil, spaceID)
}

// SpaceEnd returns the exclusive upper bound of the object keys of space
// spaceID. For the largest space id it returns nil: no bound (the end of the
// object keyspace), which VersionSpan accepts.
func SpaceEnd(spaceID uint32) []byte {
	if spaceID == ^uint32(0) {
		return nil
	}
	return binary.BigEndian.AppendUint32(nil, spaceID+1)
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix, or nil if there is none (prefix is empty or all 0xFF).
func PrefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xFF {
			end := make([]byte, i+1)
			copy(end, prefix)
			end[i]++
			return end
		}
	}
	return nil
}

// Version returns the key of version ts of object obj:
//
//	'v' | obj | ^ts (8, BE)
//
// so that the versions of an object sort newest first.
func Version(obj []byte, ts uint64) []byte {
	return AppendVersion(make([]byte, 0, 1+len(obj)+tsLen), obj, ts)
}

// AppendVersion appends Version(obj, ts) to dst.
func AppendVersion(dst, obj []byte, ts uint64) []byte {
	dst = append(dst, PrefixVersion)
	dst = append(dst, obj...)
	return binary.BigEndian.AppendUint64(dst, ^ts)
}

// Split returns the length of k's prefix for the LSM's prefix bloom
// filters (pebble's Comparer.Split): for a version key 'v' | obj | ^ts, the
// length of 'v' | obj, so that a seek to one object's versions skips every
// table that holds none of them; for every other key, and for anything in
// the 'v' keyspace that is not a whole version key (bounds, separators), all
// of k. Object keys are prefix-free and end in a terminator, so byte order
// over whole keys orders them by prefix first, as pebble requires.
func Split(k []byte) int {
	if len(k) < 1+spaceLen+4+tsLen || k[0] != PrefixVersion {
		return len(k)
	}
	if n := objectEnd(k, 1); n == len(k)-tsLen {
		return n
	}
	return len(k)
}

// VersionPrefixEnd returns the smallest key after every version key of
// the object whose version prefix ('v' | obj) is prefix, that is itself no
// version key: prefix with its terminator's last byte raised (0x00 0x02, a
// sequence no escaped string holds). It sorts before every version key of
// every later object. ok is false when prefix is no whole version prefix.
func VersionPrefixEnd(dst, prefix []byte) (_ []byte, ok bool) {
	if len(prefix) < 1+spaceLen+4 || prefix[0] != PrefixVersion || objectEnd(prefix, 1) != len(prefix) {
		return dst, false
	}
	dst = append(dst, prefix...)
	dst[len(dst)-1]++
	return dst, true
}

// objectEnd returns the offset in k just past the object key that starts
// at offset start (its space, escaped placement prefix and escaped key), or
// -1 if k holds no whole object key there.
func objectEnd(k []byte, start int) int {
	n := start + spaceLen
	for range 2 { // the escaped placement prefix, then the escaped key
		for {
			if n > len(k) {
				return -1
			}
			i := bytes.IndexByte(k[n:], escByte)
			if i < 0 || n+i+1 >= len(k) {
				return -1
			}
			n += i + 2
			if k[n-1] == escTerm {
				break
			}
			if k[n-1] != escFF {
				return -1
			}
		}
	}
	return n
}

// DecodeVersion splits a version key into its object key (aliasing k) and
// timestamp. The object key is checked with DecodeObject.
func DecodeVersion(k []byte) (obj []byte, ts uint64, err error) {
	if len(k) < 1+spaceLen+4+tsLen || k[0] != PrefixVersion {
		return nil, 0, ErrMalformedKey
	}
	obj = k[1 : len(k)-tsLen : len(k)-tsLen]
	if _, _, _, err := DecodeObject(obj); err != nil {
		return nil, 0, err
	}
	return obj, ^binary.BigEndian.Uint64(k[len(k)-tsLen:]), nil
}

// VersionPrefix returns 'v' | obj, the prefix of every version key of obj and
// of no other object's (object keys are prefix-free).
func VersionPrefix(obj []byte) []byte {
	dst := make([]byte, 0, 1+len(obj))
	dst = append(dst, PrefixVersion)
	return append(dst, obj...)
}

// VersionSpan returns the span [lower, upper) of the version keys of every
// object in [objStart, objEnd). A nil objStart means the first object; a nil
// objEnd means past the last one (the end of the 'v' keyspace).
func VersionSpan(objStart, objEnd []byte) (lower, upper []byte) {
	lower = VersionPrefix(objStart)
	if objEnd == nil {
		upper = []byte{PrefixVersion + 1}
	} else {
		upper = VersionPrefix(objEnd)
	}
	return lower, upper
}

// Lock returns the key of obj's lock (a transaction's intent): 'l' | obj.
func Lock(obj []byte) []byte {
	dst := make([]byte, 0, 1+len(obj))
	dst = append(dst, PrefixLock)
	return append(dst, obj...)
}

// TxnRecord returns the key of the record of the transaction that started
// at startTS and whose primary lock is on obj:
//
//	'l' | obj | ^startTS (8, BE)
//
// It sorts right after obj's lock and before the next object's, so it
// lives in the range of its primary (LockSpan covers it).
func TxnRecord(obj []byte, startTS uint64) []byte {
	dst := make([]byte, 0, 1+len(obj)+tsLen)
	dst = append(dst, PrefixLock)
	dst = append(dst, obj...)
	return binary.BigEndian.AppendUint64(dst, ^startTS)
}

// DecodeLock splits a key of the 'l' keyspace: a lock (record false) or
// a transaction record (record true, with its start timestamp). obj
// aliases k and is checked with DecodeObject.
func DecodeLock(k []byte) (obj []byte, startTS uint64, record bool, err error) {
	if len(k) < 1+spaceLen+4 || k[0] != PrefixLock {
		return nil, 0, false, ErrMalformedKey
	}
	if _, _, _, err := DecodeObject(k[1:]); err == nil {
		return k[1:len(k):len(k)], 0, false, nil
	}
	if len(k) < 1+spaceLen+4+tsLen {
		return nil, 0, false, ErrMalformedKey
	}
	obj = k[1 : len(k)-tsLen : len(k)-tsLen]
	if _, _, _, err := DecodeObject(obj); err != nil {
		return nil, 0, false, err
	}
	return obj, ^binary.BigEndian.Uint64(k[len(k)-tsLen:]), true, nil
}

// IsLock reports whether k is a lock key ('l' | obj), not a transaction
// record or anything else.
func IsLock(k []byte) bool {
	return len(k) > 1 && k[0] == PrefixLock && objectEnd(k, 1) == len(k)
}

// LockSpan returns the span [lower, upper) of the lock keys of every object
// in [objStart, objEnd); a nil objEnd means past the last one (the end of
// the 'l' keyspace).
func LockSpan(objStart, objEnd []byte) (lower, upper []byte) {
	lower = Lock(objStart)
	if objEnd == nil {
		upper = []byte{PrefixLock + 1}
	} else {
		upper = Lock(objEnd)
	}
	return lower, upper
}

// Child returns the key of the children index entry that names object
// child as cloned from version ts of object obj:
//
//	'p' | obj | ^ts (8, BE) | child
//
// It lives in obj's range (ChildSpan), after obj's earlier entries in
// version order, newest first, like version keys.
func Child(obj []byte, ts uint64, child []byte) []byte {
	dst := ChildPrefix(obj, ts)
	return append(dst, child...)
}

// ChildPrefix returns the prefix of every children index entry of version
// ts of obj: 'p' | obj | ^ts.
func ChildPrefix(obj []byte, ts uint64) []byte {
	dst := make([]byte, 0, 1+len(obj)+tsLen+len(obj))
	dst = append(dst, PrefixChild)
	dst = append(dst, obj...)
	return binary.BigEndian.AppendUint64(dst, ^ts)
}

// DecodeChild splits a children index key into the parent object, its
// version and the child object (both aliasing k, checked with
// DecodeObject).
func DecodeChild(k []byte) (obj []byte, ts uint64, child []byte, err error) {
	if len(k) < 1 || k[0] != PrefixChild {
		return nil, 0, nil, ErrMalformedKey
	}
	n := objectEnd(k, 1)
	if n < 0 || len(k) < n+tsLen {
		return nil, 0, nil, ErrMalformedKey
	}
	obj, child = k[1:n:n], k[n+tsLen:]
	if _, _, _, err := DecodeObject(obj); err != nil {
		return nil, 0, nil, err
	}
	if _, _, _, err := DecodeObject(child); err != nil {
		return nil, 0, nil, err
	}
	return obj, ^binary.BigEndian.Uint64(k[n : n+tsLen]), child, nil
}

// ChildSpan returns the span [lower, upper) of the children index entries
// of every object in [objStart, objEnd); a nil objEnd means past the last
// one (the end of the 'p' keyspace).
func ChildSpan(objStart, objEnd []byte) (lower, upper []byte) {
	lower = append([]byte{PrefixChild}, objStart...)
	if objEnd == nil {
		upper = []byte{PrefixChild + 1}
	} else {
		upper = append([]byte{PrefixChild}, objEnd...)
	}
	return lower, upper
}
