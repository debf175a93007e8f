package keys

import (
	"encoding/binary"
	"math"
)

// PrefixIndex starts every entry of the tag and field indexes:
//
//	't' | range id (8, BE) | kind (1) | escaped(name) | value | object | ^ts (8, BE)
//
// One range's entries are one span (IndexSpan), so a Raft snapshot copies
// them, a removed replica drops them and a split or merge moves them, as
// it does the range's versions; within it the entries of one name and
// value are contiguous, in object order, each object's newest first.
const PrefixIndex byte = 't'

// Index kinds.
const (
	// IndexTag: name is the tag's key, the value its escaped value.
	IndexTag byte = 't'
	// IndexField: name is a document path, the value a FieldValue
	// encoding (type byte first).
	IndexField byte = 'f'
)

// IndexChange is the kind of a range's change feed (AppendChangeEntry):
// not an index of values but the range's versions in commit order.
const IndexChange byte = 'c'

// AppendChangeEntry appends the key of the change feed's entry for
// version ts of obj in range rangeID:
//
//	't' | range id (8) | 'c' | ts (8, BE) | object
//
// A range's entries are in commit order (the order of their timestamps),
// and within one timestamp (a transaction's writes) in object order.
func AppendChangeEntry(dst []byte, rangeID, ts uint64, obj []byte) []byte {
	dst = append(dst, PrefixIndex)
	dst = binary.BigEndian.AppendUint64(dst, rangeID)
	dst = append(dst, IndexChange)
	dst = binary.BigEndian.AppendUint64(dst, ts)
	return append(dst, obj...)
}

// ChangeSpan returns the span of range rangeID's change feed.
func ChangeSpan(rangeID uint64) (lower, upper []byte) {
	lower = binary.BigEndian.AppendUint64([]byte{PrefixIndex}, rangeID)
	lower = append(lower, IndexChange)
	return lower, PrefixEnd(lower)
}

// IndexFeedHorizon is the kind of the one key that holds a range's change
// feed horizon: entries older than it were trimmed.
const IndexFeedHorizon byte = 'h'

// FeedHorizon returns the key of range rangeID's change feed horizon.
func FeedHorizon(rangeID uint64) []byte {
	k := binary.BigEndian.AppendUint64([]byte{PrefixIndex}, rangeID)
	return append(k, IndexFeedHorizon)
}

// DecodeChangeEntry splits a change feed entry's key; obj aliases k.
func DecodeChangeEntry(k []byte) (rangeID, ts uint64, obj []byte, err error) {
	if len(k) < 1+idLen+1+tsLen || k[0] != PrefixIndex || k[1+idLen] != IndexChange {
		return 0, 0, nil, ErrMalformedKey
	}
	obj = k[2+idLen+tsLen:]
	if _, _, _, err := DecodeObject(obj); err != nil {
		return 0, 0, nil, err
	}
	return binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[2+idLen:]), obj, nil
}

// Field value types, the first byte of a field's value encoding. Their
// order is the order of values of different types.
const (
	FieldBool   byte = 'b' // 1 byte: 0 or 1
	FieldNumber byte = 'n' // 8 bytes: an order-preserving float64
	FieldString byte = 's' // an escaped string
	FieldTime   byte = 'T' // 8 bytes: Unix nanoseconds, sign bit flipped
)

const idLen = 8

// AppendIndexPrefix appends 't' | rangeID | kind | escaped(name): the
// prefix of every entry of one tag or field of one range.
func AppendIndexPrefix(dst []byte, rangeID uint64, kind byte, name []byte) []byte {
	dst = append(dst, PrefixIndex)
	dst = binary.BigEndian.AppendUint64(dst, rangeID)
	dst = append(dst, kind)
	return AppendEscaped(dst, name)
}

// AppendIndexEntry appends the key of the index entry saying that version
// ts of object obj has value (already encoded: AppendEscaped for a tag,
// AppendField* for a field) under name.
func AppendIndexEntry(dst []byte, rangeID uint64, kind byte, name, value, obj []byte, ts uint64) []byte {
	dst = AppendIndexPrefix(dst, rangeID, kind, name)
	dst = append(dst, value...)
	dst = append(dst, obj...)
	return binary.BigEndian.AppendUint64(dst, ^ts)
}

// IndexSpan returns the span of every index entry of range rangeID.
func IndexSpan(rangeID uint64) (lower, upper []byte) {
	lower = binary.BigEndian.AppendUint64([]byte{PrefixIndex}, rangeID)
	return lower, PrefixEnd(lower)
}

