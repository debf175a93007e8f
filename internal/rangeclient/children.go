package rangeclient

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/keys"
)

// childrenMax bounds the children index entries one reply returns.
const childrenMax = 10000

// Children returns the objects the children index names as cloned from
// version ts of obj (at most childrenMax, in key order), from the
// leaseholder of obj's range in t. An entry is written before its clone
// commits: a caller checks each child's versions for one whose origin is
// obj at ts.
func (c *Client) Children(ctx context.Context, t *Table, obj []byte, ts uint64) (children [][]byte, err error) {
	err = c.OnRange(ctx, t, obj, func(r *Range) error {
		if r.LeaseHere(ctx) {
			children, err = c.childrenOwned(r, obj, ts)
			return err
		}
		req := binary.BigEndian.AppendUint64(nil, ts)
		req = append(req, obj...)
		b, err := c.forward(ctx, r, "Children", req)
		if errors.Is(err, errLeaseHere) {
			children, err = c.childrenOwned(r, obj, ts)
			return err
		}
		if err != nil {
			return err
		}
		d := NewDecoder(b)
		children = make([][]byte, d.Count32(4))
		for i := range children {
			children[i] = d.Bytes()
		}
		return d.Done()
	})
	return children, err
}

func (c *Client) handleChildren(_ context.Context, r *Range, req []byte) ([]byte, error) {
	if len(req) < 8 {
		return nil, errorf(CodeMalformed, "children request of %d bytes", len(req))
	}
	children, err := c.childrenOwned(r, req[8:], binary.BigEndian.Uint64(req))
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(len(children)))
	for _, ch := range children {
		out = AppendBytes(out, ch)
	}
	return out, nil
}

// childrenOwned reads the children index entries of obj at ts from the
// local replica of r, which must still hold obj.
func (c *Client) childrenOwned(r *Range, obj []byte, ts uint64) (_ [][]byte, err error) {
	rep := r.Replica()
	if !rep.Contains(obj) {
		return nil, errMoved(rep.Descriptor().ID)
	}
	r.Load.Note(obj)
	prefix := keys.ChildPrefix(obj, ts)
	it, err := c.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: keys.PrefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	var out [][]byte
	for ok := it.First(); ok && len(out) < childrenMax; ok = it.Next() {
		_, _, child, err := keys.DecodeChild(it.Key())
		if err != nil {
			return nil, errorf(CodeCorrupt, "children index key %x: %v", it.Key(), err)
		}
		out = append(out, slices.Clone(child))
	}
	return out, it.Error()
}
