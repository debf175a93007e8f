package mvcc

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/internal/keys"
)

// ListOptions selects the objects List returns.
type ListOptions struct {
	// Lower and Upper bound the object keys scanned: [Lower, Upper). Nil
	// means unbounded. A key prefix p of an ordered space is
	// [keys.ObjectPrefix(s, nil, p), keys.PrefixEnd(keys.ObjectPrefix(s, nil, p))).
	Lower, Upper []byte
	// StartAfter, when set, lists only objects whose key is strictly
	// greater (a continuation token: the last Obj of the previous page).
	StartAfter []byte
	// Limit caps the number of entries; <= 0 means no limit.
	Limit int
	// AsOf reads the newest version <= AsOf; 0 means the latest.
	AsOf uint64
	// AllVersions lists every version (delete markers too; with AsOf,
	// those <= AsOf) rather than each object's visible one: objects in
	// key order, each one's versions newest first. Limit then counts
	// versions.
	AllVersions bool
	// AfterVersion, with AllVersions and StartAfter, resumes inside
	// StartAfter's history: its versions older than AfterVersion come
	// first (the continuation of a page that ended there).
	AfterVersion uint64
	// Markers lists a key whose visible version is a delete marker too,
	// with that marker (a branch's listing: its deletes hide its base's
	// keys).
	Markers bool
	// Since, when non-zero, lists only the objects whose visible version
	// is newer than it: those that changed (were written, or deleted,
	// with Markers) after Since, up to AsOf. A Reader that is a
	// SinceReader reads only the parts of its store that hold such
	// versions.
	Since uint64
	// Snapshot, with AsOf, fails the listing with ErrHistoryPruned at a
	// key with no version at or before AsOf whose oldest version names a
	// parent (see AtSnapshot): a transaction's listing, which must not
	// leave out a key its snapshot showed.
	Snapshot bool
}

// SinceReader is a Reader that can skip what holds no version newer than
// a timestamp (a store that indexes its version keys' times).
type SinceReader interface {
	// NewIterSince is NewIter, allowed to leave out any key of a block
	// of keys none of whose versions is newer than since.
	NewIterSince(lower, upper []byte, since uint64) (Iterator, error)
}

// Entry is one listed object.
type Entry struct {
	// Obj is the object key, a copy. The entries of one listing share the
	// memory of their keys and records (a kept Entry keeps it all).
	Obj []byte
	// Rec is the visible version; never a delete marker unless
	// AllVersions or Markers. It has every field but the content: Inline and
	// Manifest are nil (read the version with Exact for them).
	Rec *Record
}