// IndexEntry is a decoded index entry; its slices alias the key.
type IndexEntry struct {
	RangeID uint64
	Kind    byte
	Name    []byte // unescaped (a fresh slice if it held an escape)
	Value   []byte // the value's encoding, as in the key
	Obj     []byte
	TS      uint64
}

// DecodeIndexEntry splits an index entry key.
func DecodeIndexEntry(k []byte) (e IndexEntry, err error) {
	if len(k) < 1+idLen+1 || k[0] != PrefixIndex {
		return e, ErrMalformedKey
	}
	e.RangeID, e.Kind = binary.BigEndian.Uint64(k[1:]), k[1+idLen]
	name, rest, err := DecodeEscaped(k[2+idLen:])
	if err != nil {
		return e, err
	}
	e.Name = name
	n := valueEnd(e.Kind, rest)
	if n < 0 || len(rest) < n+tsLen {
		return e, ErrMalformedKey
	}
	e.Value, e.Obj = rest[:n:n], rest[n:len(rest)-tsLen:len(rest)-tsLen]
	if _, _, _, err := DecodeObject(e.Obj); err != nil {
		return e, err
	}
	e.TS = ^binary.BigEndian.Uint64(rest[len(rest)-tsLen:])
	return e, nil
}

// valueEnd returns the length of the value encoding at the front of b,
// or -1.
func valueEnd(kind byte, b []byte) int {
	escEnd := func(b []byte, start int) int {
		_, rest, err := DecodeEscaped(b[start:])
		if err != nil {
			return -1
		}
		return len(b) - len(rest)
	}
	switch kind {
	case IndexTag:
		return escEnd(b, 0)
	case IndexField:
		if len(b) < 1 {
			return -1
		}
		switch b[0] {
		case FieldBool:
			if len(b) < 2 {
				return -1
			}
			return 2
		case FieldNumber, FieldTime:
			if len(b) < 9 {
				return -1
			}
			return 9
		case FieldString:
			return escEnd(b, 1)
		}
	}
	return -1
}

// AppendFieldNumber appends the encoding of a number field value: its
// order is the numbers' (NaN refused by the caller; -0 is 0).
func AppendFieldNumber(dst []byte, f float64) []byte {
	if f == 0 {
		f = 0 // -0 sorts with 0
	}
	u := math.Float64bits(f)
	if u&(1<<63) != 0 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	return binary.BigEndian.AppendUint64(append(dst, FieldNumber), u)
}

// AppendFieldTime appends the encoding of a time field value (Unix
// nanoseconds).
func AppendFieldTime(dst []byte, unixNano int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, FieldTime), uint64(unixNano)^(1<<63))
}

// AppendFieldString appends the encoding of a string field value.
func AppendFieldString(dst []byte, s []byte) []byte {
	return AppendEscaped(append(dst, FieldString), s)
}

// AppendFieldBool appends the encoding of a boolean field value.
func AppendFieldBool(dst []byte, b bool) []byte {
	v := byte(0)
	if b {
		v = 1
	}
	return append(dst, FieldBool, v)
}

// DecodeFieldNumber decodes AppendFieldNumber's encoding.
func DecodeFieldNumber(b []byte) (float64, bool) {
	if len(b) != 9 || b[0] != FieldNumber {
		return 0, false
	}
	u := binary.BigEndian.Uint64(b[1:])
	if u&(1<<63) != 0 {
		u &^= 1 << 63
	} else {
		u = ^u
	}
	return math.Float64frombits(u), true
}

// AppendTagEntry appends the key of the tag index entry saying that
// version ts of object obj has tag name = value, in range rangeID.
func AppendTagEntry(dst []byte, rangeID uint64, name, value, obj []byte, ts uint64) []byte {
	dst = AppendIndexPrefix(dst, rangeID, IndexTag, name)
	dst = AppendEscaped(dst, value)
	dst = append(dst, obj...)
	return binary.BigEndian.AppendUint64(dst, ^ts)
}

// RekeyIndexEntry appends the index entry k with its range id replaced
// by rangeID.
func RekeyIndexEntry(dst, k []byte, rangeID uint64) []byte {
	n := len(dst)
	dst = append(dst, k...)
	binary.BigEndian.PutUint64(dst[n+1:], rangeID)
	return dst
}

// AppendEscapedPrefix appends the escaped body of p without its
// terminator: a byte prefix of the encoding of exactly the strings that
// start with p.
func AppendEscapedPrefix(dst, p []byte) []byte { return appendEscapedBody(dst, p) }
