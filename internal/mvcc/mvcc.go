package mvcc

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/cairn-db/cairn/internal/keys"
)

var (
	// ErrNotFound is returned by Latest, At, Exact and DeleteVersion when no
	// version matches. A delete marker is a version: it is returned, not
	// ErrNotFound.
	ErrNotFound = errors.New("mvcc: version not found")
	// ErrCorrupt is returned when a stored record or version key fails to
	// decode (bad magic, format version, checksum or length). It is a
	// corruption-class error: the data must be repaired, not retried.
	ErrCorrupt = errors.New("mvcc: corrupt version")
	// ErrVersionExists is returned by Put when the key already has a
	// version with the record's timestamp. Nothing is written.
	ErrVersionExists = errors.New("mvcc: version already exists")
	// ErrStaleVersion is returned by PutNewest when the key already has a
	// version newer than the record's. Nothing is written; the caller may
	// retry with a newer timestamp.
	ErrStaleVersion = errors.New("mvcc: a newer version exists")
	// ErrInvalidVersion is returned by Put for a record whose Version is 0
	// (0 means "none" in Parent and "latest" in AsOf).
	ErrInvalidVersion = errors.New("mvcc: version 0 is reserved")
	// ErrHistoryPruned is returned by AtSnapshot when the version a
	// snapshot would read is gone: the key has versions, none at or before
	// the snapshot, and its oldest names a parent that no longer exists
	// (retention pruned it, or it was deleted by its id). It is not
	// ErrNotFound: the key existed at the snapshot.
	ErrHistoryPruned = errors.New("mvcc: the version visible at this snapshot was pruned")
)

const tsLen = 8

// versionIter is an iterator over the versions of one object.
type versionIter struct {
	it     Iterator
	prefix []byte // 'v' | obj
}

func newVersionIter(r Reader, obj []byte) (*versionIter, error) {
	if _, _, _, err := keys.DecodeObject(obj); err != nil {
		return nil, fmt.Errorf("mvcc: object key %x: %w", obj, err)
	}
	prefix := keys.VersionPrefix(obj)
	it, err := r.NewIter(prefix, keys.PrefixEnd(prefix))
	if err != nil {
		return nil, err
	}
	return &versionIter{it: it, prefix: prefix}, nil
}

// prefixSeeker is an Iterator that can seek among the keys sharing the
// seek key's prefix alone (pebble's SeekPrefixGE): with the store's
// comparer the prefix of a version key is its object, and tables whose
// bloom filter holds no version of the object are skipped.
type prefixSeeker interface {
	SeekPrefixGE(key []byte) bool
}

// seek positions at the newest version <= ts (ts = ^0 for the newest).
func (v *versionIter) seek(ts uint64) bool {
	k := binary.BigEndian.AppendUint64(v.prefix[:len(v.prefix):len(v.prefix)], ^ts)
	if p, ok := v.it.(prefixSeeker); ok {
		return p.SeekPrefixGE(k)
	}
	return v.it.SeekGE(k)
}

// ts returns the timestamp of the current version.
func (v *versionIter) ts() (uint64, error) {
	k := v.it.Key()
	if len(k) != len(v.prefix)+tsLen || !bytes.HasPrefix(k, v.prefix) {
		return 0, fmt.Errorf("%w: version key %x", ErrCorrupt, k)
	}
	return ^binary.BigEndian.Uint64(k[len(v.prefix):]), nil
}

// record decodes the current version.
func (v *versionIter) record() (*Record, error) {
	ts, err := v.ts()
	if err != nil {
		return nil, err
	}
	return decodeRecord(v.it.Value(), ts, v.prefix[1:])
}

// done returns the iterator's error, or def if it has none.
func (v *versionIter) done(def error) error {
	if err := v.it.Error(); err != nil {
		return err
	}
	return def
}

func (v *versionIter) close(errp *error) {
	if err := v.it.Close(); err != nil && *errp == nil {
		*errp = err
	}
}

// decodeRecord decodes value, version ts of obj.
func decodeRecord(value []byte, ts uint64, obj []byte) (*Record, error) {
	rec := &Record{}
	if err := decode(rec, value, ts, obj, true); err != nil {
		return nil, err
	}
	return rec, nil
}

