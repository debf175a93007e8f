package wire

import (
	"context"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// FOLLOW reads a document and the objects its references reach, to a
// depth, as of one snapshot, in one round trip (object.Store.Follow).

// AppendFollowRequest encodes a FOLLOW request: space, key (strings),
// version, as-of (u64) and depth (u8).
func AppendFollowRequest(b []byte, r *object.FollowRequest) []byte {
	b = appendStr(b, r.Space)
	b = appendStr(b, r.Key)
	b = appendU64(b, r.Version)
	b = appendU64(b, r.AsOf)
	return append(b, byte(r.Depth))
}

// DecodeFollowRequest decodes a FOLLOW request.
func DecodeFollowRequest(b []byte) (object.FollowRequest, error) {
	d := newDecoder(b)
	r := object.FollowRequest{Space: d.str("space"), Key: d.str("key"), Version: d.u64("version"), AsOf: d.u64("as of"), Depth: int(d.u8("depth"))}
	if err := d.done(); err != nil {
		return object.FollowRequest{}, err
	}
	return r, nil
}

// AppendFollowResult encodes a FOLLOW answer: the snapshot (u64),
// truncated (u8), then each object: space, key (strings), depth (u8),
// code (u16), and for code 0 its ObjectInfo and data (bytes), else a
// message (string).
func AppendFollowResult(b []byte, res *object.FollowResult, code func(error) *Error) []byte {
	b = appendU64(b, res.At)
	if res.Truncated {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendUvarint(b, uint64(len(res.Objects)))
	for i := range res.Objects {
		o := &res.Objects[i]
		b = appendStr(b, o.Space)
		b = appendStr(b, o.Key)
		b = append(b, byte(o.Depth))
		if o.Err != nil {
			e := code(o.Err)
			b = appendU16(b, uint16(e.Code))
			b = appendStr(b, e.Message)
			continue
		}
		b = appendU16(b, 0)
		b = AppendObjectInfo(b, &o.Info)
		b = appendBytes(b, o.Data)
	}
	return b
}

// DecodeFollowResult decodes a FOLLOW answer; an object's error is an
// *Error.
func DecodeFollowResult(b []byte) (object.FollowResult, error) {
	d := newDecoder(b)
	res := object.FollowResult{At: d.u64("at"), Truncated: d.u8("truncated") == 1}
	n := d.count(6, "object count")
	res.Objects = make([]object.Followed, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		o := object.Followed{Space: d.str("space"), Key: d.str("key"), Depth: int(d.u8("depth"))}
		if c := Code(d.u16("code")); c != CodeOK {
			o.Err = &Error{Code: c, Message: d.str("message")}
		} else {
			o.Info = d.objectInfo()
			o.Data = d.bytes("data")
			if o.Data == nil {
				o.Data = []byte{}
			}
		}
		res.Objects = append(res.Objects, o)
	}
	if err := d.done(); err != nil {
		return object.FollowResult{}, err
	}
	return res, nil
}

// followOp serves FOLLOW: the read grant on the first object's space; a
// reference into a space the key may not read is answered as denied.
// Bodies fill at most half a frame: the rest of the answer is the
// objects' info.
func (c *serverConn) followOp(ctx context.Context, buf, body []byte) ([]byte, error) {
	f, ok := c.s.svc.(object.Follower)
	if !ok {
		return nil, Errorf(CodeUnknownOp, "this server follows no references")
	}
	r, err := DecodeFollowRequest(body)
	if err != nil {
		return nil, err
	}
	r.Budget = int64(c.s.opts.MaxFrame / 2)
	allow := func(space string) error {
		if e := c.allow(space, auth.Read); e != nil {
			return e
		}
		return nil
	}
	res, err := f.Follow(ctx, &r, allow)
	if err != nil {
		return nil, err
	}
	return AppendFollowResult(buf, &res, c.asError), nil
}

// Follow sends a FOLLOW request.
func (c *Conn) Follow(ctx context.Context, r *object.FollowRequest) (object.FollowResult, error) {
	b, err := c.Call(ctx, OpFollow, AppendFollowRequest(nil, r))
	if err != nil {
		return object.FollowResult{}, err
	}
	return DecodeFollowResult(b)
}
