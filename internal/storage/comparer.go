package storage

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
)

// ComparerName names the node keyspace's order in pebble's files. Keys
// compare as bytes (as under pebble's default comparer); what the name adds
// is keys.Split, which the tables' bloom filters are built over. A store
// written under another comparer cannot be read with this one.
const ComparerName = "cairn.keys.v1"

// Comparer is the node keyspace's pebble comparer: byte order, with the
// version keys split into object (the prefix the bloom filters hold) and
// timestamp (the suffix), so that a seek to an object that has no version
// in a table skips the table. Separator and Successor shorten prefixes only,
// never into a key that would split differently (see keys.Split).
var Comparer = &pebble.Comparer{
	Compare:              bytes.Compare,
	Equal:                bytes.Equal,
	ComparePointSuffixes: bytes.Compare,
	CompareRangeSuffixes: bytes.Compare,
	AbbreviatedKey:       pebble.DefaultComparer.AbbreviatedKey,
	FormatKey:            pebble.DefaultComparer.FormatKey,
	Split:                keys.Split,
	Separator:            separator,
	Successor:            successor,
	ImmediateSuccessor:   immediateSuccessor,
	Name:                 ComparerName,
}

// separator returns a short key k with a <= k < b.
func separator(dst, a, b []byte) []byte {
	ap, bp := a[:keys.Split(a)], b[:keys.Split(b)]
	if bytes.Equal(ap, bp) {
		return append(dst, a...)
	}
	n := len(dst)
	dst = pebble.DefaultComparer.Separator(dst, ap, bp)
	if k := dst[n:]; keys.Split(k) != len(k) || bytes.Compare(k, a) < 0 {
		return append(dst[:n], a...)
	}
	return dst
}

// successor returns a short key k >= a.
func successor(dst, a []byte) []byte {
	ap := a[:keys.Split(a)]
	n := len(dst)
	dst = pebble.DefaultComparer.Successor(dst, ap)
	if k := dst[n:]; keys.Split(k) != len(k) || bytes.Compare(k, a) < 0 {
		return append(dst[:n], a...)
	}
	return dst
}

// immediateSuccessor returns the first key after every key whose prefix is
// the prefix a.
func immediateSuccessor(dst, a []byte) []byte {
	if out, ok := keys.VersionPrefixEnd(dst, a); ok {
		return out
	}
	return append(append(dst, a...), 0)
}