// decodeListed is decodeRecord into rec, a zero Record, for a listing,
// which returns every field but the content: Inline and Manifest are left
// nil instead of copied out of the iterator's value (for a small object
// the inline body is most of the record, and its copy an allocation per
// listed key).
//
// The record is still checked whole, checksum included. A listing returns
// the size, ETag and metadata that clients compare to decide what to copy
// or skip, so a damaged record must fail a listing as it fails a GET
// rather than list plausible wrong values; pebble's block checksums cover
// the disk but not memory, nor a bug between Marshal and here. The
// checksum is one CRC32C pass over the value, about 0.1 µs for a 1 KiB
// body.
func decodeListed(rec *Record, value []byte, ts uint64, obj []byte) error {
	return decode(rec, value, ts, obj, false)
}

// decode decodes into rec, a zero Record.
func decode(rec *Record, value []byte, ts uint64, obj []byte, content bool) error {
	if err := unmarshal(rec, value, content); err != nil {
		return fmt.Errorf("object %x version %d: %w", obj, ts, err)
	}
	rec.Version = ts
	return nil
}

// Latest returns the newest version of obj, which may be a delete marker,
// or ErrNotFound if obj has no version.
func Latest(r Reader, obj []byte) (*Record, error) {
	return At(r, obj, ^uint64(0))
}

// At returns the newest version of obj with Version <= ts, or ErrNotFound.
func At(r Reader, obj []byte, ts uint64) (_ *Record, err error) {
	v, err := newVersionIter(r, obj)
	if err != nil {
		return nil, err
	}
	defer v.close(&err)
	if !v.seek(ts) {
		return nil, v.done(ErrNotFound)
	}
	return v.record()
}

// lastSeeker is an Iterator that can position at the last key of its
// bounds (pebble's Last).
type lastSeeker interface {
	Last() bool
}

// AtSnapshot is At for a reader that must see what a snapshot at ts saw
// (a transaction): where At reports ErrNotFound because no version is at
// or before ts but older history was removed, it reports
// ErrHistoryPruned. Retention removes a key's oldest versions first, so
// its oldest surviving version's Parent, when not 0, names a version that
// existed and is gone.
func AtSnapshot(r Reader, obj []byte, ts uint64) (_ *Record, err error) {
	v, err := newVersionIter(r, obj)
	if err != nil {
		return nil, err
	}
	defer v.close(&err)
	if v.seek(ts) {
		return v.record()
	}
	if err := v.done(nil); err != nil {
		return nil, err
	}
	ls, ok := v.it.(lastSeeker)
	if !ok || !ls.Last() {
		return nil, v.done(ErrNotFound)
	}
	oldest, err := v.record()
	if err != nil {
		return nil, err
	}
	if oldest.Version > ts && oldest.Parent != 0 {
		return nil, fmt.Errorf("%w: object %x at %d (its oldest version %d follows %d)", ErrHistoryPruned, obj, ts, oldest.Version, oldest.Parent)
	}
	return nil, ErrNotFound
}

// Exact returns version ts of obj, or ErrNotFound.
func Exact(r Reader, obj []byte, ts uint64) (_ *Record, err error) {
	v, err := newVersionIter(r, obj)
	if err != nil {
		return nil, err
	}
	defer v.close(&err)
	return v.exact(ts)
}

func (v *versionIter) exact(ts uint64) (*Record, error) {
	if !v.seek(ts) {
		return nil, v.done(ErrNotFound)
	}
	got, err := v.ts()
	if err != nil {
		return nil, err
	}
	if got != ts {
		return nil, ErrNotFound
	}
	return v.record()
}

// Versions returns the versions of obj newest first, only those with
// Version < before when before != 0, at most limit of them when limit > 0.
// more reports whether further versions follow the last one returned.
func Versions(r Reader, obj []byte, before uint64, limit int) (recs []*Record, more bool, err error) {
	v, err := newVersionIter(r, obj)
	if err != nil {
		return nil, false, err
	}
	defer v.close(&err)
	from := ^uint64(0)
	if before != 0 {
		from = before - 1
	}
	ok := v.seek(from)
	for ; ok; ok = v.it.Next() {
		if limit > 0 && len(recs) == limit {
			return recs, true, nil
		}
		rec, err := v.record()
		if err != nil {
			return nil, false, err
		}
		recs = append(recs, rec)
	}
	return recs, false, v.done(nil)
}

