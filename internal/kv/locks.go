package kv

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// lockSet holds a superset of the lock keys in a range's span, kept by the
// range's apply step, so that the check every write and transaction makes
// for a lock on its key — which is almost never there — costs a map lookup
// instead of a read of pebble. Only the apply step uses it: it alone writes
// locks, in order, and reads through its own batch.
//
// A lock written is added at once (a superset may be early); a lock
// deleted leaves the set only once the batch that deleted it has committed
// (Committed), unless the same batch wrote it again. The set is loaded from
// the lock span on first use, and loaded again after the range's bounds
// change or its state is replaced by a snapshot.
type lockSet struct {
	loaded bool
	span   rangedesc.Range
	held   map[string]struct{}
	gone   map[string]struct{} // deleted by the uncommitted batch
}

// reset makes the set load again, over span, at its next use.
func (s *lockSet) reset(span rangedesc.Range) {
	s.loaded, s.span = false, span
	s.held, s.gone = nil, nil
}

// mayHold reports whether lock key k may exist; false means it does not.
func (s *lockSet) mayHold(r pebble.Reader, k []byte) (bool, error) {
	if !s.loaded {
		if err := s.load(r); err != nil {
			return true, err
		}
	}
	_, ok := s.held[string(k)]
	return ok, nil
}

func (s *lockSet) load(r pebble.Reader) error {
	lo, hi := keys.LockSpan(s.span.Start, s.span.End)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	held := make(map[string]struct{})
	for ok := it.First(); ok; ok = it.Next() {
		if keys.IsLock(it.Key()) {
			held[string(it.Key())] = struct{}{}
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	s.held, s.gone, s.loaded = held, make(map[string]struct{}), true
	return nil
}

// wrote notes that the apply batch set (del false) or deleted key k.
func (s *lockSet) wrote(k []byte, del bool) {
	if !s.loaded || !keys.IsLock(k) {
		return // a set not loaded yet reads the batch when it loads
	}
	if del {
		s.gone[string(k)] = struct{}{}
		return
	}
	s.held[string(k)] = struct{}{}
	delete(s.gone, string(k))
}

// committed drops the locks the committed batch deleted.
func (s *lockSet) committed() {
	for k := range s.gone {
		delete(s.held, k)
	}
	clear(s.gone)
}
