package kv

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/replica"
)

// The tag index.
//
// Every tag of every version is indexed, in its range, under the range's
// id (keys.AppendIndexEntry): 't' | range | 't' | name | value | object |
// ^ts. The entries change in the batch that changes the version (mvcc
// calls IndexVersion), so an entry exists exactly while its version holds
// the tag: a reader at a timestamp takes an object's newest entry at or
// before it as a candidate and keeps it if that version is the object's
// visible one then.

// indexer writes a range's index entries into the apply batch.
type indexer struct {
	rangeID uint64
	decls   []FieldDecl // the range's field declarations
	buf     []byte
}

// IndexVersion implements mvcc.Indexer: the entries go into the batch.
func (rw BatchRW) IndexVersion(obj []byte, old, rec *mvcc.Record) error {
	if rw.ix == nil {
		return nil
	}
	return rw.ix.index(batchWriter{rw.B}, obj, old, rec)
}

// IndexVersion implements mvcc.Indexer for a transaction command: the
// entries are held with the command's other writes, and dropped with
// them if it fails.
func (d *deferredRW) IndexVersion(obj []byte, old, rec *mvcc.Record) error {
	if d.ix == nil {
		return nil
	}
	return d.ix.index(d, obj, old, rec)
}

// keyWriter is where index entries go.
type keyWriter interface {
	Set(k, v []byte) error
	Delete(k []byte) error
}

// batchWriter writes to a batch at once.
type batchWriter struct{ b *pebble.Batch }

func (w batchWriter) Set(k, v []byte) error { return w.b.Set(k, v, nil) }
func (w batchWriter) Delete(k []byte) error { return w.b.Delete(k, nil) }

// Change feed flags, the value of a change entry.
const (
	changeDeleteMarker byte = 1 << iota // the version is a delete marker
)

// index writes the entries that change between old and rec (either nil)
// of obj: the tag and field index entries, and a new version's change
// feed entry. The feed is a log: an entry stays when its version is
// removed (a reader of the feed learns that the key changed then, and
// reads what it holds now).
func (ix *indexer) index(w keyWriter, obj []byte, old, rec *mvcc.Record) error {
	if old == nil && rec != nil {
		flags := byte(0)
		if rec.DeleteMarker {
			flags |= changeDeleteMarker
		}
		ix.buf = keys.AppendChangeEntry(ix.buf[:0], ix.rangeID, rec.Version, obj)
		if err := w.Set(ix.buf, []byte{flags}); err != nil {
			return err
		}
	}
	var oldTags, newTags map[string]string
	var ts uint64
	if old != nil {
		oldTags, ts = old.Tags, old.Version
	}
	if rec != nil {
		newTags, ts = rec.Tags, rec.Version
	}
	for _, name := range sortedKeys(oldTags) {
		v := oldTags[name]
		if nv, ok := newTags[name]; ok && nv == v {
			continue
		}
		ix.buf = keys.AppendTagEntry(ix.buf[:0], ix.rangeID, []byte(name), []byte(v), obj, ts)
		if err := w.Delete(ix.buf); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(newTags) {
		v := newTags[name]
		if ov, ok := oldTags[name]; ok && ov == v {
			continue
		}
		ix.buf = keys.AppendTagEntry(ix.buf[:0], ix.rangeID, []byte(name), []byte(v), obj, ts)
		if err := w.Set(ix.buf, nil); err != nil {
			return err
		}
	}
	return ix.indexFields(w, obj, ts, old, rec)
}

func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// IDSpans returns the spans of the node's keyspace a range's state
// keeps under its id (replica.Options.IDSpans): its index entries.
func IDSpans(id uint64) []replica.Span {
	lo, hi := keys.IndexSpan(id)
	return []replica.Span{{Start: lo, End: hi}}
}

// RekeySplit implements replica.Rekeyer: the index entries of the objects
// the split gives right move from left's id to right's (or, with
// moveRight false, only leave left's). It reads every entry of left, and
// writes one deletion and one entry per moved entry.
func (m *StateMachine) RekeySplit(b *pebble.Batch, left, right rangedesc.Range, moveRight bool) error {
	if moveRight {
		// Nothing of an earlier life of the id may stay; the new range
		// declares the field indexes its parent does.
		lo, hi := keys.IndexSpan(right.ID)
		if err := b.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
		if err := copyDecls(b, left.ID, right.ID, false); err != nil {
			return err
		}
		// Right's feed has left's gaps.
		h, err := FeedHorizon(b, left.ID)
		if err != nil {
			return err
		}
		if err := setHorizon(b, right.ID, h); err != nil {
			return err
		}
	}
	return m.moveEntries(b, left.ID, right.ID, right, moveRight)
}

// RekeyMerge implements replica.Rekeyer: every index entry of right moves
// under left's id.
func (m *StateMachine) RekeyMerge(b *pebble.Batch, left, right rangedesc.Range) error {
	if err := copyDecls(b, right.ID, left.ID, true); err != nil {
		return err
	}
	if err := m.moveEntries(b, right.ID, left.ID, rangedesc.Range{}, true); err != nil {
		return err
	}
	// The merged feed has the gaps of both.
	h, err := FeedHorizon(b, right.ID)
	if err != nil {
		return err
	}
	if err := setHorizon(b, left.ID, h); err != nil {
		return err
	}
	lo, hi := keys.IndexSpan(right.ID)
	return b.DeleteRange(lo, hi, nil)
}

// moveEntries deletes the entries of range from whose object is in span
// (an unbounded span: every one) and, with write, writes each under range
// to.
func (m *StateMachine) moveEntries(b *pebble.Batch, from, to uint64, span rangedesc.Range, write bool) error {
	lo, hi := keys.IndexSpan(from)
	it, err := b.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	var buf []byte
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) > 1+8 && (k[1+8] == kindDecl || k[1+8] == keys.IndexFeedHorizon) {
			continue // declarations: copyDecls; the horizon: Rekey*
		}
		var obj []byte
		if len(k) > 1+8 && k[1+8] == keys.IndexChange {
			_, _, obj, err = keys.DecodeChangeEntry(k)
		} else {
			var e keys.IndexEntry
			e, err = keys.DecodeIndexEntry(k)
			obj = e.Obj
		}
		if err != nil {
			it.Close()
			return fmt.Errorf("%w: index entry %x: %v", mvcc.ErrCorrupt, k, err)
		}
		if span.Start != nil && bytes.Compare(obj, span.Start) < 0 ||
			span.End != nil && bytes.Compare(obj, span.End) >= 0 {
			continue
		}
		if err := b.Delete(k, nil); err != nil {
			it.Close()
			return err
		}
		if write {
			buf = keys.RekeyIndexEntry(buf[:0], k, to)
			if err := b.Set(buf, it.Value(), nil); err != nil {
				it.Close()
				return err
			}
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	return it.Close()
}