// Prune applies pol to obj's history at time now (a timestamp), as a Put
// would, without writing a version: for a key no one writes again, whose
// noncurrent versions outlive a KeepFor policy or a policy made stricter
// since its last write. With safe, now is the collector's safe point and,
// unlike a Put, Prune drops a version only once a newer one replaced it
// at or before now (Retention.PruneAt). It returns the versions it
// deleted, newest first. The newest version is never pruned.
// Deterministic, like Put.
func Prune(rw ReadWriter, obj []byte, pol Retention, now uint64, safe bool) (pruned []*Record, err error) {
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	if pol.Mode == KeepAll {
		return nil, nil
	}
	recs, _, err := Versions(rw, obj, 0, 0)
	if err != nil || len(recs) < 2 {
		return nil, err
	}
	ts := make([]uint64, len(recs))
	for i, r := range recs {
		ts[i] = r.Version
	}
	drops := pol.Prune(ts, now)
	if safe {
		drops = pol.PruneAt(ts, now)
	}
	for i, drop := range drops {
		if !drop || i == 0 {
			continue
		}
		if err := deleteVersion(rw, obj, recs[i]); err != nil {
			return nil, err
		}
		pruned = append(pruned, recs[i])
	}
	return pruned, nil
}

// Put writes rec as version rec.Version of obj and applies pol to obj's
// history at time now (a timestamp). It sets rec.Parent to the newest
// existing version older than rec.Version (0 if none) and rec.StartTS to
// rec.Version if it is 0. It then deletes the versions pol no longer keeps
// and returns them, newest first, so the caller can release their chunks.
// The newest version is never pruned; rec itself is pruned (and not
// written) when it is older than versions pol drops it behind.
//
// Put reads first (closing its iterator) and writes last, so an error from
// the read phase leaves rw untouched; after an error from a write the caller
// must discard rw (a batch). Put is deterministic: equal contents and
// arguments produce equal writes, in the same order.
func Put(rw ReadWriter, obj []byte, rec *Record, pol Retention, now uint64) (pruned []*Record, err error) {
	return put(rw, obj, rec, pol, now, false)
}

// PutNewest is Put for a record that must become the key's newest version:
// if the key has a version newer than rec.Version it returns ErrStaleVersion
// and writes nothing. Writers that take their timestamp before their write
// is ordered use it, so that a version can never appear below one that a
// reader has already seen as the latest. It costs the same single seek as
// Put under KeepAll.
func PutNewest(rw ReadWriter, obj []byte, rec *Record, pol Retention, now uint64) (pruned []*Record, err error) {
	return put(rw, obj, rec, pol, now, true)
}

// PutNewestOver is PutNewest for a caller that may know obj's newest
// version, latest (from a cache coherent with rw; 0 if not known). Under
// KeepAll with latest known it writes without reading rw; otherwise (other
// policies need the whole history) it is PutNewest.
func PutNewestOver(rw ReadWriter, obj []byte, rec *Record, latest uint64, pol Retention, now uint64) (pruned []*Record, err error) {
	if pol.Mode != KeepAll || latest == 0 {
		return PutNewest(rw, obj, rec, pol, now)
	}
	switch {
	case rec.Version == 0:
		return nil, ErrInvalidVersion
	case latest > rec.Version:
		return nil, fmt.Errorf("%w: object %x has a version newer than %d", ErrStaleVersion, obj, rec.Version)
	case latest == rec.Version:
		return nil, fmt.Errorf("%w: object %x version %d", ErrVersionExists, obj, rec.Version)
	}
	rec.Parent = latest
	if rec.StartTS == 0 {
		rec.StartTS = rec.Version
	}
	return nil, writeVersion(rw, obj, nil, rec)
}

func put(rw ReadWriter, obj []byte, rec *Record, pol Retention, now uint64, newest bool) (pruned []*Record, err error) {
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	if rec.Version == 0 {
		return nil, ErrInvalidVersion
	}
	pruned, keepSelf, err := planPut(rw, obj, rec, pol, now, newest)
	if err != nil {
		return nil, err
	}
	if keepSelf {
		if err := writeVersion(rw, obj, nil, rec); err != nil {
			return nil, err
		}
	}
	for _, old := range pruned {
		if old == rec {
			continue // never written
		}
		if err := deleteVersion(rw, obj, old); err != nil {
			return nil, err
		}
	}
	return pruned, nil
}

