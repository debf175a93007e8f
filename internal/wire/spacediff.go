package wire

import (
	"context"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// AppendSpaceDiffRequest encodes a DIFF_SPACES request: from, to,
// prefix, start-after (strings) and the page limit (u32).
func AppendSpaceDiffRequest(b []byte, r *object.SpaceDiffRequest) []byte {
	b = appendStr(b, r.From)
	b = appendStr(b, r.To)
	b = appendStr(b, r.Prefix)
	b = appendStr(b, r.StartAfter)
	return appendU32(b, r.Limit)
}

// DecodeSpaceDiffRequest decodes a DIFF_SPACES request.
func DecodeSpaceDiffRequest(b []byte) (object.SpaceDiffRequest, error) {
	d := newDecoder(b)
	r := object.SpaceDiffRequest{From: d.str("from"), To: d.str("to"), Prefix: d.str("prefix"), StartAfter: d.str("start-after"), Limit: d.u32("limit")}
	if err := d.done(); err != nil {
		return object.SpaceDiffRequest{}, err
	}
	return r, nil
}

// Key change codes in a DIFF_SPACES answer.
var keyChangeCodes = map[string]uint8{object.KeyAdded: 1, object.KeyRemoved: 2, object.KeyChanged: 3}

// AppendSpaceDiff encodes a DIFF_SPACES answer: truncated (u8), next
// (string), then the changes: key, change (1 added, 2 removed, 3
// changed), and each side's object info where it has the key.
func AppendSpaceDiff(b []byte, df *object.SpaceDiff) []byte {
	if df.Truncated {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendStr(b, df.Next)
	b = appendUvarint(b, uint64(len(df.Changes)))
	for i := range df.Changes {
		c := &df.Changes[i]
		b = appendStr(b, c.Key)
		b = append(b, keyChangeCodes[c.Change])
		if c.From != nil {
			b = AppendObjectInfo(b, c.From)
		}
		if c.To != nil {
			b = AppendObjectInfo(b, c.To)
		}
	}
	return b
}

// DecodeSpaceDiff decodes a DIFF_SPACES answer.
func DecodeSpaceDiff(b []byte) (object.SpaceDiff, error) {
	d := newDecoder(b)
	df := object.SpaceDiff{Truncated: d.u8("truncated") == 1, Next: d.str("next"), Changes: []object.KeyChange{}}
	n := d.count(2+minObjectInfo, "change count")
	for i := 0; i < n && d.Err() == nil; i++ {
		c := object.KeyChange{Key: d.str("key")}
		code := d.u8("change")
		if code == 2 || code == 3 { // removed or changed: From
			info := d.objectInfo()
			c.From = &info
		}
		if code == 1 || code == 3 { // added or changed: To
			info := d.objectInfo()
			c.To = &info
		}
		switch code {
		case 1:
			c.Change = object.KeyAdded
		case 2:
			c.Change = object.KeyRemoved
		case 3:
			c.Change = object.KeyChanged
		default:
			d.fail("key change")
		}
		df.Changes = append(df.Changes, c)
	}
	if err := d.done(); err != nil {
		return object.SpaceDiff{}, err
	}
	return df, nil
}

// diffSpacesOp serves DIFF_SPACES: the read grant on both sides.
func (c *serverConn) diffSpacesOp(ctx context.Context, buf, body []byte) ([]byte, error) {
	sd, ok := c.s.svc.(object.SpaceDiffer)
	if !ok {
		return nil, Errorf(CodeUnknownOp, "this server compares no spaces")
	}
	r, err := DecodeSpaceDiffRequest(body)
	if err != nil {
		return nil, err
	}
	for _, sp := range []string{r.From, r.To} {
		if e := c.allow(sp, auth.Read); e != nil {
			return nil, e
		}
	}
	df, err := sd.DiffSpaces(ctx, &r)
	if err != nil {
		return nil, err
	}
	return AppendSpaceDiff(buf, &df), nil
}

// DiffSpaces sends a DIFF_SPACES request.
func (c *Conn) DiffSpaces(ctx context.Context, r *object.SpaceDiffRequest) (object.SpaceDiff, error) {
	b, err := c.Call(ctx, OpDiffSpaces, AppendSpaceDiffRequest(nil, r))
	if err != nil {
		return object.SpaceDiff{}, err
	}
	return DecodeSpaceDiff(b)
}
