package kv

import (
	"bytes"
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