// planPut is Put's read phase: it fills in rec.Parent and rec.StartTS and
// returns the records pruned, newest first (rec among them if it goes: the
// others are existing versions to delete), and whether rec is written.
func planPut(r Reader, obj []byte, rec *Record, pol Retention, now uint64, newest bool) (pruned []*Record, keepSelf bool, err error) {
	v, err := newVersionIter(r, obj)
	if err != nil {
		return nil, false, err
	}
	defer v.close(&err)

	// history holds version timestamps newest first, rec's at index self.
	history := []uint64{rec.Version}
	self, exists := 0, false
	if pol.Mode == KeepAll {
		// Nothing is pruned, so only the next older version matters (and,
		// for newest, the newest one: the seek starts there instead).
		from := rec.Version
		if newest {
			from = ^uint64(0)
		}
		if v.seek(from) {
			ts, err := v.ts()
			if err != nil {
				return nil, false, err
			}
			if newest && ts > rec.Version {
				return nil, false, fmt.Errorf("%w: object %x has a version newer than %d", ErrStaleVersion, obj, rec.Version)
			}
			exists = ts == rec.Version
			history = append(history, ts)
		}
	} else {
		history = history[:0]
		for ok := v.seek(^uint64(0)); ok; ok = v.it.Next() {
			ts, err := v.ts()
			if err != nil {
				return nil, false, err
			}
			history = append(history, ts)
		}
		if newest && len(history) > 0 && history[0] > rec.Version {
			return nil, false, fmt.Errorf("%w: object %x has a version newer than %d", ErrStaleVersion, obj, rec.Version)
		}
		self, exists = slices.BinarySearchFunc(history, rec.Version, func(a, b uint64) int {
			return cmp.Compare(b, a) // newest first
		})
		if !exists {
			history = slices.Insert(history, self, rec.Version)
		}
	}
	if err := v.it.Error(); err != nil {
		return nil, false, err
	}
	if exists {
		return nil, false, fmt.Errorf("%w: object %x version %d", ErrVersionExists, obj, rec.Version)
	}
	rec.Parent = 0
	if self+1 < len(history) {
		rec.Parent = history[self+1]
	}
	if rec.StartTS == 0 {
		rec.StartTS = rec.Version
	}

	drop := pol.Prune(history, now)
	for i, ts := range history {
		switch {
		case !drop[i]:
		case i == self:
			pruned = append(pruned, rec)
		default:
			old, err := v.exact(ts)
			if err != nil {
				return nil, false, err
			}
			pruned = append(pruned, old)
		}
	}
	return pruned, !drop[self], nil
}

// DeleteVersion removes version ts of obj and returns it, or ErrNotFound.
// The Parent fields of other versions are left as written.
func DeleteVersion(rw ReadWriter, obj []byte, ts uint64) (*Record, error) {
	rec, err := Exact(rw, obj, ts) // reads, and closes its iterator, before the write
	if err != nil {
		return nil, err
	}
	if err := deleteVersion(rw, obj, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// ErrDeleteMarker is returned by SetTags for a delete marker, which has
// no tags.
var ErrDeleteMarker = errors.New("mvcc: the version is a delete marker")

// SetTags replaces the tags of version ts of obj in place (tags are the
// one part of a version that may change after it is written; nil or empty
// removes them) and returns the updated record, or ErrNotFound, or
// ErrDeleteMarker.
func SetTags(rw ReadWriter, obj []byte, ts uint64, tags map[string]string) (*Record, error) {
	rec, err := Exact(rw, obj, ts)
	if err != nil {
		return nil, err
	}
	if rec.DeleteMarker {
		return nil, ErrDeleteMarker
	}
	old := *rec
	rec.Tags = nil
	if len(tags) > 0 {
		rec.Tags = maps.Clone(tags)
	}
	if err := writeVersion(rw, obj, &old, rec); err != nil {
		return nil, err
	}
	return rec, nil
}
