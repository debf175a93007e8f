package segment

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/storage"
)

// A chunk's wanted copies: how many nodes of the cluster should hold it,
// the largest replication factor of the spaces that wrote it. The node
// that takes a write records it with every copy it makes, and the
// repairer reads it, so a chunk of a space of one replica is not copied
// to three nodes because another space wants three.

func copiesKey(h chunk.Hash) []byte {
	return append([]byte(storage.PrefixChunkWant), h[:]...)
}

const copiesVersion = 1

// RaiseCopies records that chunk h wants at least r copies (1 to 255); a
// larger number recorded before stays. The record is not synced: one lost
// in a crash is written again by the chunk's next write or repair, and
// until then the repairer uses its default.
func (s *Store) RaiseCopies(h chunk.Hash, r int) error {
	if r < 1 || r > 255 {
		return fmt.Errorf("segment: %d copies of chunk %s", r, h)
	}
	// A write of the chunk in flight records its copies with its index
	// entry, overwriting what this records now: it learns of r too (and
	// records it again after its commit if it had not).
	s.mu.Lock()
	if p := s.mu.inflight[h]; p != nil {
		p.copies = max(p.copies, r)
	}
	s.mu.Unlock()
	s.copiesMu.Lock()
	defer s.copiesMu.Unlock()
	if have, err := s.Copies(h); err != nil || have >= r {
		return err
	}
	if err := s.db.Set(copiesKey(h), []byte{copiesVersion, byte(r)}, pebble.NoSync); err != nil {
		return fmt.Errorf("segment: record the copies of chunk %s: %w", h, err)
	}
	return nil
}

// Copies returns the copies recorded for chunk h, or 0 if none are.
func (s *Store) Copies(h chunk.Hash) (int, error) {
	v, c, err := s.db.Get(copiesKey(h))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("segment: read the copies of chunk %s: %w", h, err)
	}
	defer c.Close()
	if len(v) != 2 || v[0] != copiesVersion || v[1] == 0 {
		return 0, fmt.Errorf("%w: copies record of chunk %s: %x", ErrCorrupt, h, v)
	}
	return int(v[1]), nil
}
