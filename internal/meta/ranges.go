package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/cairn-db/cairn/internal/rangedesc"
)

// rangeRecord is the value under /cairn/ranges/<space>/<range>. Byte strings
// are base64 (encoding/json's []byte); a null end means the end of the space.
type rangeRecord struct {
	V        int      `json:"v"`
	ID       uint64   `json:"id,string"`
	SpaceID  uint32   `json:"space_id"`
	Start    []byte   `json:"start"`
	End      []byte   `json:"end"`
	Replicas []uint64 `json:"replicas"`
	Learners []uint64 `json:"learners,omitempty"`
	Epoch    uint64   `json:"epoch,string"`
	Parent   uint64   `json:"parent,string,omitempty"`
}

// record is r as the meta service stores it.
func recordOf(r rangedesc.Range) rangeRecord {
	return rangeRecord{V: formatVersionOne, ID: r.ID, SpaceID: r.SpaceID,
		Start: r.Start, End: r.End, Replicas: r.Replicas, Learners: r.Learners, Epoch: r.Epoch, Parent: r.Parent}
}

// desc is the descriptor a stored record holds (a nil Start read as
// empty: the beginning of the space).
func (r rangeRecord) desc() rangedesc.Range {
	start := r.Start
	if start == nil {
		start = []byte{}
	}
	return rangedesc.Range{ID: r.ID, SpaceID: r.SpaceID, Start: start, End: r.End,
		Replicas: r.Replicas, Learners: r.Learners, Epoch: r.Epoch, Parent: r.Parent}
}

func encodeRange(r rangedesc.Range) []byte {
	b, _ := json.Marshal(recordOf(r))
	return b
}

func decodeRange(kv KV) (rangedesc.Range, error) {
	var r rangeRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return rangedesc.Range{}, fmt.Errorf("meta: decode %s: %w", kv.Key, err)
	}
	if r.V != formatVersionOne {
		return rangedesc.Range{}, fmt.Errorf("meta: %s has format version %d, want %d", kv.Key, r.V, formatVersionOne)
	}
	return r.desc(), nil
}

// NewRangeID allocates a range id (never reused).
func (c *Catalog) NewRangeID(ctx context.Context) (uint64, error) {
	return c.allocIDs(ctx, keyRangeCounter, 1, ^uint64(0))
}

// SplitRange records that range leftID of space spaceID split at key:
// it now ends at key, and rightID, a new range with the given voters,
// holds [key, end), which must be where the recorded range ends (else the
// table is behind another split of the range, and ErrConflict says so). The new descriptor is written first, then the
// old one shrinks (compare-and-set on its revision); a reader in between
// sees both, and the new one wins for its keys, as it starts later.
// Calling it again after it succeeded (or half-succeeded) finishes the
// record and changes nothing else. It returns both descriptors.
func (c *Catalog) SplitRange(ctx context.Context, spaceID uint32, leftID uint64, key, end []byte, rightID uint64, voters []uint64) (left, right rangedesc.Range, err error) {
	for attempt := 0; attempt < 8; attempt++ {
		kv, err := c.store.Get(ctx, rangeKey(spaceID, leftID))
		if err != nil {
			return left, right, fmt.Errorf("meta: range %d: %w", leftID, err)
		}
		cur, err := decodeRange(kv)
		if err != nil {
			return left, right, err
		}
		if bytes.Equal(cur.End, key) {
			rkv, err := c.store.Get(ctx, rangeKey(spaceID, rightID))
			if errors.Is(err, ErrNotFound) {
				return left, right, fmt.Errorf("meta: range %d [%x, %x) cannot split at its end", leftID, cur.Start, cur.End)
			}
			if err != nil {
				return left, right, fmt.Errorf("meta: split-off range %d: %w", rightID, err)
			}
			right, err = decodeRange(rkv)
			return cur, right, err
		}
		if bytes.Compare(key, cur.Start) <= 0 || (cur.End != nil && bytes.Compare(key, cur.End) >= 0) {
			return left, right, fmt.Errorf("meta: range %d [%x, %x) cannot split at %x", leftID, cur.Start, cur.End, key)
		}
		if !bytes.Equal(cur.End, end) {
			return left, right, fmt.Errorf("%w: range %d ends at %x in the table, not at %x: an earlier split is not recorded", ErrConflict, leftID, cur.End, end)
		}
		right = rangedesc.Range{ID: rightID, SpaceID: spaceID, Start: slices.Clone(key), End: cur.End,
			Replicas: slices.Clone(voters), Epoch: 1, Parent: leftID}
		if _, err := c.store.Put(ctx, rangeKey(spaceID, rightID), encodeRange(right), 0); err != nil && !errors.Is(err, ErrConflict) {
			return left, right, fmt.Errorf("meta: create split-off range %d: %w", rightID, err)
		}
		cur.End = slices.Clone(key)
		cur.Epoch++
		if _, err := c.store.Put(ctx, kv.Key, encodeRange(cur), kv.Rev); errors.Is(err, ErrConflict) {
			continue // a membership change raced: read again
		} else if err != nil {
			return left, right, fmt.Errorf("meta: range %d: %w", leftID, err)
		}
		return cur, right, nil
	}
	return left, right, fmt.Errorf("%w: range %d kept changing while its split was recorded", ErrConflict, leftID)
}

