package rangeclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/rangedesc"
)

// RefsMax bounds the chunks one Refs call asks about.
const RefsMax = 1 << 16

// Refs reports which of cands the versions and locks of space's ranges in
// t reference: the chunk collector's mark. Each range answers from its
// leaseholder, from one point-in-time view of its keys (a version and the
// lock it was committed from are never both missed), so a chunk any
// version committed before the call referenced, and that still does, is
// reported. done, if set, is called after each range with the ranges
// read so far.
func (c *Client) Refs(ctx context.Context, t *Table, space uint32, cands []chunk.Hash, done func(ranges int)) (map[chunk.Hash]bool, error) {
	if len(cands) > RefsMax {
		return nil, fmt.Errorf("rangeclient: %d chunks in one Refs call (at most %d)", len(cands), RefsMax)
	}
	want := make(map[chunk.Hash]bool, len(cands))
	for _, h := range cands {
		want[h] = true
	}
	req := chunk.AppendHashes(nil, cands)
	found := map[chunk.Hash]bool{}
	lo, hi := keys.SpaceStart(space), keys.SpaceEnd(space)
	for cursor, n := lo, 0; ; n++ {
		var (
			got []chunk.Hash
			end []byte
		)
		err := c.OnRange(ctx, t, cursor, func(r *Range) error {
			var err error
			if r.LeaseHere(ctx) {
				got, end, err = c.refsOwned(r, cursor, hi, want)
				return err
			}
			b, err := c.forward(ctx, r, "Refs", AppendBytes(AppendOptBytes(AppendBytes(nil, cursor), hi), req))
			if errors.Is(err, errLeaseHere) {
				got, end, err = c.refsOwned(r, cursor, hi, want)
				return err
			}
			if err != nil {
				return err
			}
			d := NewDecoder(b)
			end = d.OptBytes()
			packed := d.Bytes()
			if err := d.Done(); err != nil {
				return err
			}
			got, err = chunk.ParseHashes(packed)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, h := range got {
			found[h] = true
		}
		if done != nil {
			done(n + 1)
		}
		if end == nil || (hi != nil && bytes.Compare(end, hi) >= 0) {
			return found, nil
		}
		cursor = end
	}
}

func (c *Client) handleRefs(_ context.Context, r *Range, req []byte) ([]byte, error) {
	d := NewDecoder(req)
	from, to, packed := d.Bytes(), d.OptBytes(), d.Bytes()
	if err := d.Done(); err != nil {
		return nil, err
	}
	cands, err := chunk.ParseHashes(packed)
	if err != nil || len(cands) > RefsMax {
		return nil, errorf(CodeMalformed, "refs request with %d bytes of hashes", len(packed))
	}
	want := make(map[chunk.Hash]bool, len(cands))
	for _, h := range cands {
		want[h] = true
	}
	got, end, err := c.refsOwned(r, from, to, want)
	if err != nil {
		return nil, err
	}
	return AppendBytes(AppendOptBytes(nil, end), chunk.AppendHashes(nil, got)), nil
}

// refsOwned reads which chunks of want the versions and locks of the local
// replica of r name, from from (which r must hold) to the range's end or
// to, whichever is first, and returns them with where it stopped (nil: the
// end of the keyspace).
func (c *Client) refsOwned(r *Range, from, to []byte, want map[chunk.Hash]bool) (found []chunk.Hash, end []byte, err error) {
	rep := r.Replica()
	before := rep.Descriptor()
	if !rep.Contains(from) {
		return nil, nil, errMoved(before.ID)
	}
	// One iterator over both spans reads one point-in-time view. It must
	// be of this very range: a split or a snapshot applied around its
	// opening sends the caller round again.
	end = before.End
	if end == nil || (to != nil && bytes.Compare(to, end) < 0) {
		end = to
	}
	llo, lhi := keys.LockSpan(from, end)
	vlo, vhi := keys.VersionSpan(from, end)
	it, err := c.cfg.DB.NewIter(&pebble.IterOptions{LowerBound: llo, UpperBound: vhi})
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	if after := rep.Descriptor(); !sameBounds(before, after) {
		return nil, nil, errMoved(before.ID)
	}
	seen := map[chunk.Hash]bool{}
	note := func(manifest []byte) error {
		if manifest == nil {
			return nil
		}
		m, err := chunk.UnmarshalManifest(manifest)
		if err != nil {
			return err
		}
		for _, ref := range m.Chunks {
			if want[ref.Hash] && !seen[ref.Hash] {
				seen[ref.Hash] = true
				found = append(found, ref.Hash)
			}
		}
		return nil
	}
	if err := scanSpan(it, vlo, vhi, func(k, v []byte) error {
		rec, err := mvcc.Unmarshal(v)
		if err != nil {
			return fmt.Errorf("version %x: %w", k, err)
		}
		return note(rec.Manifest)
	}); err != nil {
		return nil, nil, errorf(CodeCorrupt, "range %d: %v", before.ID, err)
	}
	if err := scanSpan(it, llo, lhi, func(k, v []byte) error {
		if _, _, record, err := keys.DecodeLock(k); err != nil || record {
			return err // a transaction's record names no chunk
		}
		l, err := mvcc.UnmarshalLock(v)
		if err != nil {
			return fmt.Errorf("lock %x: %w", k, err)
		}
		if l.Rec == nil {
			return nil
		}
		return note(l.Rec.Manifest)
	}); err != nil {
		return nil, nil, errorf(CodeCorrupt, "range %d: %v", before.ID, err)
	}
	return found, end, nil
}

func sameBounds(a, b rangedesc.Range) bool {
	return a.ID == b.ID && bytes.Equal(a.Start, b.Start) && bytes.Equal(a.End, b.End) && (a.End == nil) == (b.End == nil)
}

// scanSpan calls fn with every entry of it in [lo, hi).
func scanSpan(it *pebble.Iterator, lo, hi []byte, fn func(k, v []byte) error) error {
	for ok := it.SeekGE(lo); ok && bytes.Compare(it.Key(), hi) < 0; ok = it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}
