package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
)

// Change is one entry of a range's change feed: version TS of Obj was
// committed (a delete marker if DeleteMarker).
type Change struct {
	TS           uint64
	Obj          []byte
	DeleteMarker bool
}

// ChangesOptions select a page of a range's change feed: the entries of
// objects in [Lower, Upper) after (AfterTS, AfterObj) in (timestamp,
// object) order, with timestamps at most To; at most Limit.
type ChangesOptions struct {
	RangeID      uint64
	Lower, Upper []byte
	AfterTS      uint64
	AfterObj     []byte
	To           uint64
	Limit        int
}

// trimFeed drops the range's change entries older than before and raises
// its horizon to before.
func (m *StateMachine) trimFeed(b *pebble.Batch, before uint64) any {
	id := m.bounds.ID
	h, err := FeedHorizon(b, id)
	if err != nil {
		return err
	}
	if before <= h {
		return &Result{}
	}
	lo, _ := keys.ChangeSpan(id)
	if err := b.DeleteRange(lo, keys.AppendChangeEntry(nil, id, before, nil), nil); err != nil {
		return err
	}
	if err := b.Set(keys.FeedHorizon(id), binary.BigEndian.AppendUint64(nil, before), nil); err != nil {
		return err
	}
	return &Result{}
}

// FeedHorizon reads range id's change feed horizon (0: nothing trimmed).
func FeedHorizon(r pebble.Reader, id uint64) (uint64, error) {
	v, closer, err := r.Get(keys.FeedHorizon(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: feed horizon of range %d: %d bytes", mvcc.ErrCorrupt, id, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// setHorizon raises range id's horizon to at least h (a split's or a
// merge's).
func setHorizon(b *pebble.Batch, id, h uint64) error {
	cur, err := FeedHorizon(b, id)
	if err != nil || h <= cur {
		return err
	}
	return b.Set(keys.FeedHorizon(id), binary.BigEndian.AppendUint64(nil, h), nil)
}

// ReadChanges reads a page of a range's change feed; more is true when
// entries at or before To follow the page.
func ReadChanges(r pebble.Reader, o ChangesOptions) (out []Change, more bool, err error) {
	lo, hi := keys.ChangeSpan(o.RangeID)
	start := keys.AppendChangeEntry(nil, o.RangeID, o.AfterTS, o.AfterObj)
	if o.AfterObj == nil {
		start = keys.AppendChangeEntry(nil, o.RangeID, o.AfterTS+1, nil)
	}
	end := keys.AppendChangeEntry(nil, o.RangeID, o.To+1, nil)
	if o.To == ^uint64(0) {
		end = hi
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: end})
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	for ok := it.SeekGE(start); ok; ok = it.Next() {
		k := it.Key()
		if o.AfterObj != nil && bytes.Equal(k, start) {
			continue
		}
		_, ts, obj, err := keys.DecodeChangeEntry(k)
		if err != nil {
			return nil, false, fmt.Errorf("%w: change entry %x: %v", mvcc.ErrCorrupt, k, err)
		}
		if bytes.Compare(obj, o.Lower) < 0 || (o.Upper != nil && bytes.Compare(obj, o.Upper) >= 0) {
			continue // outside the span asked for
		}
		if o.Limit > 0 && len(out) == o.Limit {
			return out, true, it.Error()
		}
		v := it.Value()
		out = append(out, Change{TS: ts, Obj: bytes.Clone(obj), DeleteMarker: len(v) > 0 && v[0]&changeDeleteMarker != 0})
	}
	return out, false, it.Error()
}
