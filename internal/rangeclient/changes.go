package rangeclient

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
)

// ChangesRequest is one range's part of a watch: the change feed entries
// of objects in [Lower, Upper) after (AfterTS, AfterObj), with timestamps
// at most To (required), at most Limit.
type ChangesRequest struct {
	Lower, Upper []byte
	AfterTS      uint64
	AfterObj     []byte
	To           uint64
	Limit        int
}

// ChangesPage is a page of a range's change feed.
type ChangesPage struct {
	Changes []kv.Change
	More    bool
}

// Changes reads r's change feed on its leaseholder, after the range's
// timestamp guard at To: no version at or before To that is not in the
// page can appear later, except one of a transaction whose lock is in
// the span — a *LockedError names those locks (at most lockedMax), as a
// listing does, and the caller settles them or reads again below them.
func (c *Client) Changes(ctx context.Context, r *Range, o ChangesRequest) (ChangesPage, error) {
	if r.LeaseHere(ctx) {
		return c.changesOwned(ctx, r, o)
	}
	req := binary.BigEndian.AppendUint64(nil, o.AfterTS)
	req = binary.BigEndian.AppendUint64(req, o.To)
	req = binary.BigEndian.AppendUint32(req, uint32(max(o.Limit, 0)))
	req = AppendOptBytes(req, o.Lower)
	req = AppendOptBytes(req, o.Upper)
	req = AppendOptBytes(req, o.AfterObj)
	b, err := c.forward(ctx, r, "Changes", req)
	if errors.Is(err, errLeaseHere) {
		return c.changesOwned(ctx, r, o)
	}
	if err != nil {
		return ChangesPage{}, err
	}
	return decodeChangesPage(b)
}

func (c *Client) handleChanges(ctx context.Context, r *Range, req []byte) ([]byte, error) {
	d := NewDecoder(req)
	o := ChangesRequest{AfterTS: d.U64(), To: d.U64(), Limit: int(d.U32())}
	o.Lower, o.Upper, o.AfterObj = d.OptBytes(), d.OptBytes(), d.OptBytes()
	if err := d.Done(); err != nil {
		return nil, err
	}
	p, err := c.changesOwned(ctx, r, o)
	if err != nil {
		return nil, err
	}
	b := appendPage(nil, p.More, len(p.Changes))
	for _, ch := range p.Changes {
		b = binary.BigEndian.AppendUint64(b, ch.TS)
		b = AppendBytes(b, ch.Obj)
		flag := byte(0)
		if ch.DeleteMarker {
			flag = 1
		}
		b = append(b, flag)
	}
	return b, nil
}

func decodeChangesPage(b []byte) (ChangesPage, error) {
	d := NewDecoder(b)
	var p ChangesPage
	p.More = d.U8() == 1
	p.Changes = make([]kv.Change, d.Count32(13))
	for i := range p.Changes {
		p.Changes[i] = kv.Change{TS: d.U64(), Obj: d.Bytes(), DeleteMarker: d.U8() == 1}
	}
	return p, d.Done()
}

// changesOwned reads a range's change feed on its leaseholder: the
// guard, the locks, then the feed (as listOwned lists).
func (c *Client) changesOwned(ctx context.Context, r *Range, o ChangesRequest) (ChangesPage, error) {
	rep := r.Replica()
	if !rep.ContainsSpan(o.Lower, o.Upper) {
		return ChangesPage{}, errMoved(rep.Descriptor().ID)
	}
	if o.To == 0 {
		return ChangesPage{}, errorf(CodeMalformed, "a watch without a timestamp")
	}
	if err := c.guard(rep.Descriptor().ID).read(ctx, rep.Status().Term, o.To); err != nil {
		return ChangesPage{}, err
	}
	r.Load.Add()
	rd := kv.Reader{R: c.cfg.DB}
	locks, err := mvcc.Locks(rd, o.Lower, o.Upper, o.To, lockedMax)
	if err != nil {
		return ChangesPage{}, c.corrupt(err)
	}
	if len(locks) > 0 {
		return ChangesPage{}, &LockedError{Locks: locks}
	}
	changes, more, err := kv.ReadChanges(c.cfg.DB, kv.ChangesOptions{RangeID: rep.Descriptor().ID, Lower: o.Lower, Upper: o.Upper,
		AfterTS: o.AfterTS, AfterObj: o.AfterObj, To: o.To, Limit: o.Limit})
	if err != nil {
		return ChangesPage{}, c.corrupt(err)
	}
	// The horizon after the read: a trim deletes entries and raises it in
	// one batch, so one that committed before the read shows here.
	h, err := kv.FeedHorizon(c.cfg.DB, rep.Descriptor().ID)
	if err != nil {
		return ChangesPage{}, c.corrupt(err)
	}
	if o.AfterObj == nil && o.AfterTS+1 < h || o.AfterObj != nil && o.AfterTS < h {
		return ChangesPage{}, errorf(CodeCursorExpired, "the range's changes before %d are no longer kept (the cursor is at %d): start again from now", h, o.AfterTS)
	}
	// The span again: a split that moved entries away committed after
	// the check above would leave this page short.
	if !rep.ContainsSpan(o.Lower, o.Upper) {
		return ChangesPage{}, errMoved(rep.Descriptor().ID)
	}
	return ChangesPage{Changes: changes, More: more}, nil
}
