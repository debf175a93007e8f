package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrSnapshotNotFound is returned for a snapshot name the catalog does
// not hold.
var ErrSnapshotNotFound = errors.New("meta: no such snapshot")

// Snapshot is a read-only view of a space as of one timestamp. Its name
// is a space name: no space and no other snapshot has it.
type Snapshot struct {
	Name string
	// Of is the space it shows, by name and id.
	Of   string
	OfID uint32
	// At is the timestamp it shows the space as of; 0 while it is being
	// made (pending: every node holds the space's history from then on,
	// and no read is served).
	At      uint64
	Created time.Time
}

// Pending reports whether the snapshot is still being made.
func (s Snapshot) Pending() bool { return s.At == 0 }

type snapRecord struct {
	V       int       `json:"v"`
	Name    string    `json:"name"`
	Of      string    `json:"of"`
	OfID    uint32    `json:"of_id"`
	At      uint64    `json:"at"`
	Created time.Time `json:"created"`
}

func encodeSnap(s Snapshot) []byte {
	b, _ := json.Marshal(snapRecord{V: formatVersionOne, Name: s.Name, Of: s.Of, OfID: s.OfID, At: s.At, Created: s.Created.UTC()})
	return b
}

func decodeSnap(kv KV) (Snapshot, error) {
	var r snapRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return Snapshot{}, fmt.Errorf("meta: decode %s: %w", kv.Key, err)
	}
	if r.V != formatVersionOne {
		return Snapshot{}, fmt.Errorf("meta: %s has format version %d, want %d", kv.Key, r.V, formatVersionOne)
	}
	return Snapshot{Name: r.Name, Of: r.Of, OfID: r.OfID, At: r.At, Created: r.Created}, nil
}

// CreateSnapshot records a pending snapshot of space of (id ofID) named
// name: ErrSpaceExists if a space or snapshot has the name. A space
// created with the same name at the same moment makes one of the two
// fail (each checks for the other after writing itself).
func (c *Catalog) CreateSnapshot(ctx context.Context, name, of string, ofID uint32) (Snapshot, error) {
	if err := ValidNewSpaceName(name); err != nil {
		return Snapshot{}, err
	}
	if _, err := c.store.Get(ctx, spaceKey(name)); err == nil {
		return Snapshot{}, fmt.Errorf("%w: %q is a space", ErrSpaceExists, name)
	} else if !errors.Is(err, ErrNotFound) {
		return Snapshot{}, err
	}
	s := Snapshot{Name: name, Of: of, OfID: ofID, Created: c.clock().UTC()}
	if _, err := c.store.Put(ctx, snapKey(name), encodeSnap(s), 0); errors.Is(err, ErrConflict) {
		return Snapshot{}, fmt.Errorf("%w: %q is a snapshot", ErrSpaceExists, name)
	} else if err != nil {
		return Snapshot{}, err
	}
	if _, err := c.store.Get(ctx, spaceKey(name)); err == nil {
		_ = c.store.Delete(ctx, snapKey(name), AnyRev)
		return Snapshot{}, fmt.Errorf("%w: %q is a space", ErrSpaceExists, name)
	}
	return s, nil
}

// SetSnapshotAt completes a pending snapshot: it shows its space as of at.
func (c *Catalog) SetSnapshotAt(ctx context.Context, name string, at uint64) (Snapshot, error) {
	kv, err := c.store.Get(ctx, snapKey(name))
	if errors.Is(err, ErrNotFound) {
		return Snapshot{}, fmt.Errorf("%w: %q", ErrSnapshotNotFound, name)
	}
	if err != nil {
		return Snapshot{}, err
	}
	s, err := decodeSnap(kv)
	if err != nil {
		return Snapshot{}, err
	}
	s.At = at
	_, err = c.store.Put(ctx, snapKey(name), encodeSnap(s), kv.Rev)
	return s, err
}

// GetSnapshot returns the snapshot called name, or ErrSnapshotNotFound.
func (c *Catalog) GetSnapshot(ctx context.Context, name string) (Snapshot, error) {
	kv, err := c.store.Get(ctx, snapKey(name))
	if errors.Is(err, ErrNotFound) {
		return Snapshot{}, fmt.Errorf("%w: %q", ErrSnapshotNotFound, name)
	}
	if err != nil {
		return Snapshot{}, err
	}
	return decodeSnap(kv)
}

// Snapshots returns every snapshot in name order.
func (c *Catalog) Snapshots(ctx context.Context) ([]Snapshot, error) {
	kvs, err := c.store.List(ctx, keySnapPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]Snapshot, 0, len(kvs))
	for _, kv := range kvs {
		s, err := decodeSnap(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// DeleteSnapshot removes snapshot name, or returns ErrSnapshotNotFound.
func (c *Catalog) DeleteSnapshot(ctx context.Context, name string) error {
	err := c.store.Delete(ctx, snapKey(name), AnyRev)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrSnapshotNotFound, name)
	}
	return err
}
