package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/rangeclient"
)

// Field indexes: the catalog lists a space's declarations and their
// builds; the ranges keep their own declarations and entries (package
// kv, fields.go). A build declares the index on every range of the space
// (from then on every write indexes its document), fills in the versions
// written before, a chunk of keys per command, then marks every range
// ready, and the catalog.

// indexFillKeys is how many objects one fill command reads.
const indexFillKeys = 512

// indexBuilds are the builds this node runs, by space id and path, so
// that adding an index twice at once runs one build.
type indexBuilds struct {
	mu      sync.Mutex
	running map[string]bool
}

// fieldPath checks a user's doc.PATH and returns PATH.
func fieldPath(p string) (string, error) {
	path, ok := strings.CutPrefix(p, "doc.")
	if !ok {
		return "", object.Errorf(object.InvalidArgument, "field %q: name a document field as doc.PATH", p)
	}
	if err := kv.CheckFieldPath(path); err != nil {
		return "", object.Errorf(object.InvalidArgument, "%v", err)
	}
	return path, nil
}

// indexSpace acquires a space that can have field indexes: not a branch
// nor a snapshot.
func (n *Node) indexSpace(ctx context.Context, name string) (*space, func(), error) {
	s, release, err := n.acquire(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if s.readAt != 0 || s.meta.Branch() {
		release()
		return nil, nil, object.Errorf(object.InvalidArgument, "%q is a snapshot or a branch: field indexes belong to spaces", name)
	}
	return s, release, nil
}

// AddIndex implements object.IndexManager.
func (n *Node) AddIndex(ctx context.Context, name, field, typ string) error {
	path, err := fieldPath(field)
	if err != nil {
		return err
	}
	t, err := kv.ParseFieldType(typ)
	if err != nil {
		return object.Errorf(object.InvalidArgument, "%v", err)
	}
	s, release, err := n.indexSpace(ctx, name)
	if err != nil {
		return err
	}
	defer release()
	ready := false
	_, err = n.catalog.UpdateIndexes(ctx, name, func(ixs []meta.FieldIndex) ([]meta.FieldIndex, error) {
		i := slices.IndexFunc(ixs, func(x meta.FieldIndex) bool { return x.Path == field })
		switch {
		case i < 0:
			return append(ixs, meta.FieldIndex{Path: field, Type: typ, State: meta.IndexBuilding, Created: n.cfg.Clock().UTC()}), nil
		case ixs[i].Type != typ:
			return nil, object.Errorf(object.InvalidArgument, "%s is indexed as a %s: drop that index first", field, ixs[i].Type)
		}
		ready = ixs[i].State == meta.IndexReady
		ixs[i].Error = ""
		return ixs, nil
	})
	if err := catalogErr(name, err); err != nil {
		return err
	}
	// Declared on every range before this returns: a write that follows
	// indexes its document.
	if err := n.eachRange(ctx, s, func(r *rangeclient.Range, start, end []byte) ([]byte, error) {
		_, err := n.rc.ProposeAt(ctx, r, (&kv.IndexCmd{Op: kv.IndexDeclare, Start: start, End: end, Path: path, Type: t}).Encode())
		return nil, err
	}); err != nil {
		return object.FromRange(err)
	}
	if ready {
		// Built: declared again above (cheap, and it repairs a range a
		// failed drop left without it), not filled again.
		return nil
	}
	key := fmt.Sprintf("%d/%s", s.ID(), path)
	n.builds.mu.Lock()
	if n.builds.running == nil {
		n.builds.running = map[string]bool{}
	}
	already := n.builds.running[key]
	n.builds.running[key] = true
	n.builds.mu.Unlock()
	if !already {
		n.Go(func(bg context.Context) {
			defer func() {
				n.builds.mu.Lock()
				delete(n.builds.running, key)
				n.builds.mu.Unlock()
			}()
			n.buildIndex(bg, name, field, path)
		})
	}
	return nil
}

// buildIndex fills a declared index on every range, marks them ready,
// and records the build's progress and end in the catalog.
func (n *Node) buildIndex(ctx context.Context, name, field, path string) {
	s, release, err := n.indexSpace(ctx, name)
	if err != nil {
		n.log.Warn("field index build: the space is gone", "space", name, "field", field, "err", err)
		return
	}
	defer release()
	record := func(f func(ix *meta.FieldIndex)) {
		_, err := n.catalog.UpdateIndexes(ctx, name, func(ixs []meta.FieldIndex) ([]meta.FieldIndex, error) {
			if i := slices.IndexFunc(ixs, func(x meta.FieldIndex) bool { return x.Path == field }); i >= 0 {
				f(&ixs[i])
				return ixs, nil
			}
			return nil, errIndexGone
		})
		if err != nil && !errors.Is(err, errIndexGone) && ctx.Err() == nil {
			n.log.Warn("field index build: record progress", "space", name, "field", field, "err", err)
		}
	}
	var objects int64
	done, total := 0, len(s.Table().Ranges())
	last := time.Time{}
	err = n.eachRange(ctx, s, func(r *rangeclient.Range, start, end []byte) ([]byte, error) {
		res, err := n.rc.ProposeAt(ctx, r, (&kv.IndexCmd{Op: kv.IndexFill, Start: start, End: end, Path: path, MaxKeys: indexFillKeys}).Encode())
		if err != nil {
			return nil, err
		}
		if res.Next == nil {
			done++
			objects += indexFillKeys / 2 // about: the last chunk of a range
		} else {
			objects += indexFillKeys
		}
		if now := n.cfg.Clock(); now.Sub(last) > time.Second {
			last = now
			total = max(total, len(s.Table().Ranges()))
			record(func(ix *meta.FieldIndex) { ix.RangesDone, ix.Ranges, ix.Objects = done, total, objects })
		}
		return res.Next, nil
	})
	if err == nil {
		err = n.eachRange(ctx, s, func(r *rangeclient.Range, start, end []byte) ([]byte, error) {
			_, err := n.rc.ProposeAt(ctx, r, (&kv.IndexCmd{Op: kv.IndexReady, Start: start, End: end, Path: path}).Encode())
			return nil, err
		})
	}
	if err != nil {
		n.log.Warn("field index build failed", "space", name, "field", field, "err", err)
		record(func(ix *meta.FieldIndex) { ix.Error = fmt.Sprintf("%v (add the index again to resume)", err) })
		return
	}
	total = len(s.Table().Ranges())
	record(func(ix *meta.FieldIndex) {
		ix.State, ix.RangesDone, ix.Ranges, ix.Error = meta.IndexReady, total, total, ""
	})
	n.log.Info("field index built", "space", name, "field", field, "ranges", total)
}

var errIndexGone = errors.New("the index was dropped")

// eachRange runs step over the key span of s, range by range in key
// order: step gets a range and [start, end) within it as the table knows
// it, proposes there once (rangeclient.ProposeAt) and returns where to go
// on from (nil: end). A range that split or merged under it refuses the
// span, and the span is routed again, with its new end.
func (n *Node) eachRange(ctx context.Context, s *space, step func(r *rangeclient.Range, start, end []byte) ([]byte, error)) error {
	pos := keys.SpaceStart(s.ID())
	spaceEnd := keys.SpaceEnd(s.ID())
	for spaceEnd == nil || bytes.Compare(pos, spaceEnd) < 0 {
		var next []byte
		err := n.rc.OnRange(ctx, s.Table(), pos, func(r *rangeclient.Range) error {
			end := r.Desc().End
			if end == nil || spaceEnd != nil && bytes.Compare(end, spaceEnd) > 0 {
				end = spaceEnd
			}
			var err error
			if next, err = step(r, pos, end); err == nil && next == nil {
				next = end
			}
			return err
		})
		if err != nil {
			return err
		}
		if next == nil {
			return nil // the end of the keyspace
		}
		pos = next
	}
	return nil
}

// DropIndex implements object.IndexManager.
func (n *Node) DropIndex(ctx context.Context, name, field string) error {
	path, err := fieldPath(field)
	if err != nil {
		return err
	}
	s, release, err := n.indexSpace(ctx, name)
	if err != nil {
		return err
	}
	defer release()
	found := false
	// The ranges first (queries stop using it), then the catalog.
	if err := n.eachRange(ctx, s, func(r *rangeclient.Range, start, end []byte) ([]byte, error) {
		_, err := n.rc.ProposeAt(ctx, r, (&kv.IndexCmd{Op: kv.IndexDrop, Start: start, End: end, Path: path}).Encode())
		return nil, err
	}); err != nil {
		return object.FromRange(err)
	}
	_, err = n.catalog.UpdateIndexes(ctx, name, func(ixs []meta.FieldIndex) ([]meta.FieldIndex, error) {
		before := len(ixs)
		ixs = slices.DeleteFunc(ixs, func(x meta.FieldIndex) bool { return x.Path == field })
		found = len(ixs) < before
		return ixs, nil
	})
	if err := catalogErr(name, err); err != nil {
		return err
	}
	if !found {
		return object.Errorf(object.NotFound, "space %q has no index on %s", name, field)
	}
	return nil
}

// Indexes implements object.IndexManager.
func (n *Node) Indexes(ctx context.Context, name string) ([]object.IndexInfo, error) {
	sp, err := n.catalog.GetSpace(ctx, name)
	if err := catalogErr(name, err); err != nil {
		return nil, err
	}
	var out []object.IndexInfo
	for _, ix := range sp.Indexes {
		out = append(out, object.IndexInfo{Path: ix.Path, Type: ix.Type, State: ix.State, Created: ix.Created.UnixNano(),
			RangesDone: ix.RangesDone, Ranges: ix.Ranges, Objects: ix.Objects, Error: ix.Error})
	}
	return out, nil
}

// catalogErr classes a catalog failure about space name.
func catalogErr(name string, err error) error {
	var oe *object.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &oe):
		return err
	case errors.Is(err, meta.ErrSpaceNotFound):
		return object.Errorf(object.SpaceNotFound, "space %q does not exist", name)
	}
	return err
}