// List returns the objects in the span whose visible version (the latest,
// or the newest <= AsOf) is not a delete marker, in object-key order. more
// reports that at least one further entry exists past the last one
// returned. Versions hidden behind the visible one are skipped with one
// seek per object, not scanned (or one Next, when the visible version
// was written with no older one: see skipObject).
func List(r Reader, o ListOptions) (entries []Entry, more bool, err error) {
	lower, upper := keys.VersionSpan(o.Lower, o.Upper)
	var it Iterator
	if sr, ok := r.(SinceReader); ok && o.Since != 0 && !o.AllVersions {
		it, err = sr.NewIterSince(lower, upper, o.Since)
	} else {
		it, err = r.NewIter(lower, upper)
	}
	if err != nil {
		return nil, false, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	if o.AllVersions {
		return listVersions(it, lower, o)
	}

	start := lower
	if o.StartAfter != nil {
		if s := keys.VersionPrefix(o.StartAfter); bytes.Compare(s, start) > 0 {
			start = s
		}
	}
	var objBuf, seekBuf []byte
	var alloc entryAlloc
	ok := it.SeekGE(start)
	for ok {
		obj, ts, err := keys.DecodeVersion(it.Key())
		if err != nil {
			return nil, false, fmt.Errorf("%w: version key %x: %v", ErrCorrupt, it.Key(), err)
		}
		objBuf = append(objBuf[:0], obj...)
		obj = objBuf
		if o.StartAfter != nil && bytes.Compare(obj, o.StartAfter) <= 0 {
			ok = it.SeekGE(nextObject(&seekBuf, obj))
			continue
		}
		if o.AsOf != 0 && ts > o.AsOf {
			// Jump over the versions newer than AsOf.
			seekBuf = keys.AppendVersion(seekBuf[:0], obj, o.AsOf)
			if !it.SeekGE(seekBuf) {
				if err := it.Error(); err != nil {
					return nil, false, err // not the end: Last would clear it
				}
				if o.Snapshot {
					if err := prunedAt(it, obj, o.AsOf, nil); err != nil {
						return nil, false, err
					}
				}
				break
			}
			k := it.Key()
			if !isVersionOf(k, obj) {
				// No version <= AsOf; already at the next object.
				if o.Snapshot {
					if err := prunedAt(it, obj, o.AsOf, &seekBuf); err != nil {
						return nil, false, err
					}
				}
				ok = true
				continue
			}
			if _, ts, err = keys.DecodeVersion(k); err != nil {
				return nil, false, fmt.Errorf("%w: version key %x: %v", ErrCorrupt, k, err)
			}
		}
		rec := alloc.record()
		if err := decodeListed(rec, it.Value(), ts, obj); err != nil {
			return nil, false, err
		}
		if (!rec.DeleteMarker || o.Markers) && rec.Version > o.Since {
			if o.Limit > 0 && len(entries) == o.Limit {
				return entries, true, nil
			}
			entries = append(entries, Entry{Obj: alloc.key(obj), Rec: rec})
		}
		ok = skipObject(it, obj, rec.Parent == 0, &seekBuf)
	}
	return entries, false, it.Error()
}

// listVersions is List with AllVersions: a scan of the span's version
// keys, which sort by object and, within one, newest first.
func listVersions(it Iterator, lower []byte, o ListOptions) (entries []Entry, more bool, err error) {
	start := lower
	var seekBuf []byte
	var alloc entryAlloc
	if o.StartAfter != nil {
		s := nextObject(&seekBuf, o.StartAfter)
		if o.AfterVersion != 0 {
			// The versions older than AfterVersion: keys.AppendVersion
			// orders newer first, so seek to the first <= AfterVersion-1.
			s = keys.AppendVersion(nil, o.StartAfter, o.AfterVersion-1)
		}
		if bytes.Compare(s, start) > 0 {
			start = s
		}
	}
	for ok := it.SeekGE(start); ok; ok = it.Next() {
		obj, ts, err := keys.DecodeVersion(it.Key())
		if err != nil {
			return nil, false, fmt.Errorf("%w: version key %x: %v", ErrCorrupt, it.Key(), err)
		}
		if o.AsOf != 0 && ts > o.AsOf {
			continue
		}
		if o.Limit > 0 && len(entries) == o.Limit {
			return entries, true, nil
		}
		rec := alloc.record()
		if err := decodeListed(rec, it.Value(), ts, obj); err != nil {
			return nil, false, err
		}
		if len(entries) > 0 && bytes.Equal(entries[len(entries)-1].Obj, obj) {
			obj = entries[len(entries)-1].Obj // share the key within one history
		} else {
			obj = alloc.key(obj)
		}
		entries = append(entries, Entry{Obj: obj, Rec: rec})
	}
	return entries, false, it.Error()
}

// entryAlloc hands out the records and keys of a listing's entries from a
// few large allocations rather than two small ones per entry.
type entryAlloc struct {
	recs []Record
	keys []byte
}

// record returns a zero Record.
func (a *entryAlloc) record() *Record {
	if len(a.recs) == cap(a.recs) {
		a.recs = make([]Record, 0, 64)
	}
	a.recs = append(a.recs, Record{})
	return &a.recs[len(a.recs)-1]
}

// key returns a copy of k, with no room to grow into its neighbour's.
func (a *entryAlloc) key(k []byte) []byte {
	if cap(a.keys)-len(a.keys) < len(k) {
		a.keys = make([]byte, 0, max(4<<10, len(k)))
	}
	n := len(a.keys)
	a.keys = append(a.keys, k...)
	return a.keys[n:len(a.keys):len(a.keys)]
}

// skipObject moves it from a version of obj to the next object's newest
// version. A version written with no older one (its Parent is 0, passed
// as last) is usually obj's last: one Next then gets there, cheaper than
// a seek. Otherwise, or if the Next finds an older version of obj after
// all, it seeks: a history is jumped, not scanned. A Next is not tried
// on every object because a seek after a Next costs more than a seek
// alone: pebble's SeekGE to a key past the previous SeekGE's first tries
// the next keys of each level, but after a Next it searches them all.
func skipObject(it Iterator, obj []byte, last bool, buf *[]byte) bool {
	if last {
		if !it.Next() {
			return false
		}
		if !isVersionOf(it.Key(), obj) {
			return true
		}
	}
	return it.SeekGE(nextObject(buf, obj))
}

// prever is an Iterator that can step back (pebble's).
type prever interface {
	Prev() bool
}

// prunedAt reports ErrHistoryPruned if obj, which has versions but none
// at or before asOf, lost the one asOf saw: its oldest version names a
// parent. it is past obj's versions: at the next object (back is then a
// buffer for that key, and it is left there again), or exhausted (back
// nil). An iterator that cannot go back reports nothing.
func prunedAt(it Iterator, obj []byte, asOf uint64, back *[]byte) error {
	var ok bool
	if back != nil {
		p, can := it.(prever)
		if !can {
			return nil
		}
		*back = append((*back)[:0], it.Key()...)
		ok = p.Prev()
	} else {
		l, can := it.(lastSeeker)
		if !can {
			return nil
		}
		ok = l.Last()
	}
	if !ok {
		if err := it.Error(); err != nil {
			return err // before a seek clears it
		}
	}
	var err error
	if ok && isVersionOf(it.Key(), obj) {
		var rec Record
		_, ts, derr := keys.DecodeVersion(it.Key())
		if derr != nil {
			return fmt.Errorf("%w: version key %x: %v", ErrCorrupt, it.Key(), derr)
		}
		if err = decodeListed(&rec, it.Value(), ts, obj); err == nil && rec.Parent != 0 {
			err = fmt.Errorf("%w: object %x at %d (its oldest version %d follows %d)", ErrHistoryPruned, obj, asOf, ts, rec.Parent)
		}
	}
	if err != nil {
		return err
	}
	if back != nil && !it.SeekGE(*back) {
		if err := it.Error(); err != nil {
			return err
		}
		return fmt.Errorf("mvcc: listing lost its place at %x (the key it left is gone)", *back)
	}
	return it.Error()
}

// isVersionOf reports whether k is a version key of obj.
func isVersionOf(k, obj []byte) bool {
	return len(k) == 1+len(obj)+tsLen && bytes.Equal(k[1:1+len(obj)], obj)
}

// nextObject returns the first version key past every version of obj:
// 'v' | obj with its last byte incremented (obj ends with the terminator
// 0x01, so this never carries).
func nextObject(buf *[]byte, obj []byte) []byte {
	b := append((*buf)[:0], keys.PrefixVersion)
	b = append(b, obj...)
	b[len(b)-1]++
	*buf = b
	return b
}