// MergeRange records in the range table that range leftID of space
// spaceID absorbed its right-hand neighbour rightID, which spanned [start,
// end): the right-hand descriptor goes first (so that a reader in between
// routes its keys by the left-hand one, the greatest start below them),
// then the left-hand one takes end (compare-and-set on its revision).
// Calling it again after it succeeded (or half-succeeded) finishes the
// record and changes nothing else. It returns the left-hand descriptor.
func (c *Catalog) MergeRange(ctx context.Context, spaceID uint32, leftID, rightID uint64, start, end []byte) (rangedesc.Range, error) {
	for attempt := 0; attempt < 8; attempt++ {
		rkv, err := c.store.Get(ctx, rangeKey(spaceID, rightID))
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return rangedesc.Range{}, fmt.Errorf("meta: merged range %d: %w", rightID, err)
		default:
			right, err := decodeRange(rkv)
			if err != nil {
				return rangedesc.Range{}, err
			}
			if !bytes.Equal(right.Start, start) || !bytes.Equal(right.End, end) {
				return rangedesc.Range{}, fmt.Errorf("%w: range %d is [%x, %x) in the table, not [%x, %x)", ErrConflict, rightID, right.Start, right.End, start, end)
			}
			if err := c.store.Delete(ctx, rkv.Key, rkv.Rev); errors.Is(err, ErrConflict) {
				continue
			} else if err != nil {
				return rangedesc.Range{}, fmt.Errorf("meta: delete merged range %d: %w", rightID, err)
			}
		}
		kv, err := c.store.Get(ctx, rangeKey(spaceID, leftID))
		if err != nil {
			return rangedesc.Range{}, fmt.Errorf("meta: range %d: %w", leftID, err)
		}
		cur, err := decodeRange(kv)
		if err != nil {
			return rangedesc.Range{}, err
		}
		if bytes.Equal(cur.End, end) {
			return cur, nil
		}
		if !bytes.Equal(cur.End, start) {
			return rangedesc.Range{}, fmt.Errorf("%w: range %d ends at %x in the table, not at %x where range %d started", ErrConflict, leftID, cur.End, start, rightID)
		}
		cur.End = slices.Clone(end)
		cur.Epoch++
		if _, err := c.store.Put(ctx, kv.Key, encodeRange(cur), kv.Rev); errors.Is(err, ErrConflict) {
			continue // a membership change raced: read again
		} else if err != nil {
			return rangedesc.Range{}, fmt.Errorf("meta: range %d: %w", leftID, err)
		}
		return cur, nil
	}
	return rangedesc.Range{}, fmt.Errorf("%w: range %d kept changing while its merge was recorded", ErrConflict, leftID)
}

