package replica

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/storage"
)

// The raft log's own instance (Engine.LogDB) holds the ranges' entries
// under the same keys as the state store held them (logKey); everything
// else of a range's raft state stays in the state store. See raftStorage
// for the order the two are written in.

// moveLogBatch bounds the bytes of entries moved in one batch.
const moveLogBatch = 32 << 20

// moveLogs moves the log entries a state store written before the log had
// its own instance holds into the log's: copied and synced first, then
// deleted from the state store, so a crash in between leaves copies that
// the next open moves again. On a store without any it reads a few keys
// per range.
func (s *Store) moveLogs() error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte(storage.PrefixRangeLocal), UpperBound: keys.PrefixEnd([]byte(storage.PrefixRangeLocal)),
	})
	if err != nil {
		return err
	}
	defer it.Close()
	var ranges [][]byte // prefixes of the ranges with entries moved
	b := s.logDB.NewBatch()
	defer func() { _ = b.Close() }()
	moved := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		plen := len(storage.PrefixRangeLocal) + 8
		if len(k) < plen+1 || k[plen] != suffixLog {
			continue
		}
		prefix := k[:plen]
		if _, ok := logIndex(prefix, k); !ok {
			return fmt.Errorf("%w: bad log key %x", ErrCorrupt, k)
		}
		if n := len(ranges); n == 0 || string(ranges[n-1]) != string(prefix) {
			ranges = append(ranges, append([]byte(nil), prefix...))
			// What the log's store holds of the range (a move cut
			// short, then the older build run again) goes first.
			if err := b.DeleteRange(logKey(prefix, 0), stateKey(prefix, suffixLog+1), nil); err != nil {
				return err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := b.Set(k, v, nil); err != nil {
			return err
		}
		moved++
		if b.Len() >= moveLogBatch {
			if err := b.Commit(pebble.Sync); err != nil {
				return err
			}
			_ = b.Close()
			b = s.logDB.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if len(ranges) == 0 {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("replica: move raft log entries to their own store: %w", err)
	}
	del := s.db.NewBatch()
	defer del.Close()
	for _, p := range ranges {
		if err := del.DeleteRange(logKey(p, 0), stateKey(p, suffixLog+1), nil); err != nil {
			return err
		}
	}
	if err := del.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("replica: drop moved raft log entries from the state store: %w", err)
	}
	s.log.Info("moved the raft log entries into their own store", "entries", moved, "ranges", len(ranges))
	return nil
}

// sweepLogs drops the entries of ranges whose state is gone (removed, or
// merged away: a tombstone) but whose log outlived it in a crash. It runs
// at open, before any range can be added again under the same id.
func (s *Store) sweepLogs() error {
	it, err := s.logDB.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	plen := len(storage.PrefixRangeLocal) + 8
	swept := 0
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) < plen || string(k[:len(storage.PrefixRangeLocal)]) != storage.PrefixRangeLocal {
			return fmt.Errorf("%w: key %x in the raft log's store", ErrCorrupt, k)
		}
		prefix := append([]byte(nil), k[:plen]...)
		live, err := s.hasLiveState(prefix)
		if err != nil {
			return err
		}
		if !live {
			if err := s.logDB.DeleteRange(prefix, keys.PrefixEnd(prefix), pebble.Sync); err != nil {
				return err
			}
			swept++
		}
		ok = it.SeekGE(keys.PrefixEnd(prefix))
	}
	if err := it.Error(); err != nil {
		return err
	}
	if swept > 0 {
		s.log.Info("dropped the raft logs of ranges no longer here", "ranges", swept)
	}
	return nil
}

// hasLiveState reports whether the state store holds the raft state of
// the range under prefix (a hard state, and no tombstone).
func (s *Store) hasLiveState(prefix []byte) (bool, error) {
	if merged, err := s.hasStateKey(prefix, suffixTombstone); err != nil || merged {
		return false, err
	}
	return s.hasStateKey(prefix, suffixHardState)
}

// hasStateKey reports whether the state store holds the range's key
// under suffix.
func (s *Store) hasStateKey(prefix []byte, suffix byte) (bool, error) {
	_, closer, err := s.db.Get(stateKey(prefix, suffix))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, closer.Close()
}

// dropLog removes range id's entries from the log, synced: its state is
// gone, and the range may come back under the same id.
func (s *Store) dropLog(id uint64) error {
	prefix := rangePrefix(id)
	return s.logDB.DeleteRange(prefix, keys.PrefixEnd(prefix), pebble.Sync)
}
