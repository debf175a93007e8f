package rangeclient

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"github.com/cockroachdb/pebble/v2"
	"slices"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/query"
)

// QueryRequest is one range's part of a query: its span, after
// StartAfter, at AsOf (required), the filter's source (the range compiles
// it and plans its own index access).
type QueryRequest struct {
	Lower, Upper, StartAfter []byte
	AsOf                     uint64
	Limit, Examine           int
	Docs                     bool
	Filter                   string
}

// Query runs r's part of a query on its leaseholder: the filter runs
// next to the data, on the candidates the range's index names. Keys
// locked by transactions that may cover the query fail it with a
// *LockedError, as a listing.
func (c *Client) Query(ctx context.Context, r *Range, o QueryRequest) (kv.QueryPage, error) {
	if r.LeaseHere(ctx) {
		return c.queryOwned(ctx, r, o)
	}
	req := binary.BigEndian.AppendUint64(nil, o.AsOf)
	req = binary.BigEndian.AppendUint32(req, uint32(max(o.Limit, 0)))
	req = binary.BigEndian.AppendUint32(req, uint32(max(o.Examine, 0)))
	flags := byte(0)
	if o.Docs {
		flags |= 1
	}
	req = append(req, flags)
	req = AppendOptBytes(req, o.Lower)
	req = AppendOptBytes(req, o.Upper)
	req = AppendOptBytes(req, o.StartAfter)
	req = AppendBytes(req, []byte(o.Filter))
	b, err := c.forward(ctx, r, "Query", req)
	if errors.Is(err, errLeaseHere) {
		return c.queryOwned(ctx, r, o)
	}
	if err != nil {
		return kv.QueryPage{}, err
	}
	return decodeQueryPage(b)
}

func (c *Client) handleQuery(ctx context.Context, r *Range, req []byte) ([]byte, error) {
	d := NewDecoder(req)
	o := QueryRequest{AsOf: d.U64(), Limit: int(d.U32()), Examine: int(d.U32())}
	o.Docs = d.U8()&1 != 0
	o.Lower, o.Upper, o.StartAfter = d.OptBytes(), d.OptBytes(), d.OptBytes()
	o.Filter = string(d.Bytes())
	if err := d.Done(); err != nil {
		return nil, err
	}
	p, err := c.queryOwned(ctx, r, o)
	if err != nil {
		return nil, err
	}
	return appendQueryPage(nil, p), nil
}

// queryOwned runs a query on a range the local replica must still hold,
// after its timestamp guard, as listOwned lists.
func (c *Client) queryOwned(ctx context.Context, r *Range, o QueryRequest) (kv.QueryPage, error) {
	q, err := query.Cached(o.Filter)
	if err != nil {
		return kv.QueryPage{}, errorf(CodeMalformed, "%v", err)
	}
	rep := r.Replica()
	if !rep.ContainsSpan(o.Lower, o.Upper) {
		return kv.QueryPage{}, errMoved(rep.Descriptor().ID)
	}
	if o.AsOf == 0 {
		return kv.QueryPage{}, errorf(CodeMalformed, "a query without a timestamp")
	}
	if err := c.guard(rep.Descriptor().ID).read(ctx, rep.Status().Term, o.AsOf); err != nil {
		return kv.QueryPage{}, err
	}
	r.Load.Add()
	// One view of the node's state for the locks, the declarations and
	// the index, taken before the span is checked again: a split or
	// merge moves index entries to another range id in the batch that
	// changes the bounds, and the bounds change before that batch
	// commits, so a view taken before a check that passes holds the
	// entries under this range's id.
	db := pebble.Reader(c.cfg.DB)
	if sn, ok := c.cfg.DB.(interface{ NewSnapshot() *pebble.Snapshot }); ok {
		snap := sn.NewSnapshot()
		defer snap.Close()
		db = snap
		if !rep.ContainsSpan(o.Lower, o.Upper) {
			return kv.QueryPage{}, errMoved(rep.Descriptor().ID)
		}
	}
	rd := kv.Reader{R: db}
	lower := o.Lower
	if o.StartAfter != nil && bytes.Compare(o.StartAfter, lower) > 0 {
		lower = o.StartAfter
	}
	// The locks first, then the records (as listOwned): the index holds
	// committed versions only, so a transaction that may have committed
	// at or before AsOf but is not resolved here must be settled first.
	locks, err := mvcc.Locks(rd, lower, o.Upper, o.AsOf, lockedMax)
	if err != nil {
		return kv.QueryPage{}, c.corrupt(err)
	}
	p, err := kv.RunQuery(db, kv.QueryOptions{RangeID: rep.Descriptor().ID, Lower: o.Lower, Upper: o.Upper,
		StartAfter: o.StartAfter, AsOf: o.AsOf, Limit: o.Limit, Examine: o.Examine, Docs: o.Docs, Query: q})
	if err != nil {
		return kv.QueryPage{}, c.corrupt(err)
	}
	if p.More {
		end := keys.PrefixEnd(p.Resume)
		locks = slices.DeleteFunc(locks, func(l mvcc.LockEntry) bool { return bytes.Compare(l.Obj, end) >= 0 })
	}
	if len(locks) > 0 {
		return kv.QueryPage{}, &LockedError{Locks: locks}
	}
	return p, nil
}

func appendQueryPage(b []byte, p kv.QueryPage) []byte {
	b = appendPage(b, p.More, len(p.Entries))
	for _, e := range p.Entries {
		b = AppendBytes(b, e.Obj)
		b = AppendRecord(b, e.Rec)
	}
	b = AppendOptBytes(b, p.Resume)
	b = binary.BigEndian.AppendUint32(b, uint32(p.Examined))
	if p.Indexed {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return AppendBytes(b, []byte(p.Plan))
}

func decodeQueryPage(b []byte) (kv.QueryPage, error) {
	d := NewDecoder(b)
	var p kv.QueryPage
	p.More = d.U8() == 1
	p.Entries = make([]mvcc.Entry, d.Count32(12))
	for i := range p.Entries {
		p.Entries[i].Obj = d.Bytes()
		p.Entries[i].Rec = d.Record()
	}
	p.Resume = d.OptBytes()
	p.Examined = int(d.U32())
	p.Indexed = d.U8() == 1
	p.Plan = string(d.Bytes())
	return p, d.Done()
}
