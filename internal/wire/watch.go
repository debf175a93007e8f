package wire

import (
	"context"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// WATCH returns a page of a space's committed changes after a cursor
// (object.Store.Watch), waiting up to a bound for a first one.

// MaxWatchWait bounds a WATCH's wait.
const MaxWatchWait = 30 * time.Second

// AppendWatchRequest encodes a WATCH request: space, cursor (strings),
// from (u64), limit (u32), wait in milliseconds (u32).
func AppendWatchRequest(b []byte, r *object.WatchRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Cursor)
	b = appendU64(b, r.From)
	b = appendU32(b, uint32(max(r.Limit, 0)))
	return appendU32(b, uint32(r.Wait.Milliseconds()))
}

// DecodeWatchRequest decodes a WATCH request.
func DecodeWatchRequest(b []byte) (object.WatchRequest, error) {
	d := newDecoder(b)
	r := object.WatchRequest{Space: d.str("space"), Cursor: d.str("cursor"), From: d.u64("from"), Limit: int(d.u32("limit")),
		Wait: time.Duration(d.u32("wait")) * time.Millisecond}
	if err := d.done(); err != nil {
		return object.WatchRequest{}, err
	}
	if r.Wait > MaxWatchWait {
		return object.WatchRequest{}, Errorf(CodeInvalidArgument, "a watch waits at most %v", MaxWatchWait)
	}
	return r, nil
}

// AppendWatchResult encodes a WATCH answer: next (str), closed (u64),
// more (u8), then a uvarint count of events: key (str), version (u64),
// flags (u8: 1 delete marker).
func AppendWatchResult(b []byte, res *object.WatchResult) []byte {
	b = appendStr(b, res.Next)
	b = appendU64(b, res.Closed)
	b = appendBool(b, res.More)
	b = appendUvarint(b, uint64(len(res.Events)))
	for _, ev := range res.Events {
		b = appendStr(b, ev.Key)
		b = appendU64(b, ev.Version)
		b = appendBool(b, ev.DeleteMarker)
	}
	return b
}

// DecodeWatchResult decodes a WATCH answer.
func DecodeWatchResult(b []byte) (object.WatchResult, error) {
	d := newDecoder(b)
	res := object.WatchResult{Next: d.str("next"), Closed: d.u64("closed"), More: d.boolean("more")}
	n := d.count(10, "event count")
	res.Events = make([]object.WatchEvent, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		res.Events = append(res.Events, object.WatchEvent{Key: d.str("key"), Version: d.u64("version"), DeleteMarker: d.boolean("delete marker")})
	}
	if err := d.done(); err != nil {
		return object.WatchResult{}, err
	}
	return res, nil
}

// watchOp serves WATCH, under the read grant on the space.
func (c *serverConn) watchOp(ctx context.Context, buf, body []byte) ([]byte, error) {
	w, ok := c.s.svc.(object.Watcher)
	if !ok {
		return nil, Errorf(CodeUnknownOp, "this server serves no watches")
	}
	r, err := DecodeWatchRequest(body)
	if err != nil {
		return nil, err
	}
	if e := c.allow(r.Space, auth.Read); e != nil {
		return nil, e
	}
	res, err := w.Watch(ctx, &r)
	if err != nil {
		return nil, err
	}
	return AppendWatchResult(buf, &res), nil
}

// Watch sends a WATCH request.
func (c *Conn) Watch(ctx context.Context, r *object.WatchRequest) (object.WatchResult, error) {
	b, err := c.Call(ctx, OpWatch, AppendWatchRequest(nil, r))
	if err != nil {
		return object.WatchResult{}, err
	}
	return DecodeWatchResult(b)
}
