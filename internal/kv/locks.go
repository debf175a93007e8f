package kv

import (
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// lockSet holds the lock keys in a range's span, and the values of the
// small ones, kept by the range's apply step, so that the check every
// write and transaction makes for a lock on its key — which is almost
// never there — costs a map lookup instead of a read of pebble, and so does
// the read of a lock a commit resolves. Only the apply step uses it: it
// alone writes locks, in order, and reads through its own batch.
//
// A lock written is added at once, with its value; a lock deleted is
// marked gone and leaves the set once the batch that deleted it has
// committed (Committed), unless the same batch wrote it again. The set is
// loaded from the lock span on first use, and loaded again after the
// range's bounds change or its state is replaced by a snapshot.
type lockSet struct {
	loaded bool
	span   rangedesc.Range
	held   map[string][]byte   // lock key -> value; nil: over maxHeldLock, read pebble
	gone   map[string]struct{} // deleted by the uncommitted batch
}

// maxHeldLock bounds the value of a lock the set keeps in memory (a lock
// holds the intended version's record, inline body included).
const maxHeldLock = 4 << 10

// reset makes the set load again, over span, at its next use.
func (s *lockSet) reset(span rangedesc.Range) {
	s.loaded, s.span = false, span
	s.held, s.gone = nil, nil
}

// get answers a read of lock key k through the apply batch when the set
// can (known): whether it exists and a copy of its value. Otherwise the
// caller reads pebble.
func (s *lockSet) get(r pebble.Reader, k []byte) (v []byte, found, known bool, err error) {
	if !s.loaded {
		if err := s.load(r); err != nil {
			return nil, false, false, err
		}
	}
	v, held := s.held[string(k)]
	_, gone := s.gone[string(k)] // deleted in the batch
	switch {
	case !held || gone:
		return nil, false, true, nil
	case v == nil:
		return nil, false, false, nil // too large to keep
	}
	return slices.Clone(v), true, true, nil
}

// heldValue is what the set keeps of a lock's value v.
func heldValue(v []byte) []byte {
	if len(v) > maxHeldLock {
		return nil
	}
	if v == nil {
		return []byte{}
	}
	return slices.Clone(v)
}

func (s *lockSet) load(r pebble.Reader) error {
	lo, hi := keys.LockSpan(s.span.Start, s.span.End)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	held := make(map[string][]byte)
	for ok := it.First(); ok; ok = it.Next() {
		if keys.IsLock(it.Key()) {
			held[string(it.Key())] = heldValue(it.Value())
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	s.held, s.gone, s.loaded = held, make(map[string]struct{}), true
	return nil
}

// wrote notes that the apply batch set key k to v (del false) or deleted
// it.
func (s *lockSet) wrote(k, v []byte, del bool) {
	if !s.loaded || !keys.IsLock(k) {
		return // a set not loaded yet reads the batch when it loads
	}
	if del {
		s.gone[string(k)] = struct{}{}
		return
	}
	s.held[string(k)] = heldValue(v)
	delete(s.gone, string(k))
}

// committed drops the locks the committed batch deleted.
func (s *lockSet) committed() {
	for k := range s.gone {
		delete(s.held, k)
	}
	clear(s.gone)
}