// SetRangeMembers records new voters and learners for range r, whose
// descriptor must still be at r.Epoch (else ErrConflict: someone else
// changed it), and returns the descriptor at the next epoch.
func (c *Catalog) SetRangeMembers(ctx context.Context, r rangedesc.Range, voters, learners []uint64) (rangedesc.Range, error) {
	if len(voters) == 0 {
		return rangedesc.Range{}, errors.New("meta: a range needs at least one voter")
	}
	kv, err := c.store.Get(ctx, rangeKey(r.SpaceID, r.ID))
	if err != nil {
		return rangedesc.Range{}, fmt.Errorf("meta: range %d: %w", r.ID, err)
	}
	cur, err := decodeRange(kv)
	if err != nil {
		return rangedesc.Range{}, err
	}
	if cur.Epoch != r.Epoch {
		return rangedesc.Range{}, fmt.Errorf("%w: range %d is at epoch %d, not %d", ErrConflict, r.ID, cur.Epoch, r.Epoch)
	}
	cur.Replicas, cur.Learners = slices.Clone(voters), slices.Clone(learners)
	if len(cur.Learners) == 0 {
		cur.Learners = nil
	}
	cur.Epoch++
	if _, err := c.store.Put(ctx, kv.Key, encodeRange(cur), kv.Rev); err != nil {
		return rangedesc.Range{}, fmt.Errorf("meta: range %d: %w", r.ID, err)
	}
	return cur, nil
}

// validBounds checks that bounds are non-empty, each [Start, End) non-empty,
// in order and not overlapping, with a nil End only in the last.
func validBounds(bounds [][2][]byte) error {
	if len(bounds) == 0 {
		return errors.New("meta: no range bounds")
	}
	for i, b := range bounds {
		if b[1] == nil {
			if i != len(bounds)-1 {
				return fmt.Errorf("meta: range %d has an open end but is not the last", i)
			}
		} else if bytes.Compare(b[0], b[1]) >= 0 {
			return fmt.Errorf("meta: range %d is empty: start %q >= end %q", i, b[0], b[1])
		}
		if i > 0 && bytes.Compare(bounds[i-1][1], b[0]) > 0 {
			return fmt.Errorf("meta: range %d starts at %q, before range %d ends at %q", i, b[0], i-1, bounds[i-1][1])
		}
	}
	return nil
}

// CreateRanges records one range per bound ([Start, End), sorted, not
// overlapping, a nil End only in the last) for space spaceID, each on the
// given replicas at epoch 1. Range IDs come from a counter and are never
// reused. See CreatePlacedRanges: a space's ranges are made once.
func (c *Catalog) CreateRanges(ctx context.Context, spaceID uint32, bounds [][2][]byte, replicas []uint64) ([]rangedesc.Range, error) {
	return c.CreatePlacedRanges(ctx, spaceID, bounds, func(uint64) []uint64 { return replicas })
}

// CreatePlacedRanges is CreateRanges with each range's replicas chosen by
// place from the range's id.
//
// It creates a space's ranges once, whoever asks and however often: the
// whole set is claimed with one conditional write (the space's layout key)
// before any range is written, so two nodes opening a new space at once
// make one set of ranges, not two that overlap; and a creation that
// stopped half-way is finished from the claimed layout by the next call.
// It returns the ranges of the claimed layout.
func (c *Catalog) CreatePlacedRanges(ctx context.Context, spaceID uint32, bounds [][2][]byte, place func(rangeID uint64) []uint64) ([]rangedesc.Range, error) {
	if err := validBounds(bounds); err != nil {
		return nil, err
	}
	if len(place(0)) == 0 {
		return nil, errors.New("meta: a range needs at least one replica")
	}
	var mine []rangedesc.Range // the layout this call would claim
	deadline := time.Now().Add(counterRetry)
	for {
		kv, err := c.store.Get(ctx, layoutKey(spaceID))
		if err == nil {
			l, err := decodeLayout(kv)
			if err != nil {
				return nil, err
			}
			return c.finishLayout(ctx, spaceID, l, kv.Rev)
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if mine == nil {
			first, err := c.allocIDs(ctx, keyRangeCounter, uint64(len(bounds)), ^uint64(0))
			if err != nil {
				return nil, err
			}
			for i, b := range bounds {
				r := rangedesc.Range{
					ID:       first + uint64(i),
					SpaceID:  spaceID,
					Start:    append([]byte{}, b[0]...),
					Replicas: append([]uint64(nil), place(first+uint64(i))...),
					Epoch:    1,
				}
				if b[1] != nil {
					r.End = append([]byte{}, b[1]...)
				}
				mine = append(mine, r)
			}
		}
		_, err = c.store.Put(ctx, layoutKey(spaceID), encodeLayout(layout{Ranges: mine}), 0)
		if err == nil || errors.Is(err, ErrConflict) {
			continue // read what was claimed: this layout or another's
		}
		if retry, werr := againAfterUnknown(ctx, err, deadline); werr != nil {
			return nil, werr
		} else if !retry {
			return nil, err
		}
	}
}

// finishLayout writes the ranges of a claimed layout that are not written
// yet, marks it done, and returns them.
func (c *Catalog) finishLayout(ctx context.Context, spaceID uint32, l layout, rev int64) ([]rangedesc.Range, error) {
	if !l.Done {
		for _, r := range l.Ranges {
			if _, err := c.store.Put(ctx, rangeKey(spaceID, r.ID), encodeRange(r), 0); err != nil && !errors.Is(err, ErrConflict) {
				return nil, fmt.Errorf("meta: create range %d: %w", r.ID, err)
			}
		}
		l.Done = true
		if _, err := c.store.Put(ctx, layoutKey(spaceID), encodeLayout(l), rev); err != nil && !errors.Is(err, ErrConflict) {
			return nil, fmt.Errorf("meta: record the ranges of space %d as made: %w", spaceID, err)
		}
	}
	return c.SpaceRanges(ctx, spaceID)
}

// layout is a space's first ranges as claimed at its creation.
type layout struct {
	Ranges []rangedesc.Range
	Done   bool // every range was written
}

type layoutRecord struct {
	V      int           `json:"v"`
	Ranges []rangeRecord `json:"ranges"`
	Done   bool          `json:"done,omitempty"`
}

func encodeLayout(l layout) []byte {
	rec := layoutRecord{V: formatVersionOne, Done: l.Done}
	for _, r := range l.Ranges {
		rec.Ranges = append(rec.Ranges, recordOf(r))
	}
	b, _ := json.Marshal(rec)
	return b
}

func decodeLayout(kv KV) (layout, error) {
	var rec layoutRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		return layout{}, fmt.Errorf("meta: decode %s: %w", kv.Key, err)
	}
	if rec.V != formatVersionOne {
		return layout{}, fmt.Errorf("meta: %s has format version %d, want %d", kv.Key, rec.V, formatVersionOne)
	}
	l := layout{Done: rec.Done}
	for _, r := range rec.Ranges {
		l.Ranges = append(l.Ranges, r.desc())
	}
	return l, nil
}

// ListRanges returns every range of every space, ordered by space ID, then
// range ID.
func (c *Catalog) ListRanges(ctx context.Context) ([]rangedesc.Range, error) {
	return c.listRanges(ctx, keyRangePrefix)
}

// SpaceRanges returns the ranges of space spaceID, sorted by Start.
func (c *Catalog) SpaceRanges(ctx context.Context, spaceID uint32) ([]rangedesc.Range, error) {
	out, err := c.listRanges(ctx, spaceRangePrefix(spaceID))
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Start, out[j].Start) < 0 })
	return out, nil
}

func (c *Catalog) listRanges(ctx context.Context, prefix string) ([]rangedesc.Range, error) {
	kvs, err := c.store.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make([]rangedesc.Range, 0, len(kvs))
	for _, kv := range kvs {
		r, err := decodeRange(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// DeleteRanges removes every range of space spaceID, unconditionally.
func (c *Catalog) DeleteRanges(ctx context.Context, spaceID uint32) error {
	kvs, err := c.store.List(ctx, spaceRangePrefix(spaceID))
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		if err := c.store.Delete(ctx, kv.Key, AnyRev); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("meta: delete range %s: %w", kv.Key, err)
		}
	}
	// The layout goes last: while it is there (done), no open of the
	// space makes its ranges again.
	if err := c.store.Delete(ctx, layoutKey(spaceID), AnyRev); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("meta: delete the layout of space %d: %w", spaceID, err)
	}
	return nil
}
