package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/storage"
)

// recover opens every segment, rescans the ones not sealed in the
// bookkeeping (the open one, and one whose seal a crash lost during
// rotation), truncates a torn tail, re-indexes valid records missing from
// the index, and leaves an open segment ready for the writer.
func (s *Store) recover() error {
	if err := s.fs.MkdirAll(s.o.Dir, 0o755); err != nil {
		return fmt.Errorf("segment: create %s: %w", s.o.Dir, err)
	}
	// A directory just created is durable only once its parent is synced.
	if err := syncDir(s.fs, s.fs.PathDir(s.o.Dir)); err != nil {
		return fmt.Errorf("segment: sync parent of %s: %w", s.o.Dir, err)
	}
	names, err := s.fs.List(s.o.Dir)
	if err != nil {
		return fmt.Errorf("segment: list %s: %w", s.o.Dir, err)
	}
	var segs []uint64
	for _, n := range names {
		if seg, ok := parseSegmentName(n); ok {
			segs = append(segs, seg)
		} else if strings.HasSuffix(n, ".cairn.tmp") {
			// Left by a truncation copy that did not finish.
			if err := s.fs.Remove(s.fs.PathJoin(s.o.Dir, n)); err != nil {
				return fmt.Errorf("segment: remove %s: %w", n, err)
			}
		}
	}
	slices.Sort(segs)
	metas, err := s.loadMetas()
	if err != nil {
		return err
	}
	gone := map[uint64]bool{}
	for seg := range metas {
		if !slices.Contains(segs, seg) {
			gone[seg] = true
		}
	}
	if len(gone) > 0 {
		// Compaction removed these files and a crash came before their
		// bookkeeping went (see removeSegment). No index entry should
		// point into them; any that does is dropped, not trusted.
		if err := s.dropGone(gone); err != nil {
			return err
		}
	}
	writable := false
	for i, seg := range segs {
		last := i == len(segs)-1
		name := s.fs.PathJoin(s.o.Dir, segmentName(seg))
		meta, ok := metas[seg]
		if ok && meta.state == stateSealed {
			f, err := s.fs.Open(name)
			if err != nil {
				return fmt.Errorf("segment: open %s: %w", name, err)
			}
			s.files.m[seg] = f
			s.stats.segments.Add(1)
			s.stats.bytes.Add(meta.size)
			s.stats.chunks.Add(meta.records)
			continue
		}
		f, err := s.fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("segment: open %s: %w", name, err)
		}
		s.files.m[seg] = f
		res, err := s.scan(seg, f, meta.size)
		if err != nil {
			return err
		}
		s.stats.segments.Add(1)
		s.stats.bytes.Add(res.size)
		s.stats.chunks.Add(res.records)
		if last && res.usable && res.size%blockSize == 0 {
			f := s.files.m[seg]
			s.w.app.reset(f, s.openDirect(name), name, res.size)
			s.w.seg, s.w.records = seg, res.records
			s.openSeg.Store(seg)
			writable = true
			continue
		}
		// Not the last segment (a seal lost in a crash during rotation),
		// damaged beyond a torn tail, or ending off a block boundary (a
		// tail torn inside a group commit): seal it as it is.
		sealed := segMeta{state: stateSealed, size: res.size, records: res.records}
		if err := s.db.Set(segKey(seg), sealed.encode(), pebble.Sync); err != nil {
			return fmt.Errorf("segment: seal %s: %w", name, err)
		}
	}
	if !writable {
		next := uint64(1)
		if len(segs) > 0 {
			next = segs[len(segs)-1] + 1
		}
		if err := s.startSegment(next); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) loadMetas() (map[uint64]segMeta, error) {
	lower := []byte(storage.PrefixSegment)
	upper := []byte(storage.PrefixSegment)
	upper[len(upper)-1]++
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	metas := map[uint64]segMeta{}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()[len(lower):]
		if len(k) != 8 {
			continue // not ours to interpret (a future bookkeeping key)
		}
		m, err := decodeSegMeta(it.Value())
		if err != nil {
			it.Close()
			return nil, err
		}
		seg := uint64(0)
		for _, c := range k {
			seg = seg<<8 | uint64(c)
		}
		metas[seg] = m
	}
	return metas, it.Close()
}

type scanResult struct {
	size    int64 // the end of the last valid record (the new file size)
	records int64
	usable  bool // the segment may take more appends
}

// scan validates the records of segment seg from its start. durable is the
// length the bookkeeping says was synced and indexed (0 if unknown). A bad
// record at or after durable is a torn tail from a crash: the file is
// truncated there. A bad record before durable is damage to acknowledged
// data: nothing is truncated, the segment is reported unusable (to be
// sealed) and Get reports the damaged chunk as corrupt.
func (s *Store) scan(seg uint64, f vfs.File, durable int64) (scanResult, error) {
	name := s.fs.PathJoin(s.o.Dir, segmentName(seg))
	fi, err := f.Stat()
	if err != nil {
		return scanResult{}, fmt.Errorf("segment: stat %s: %w", name, err)
	}
	size := fi.Size()
	hdr := make([]byte, max(fileHeaderSize, recordHeaderSize))
	if _, err := f.ReadAt(hdr[:fileHeaderSize], 0); err != nil && !errors.Is(err, io.EOF) {
		return scanResult{}, fmt.Errorf("segment: read %s: %w", name, err)
	}
	if err := checkFileHeader(hdr[:fileHeaderSize], seg); err != nil || size < fileHeaderSize {
		if durable > fileHeaderSize {
			s.log.Error("segment header damaged; sealing it", "segment", name, "err", err)
			return scanResult{size: size}, nil
		}
		// Created but never synced with records: start it afresh.
		s.log.Warn("segment header torn; rewriting it", "segment", name, "err", err)
		return s.rewriteHeader(seg, f)
	}

	b := s.db.NewBatch()
	defer b.Close()
	var (
		off     = int64(fileHeaderSize)
		records int64
		data    []byte
		bad     error
	)
	for off < size {
		if off+recordHeaderSize > size {
			bad = fmt.Errorf("%w: partial record header", ErrCorrupt)
			break
		}
		if _, err := f.ReadAt(hdr[:recordHeaderSize], off); err != nil {
			return scanResult{}, fmt.Errorf("segment: read %s: %w", name, err)
		}
		rh, err := parseRecordHeader(hdr[:recordHeaderSize])
		if err != nil {
			bad = err
			break
		}
		end := off + recordHeaderSize + int64(rh.length)
		if end > size {
			bad = fmt.Errorf("%w: partial record data", ErrCorrupt)
			break
		}
		data = slices.Grow(data[:0], int(rh.length))[:rh.length]
		if _, err := f.ReadAt(data, off+recordHeaderSize); err != nil && len(data) > 0 {
			return scanResult{}, fmt.Errorf("segment: read %s: %w", name, err)
		}
		if err := verifyRecord(hdr[:recordHeaderSize], rh, data); err != nil {
			bad = err
			break
		}
		if rh.pad {
			off = end
			continue
		}
		// Records before durable were indexed when they were written; one
		// missing from the index now was deleted by the collector (gc.go)
		// and stays deleted.
		if off >= durable {
			if err := s.reindex(b, seg, off, rh); err != nil {
				return scanResult{}, err
			}
		}
		records++
		off = end
	}
	if bad != nil && off == fileHeaderSize && durable == 0 {
		// The header is whole but the padding of its block is not, and no
		// group commit ever reached the index: a crash while the segment
		// was being created. Start it afresh rather than seal it empty.
		s.log.Warn("segment header block torn; rewriting it", "segment", name, "err", bad)
		return s.rewriteHeader(seg, f)
	}
	res := scanResult{size: off, records: records, usable: true}
	if bad != nil {
		if off < durable {
			s.log.Error("segment damaged inside its acknowledged part; sealing it",
				"segment", name, "offset", off, "durable", durable, "err", bad)
			res.size, res.usable = size, false
		} else {
			s.log.Warn("truncating torn segment tail", "segment", name,
				"offset", off, "dropped", size-off, "err", bad)
			if _, err := s.truncate(seg, f, off); err != nil {
				return scanResult{}, err
			}
		}
	}
	if b.Count() > 0 {
		// The records were read back, but that does not make them durable:
		// sync before indexing them.
		if err := s.files.m[seg].Sync(); err != nil {
			return scanResult{}, fmt.Errorf("segment: sync %s: %w", name, err)
		}
		s.log.Info("re-indexed chunks found in segment", "segment", name, "chunks", b.Count())
		if err := b.Commit(pebble.Sync); err != nil {
			return scanResult{}, fmt.Errorf("segment: re-index %s: %w", name, err)
		}
	}
	return res, nil
}

// dropGone removes the bookkeeping of the segments gone (whose files
// are missing) and any index entry that points into one.
func (s *Store) dropGone(gone map[uint64]bool) error {
	b := s.db.NewBatch()
	defer b.Close()
	dangling := 0
	err := s.entries(context.Background(), nil, func(h chunk.Hash, loc location) bool {
		if gone[loc.seg] {
			dangling++
			_ = b.Delete(indexKey(h), nil)
		}
		return true
	})
	if err != nil {
		return err
	}
	for seg := range gone {
		if err := b.Delete(segKey(seg), nil); err != nil {
			return err
		}
	}
	if dangling > 0 {
		s.log.Error("chunk index entries pointed into removed segment files; dropped (the repairer restores copies from other nodes)", "entries", dangling)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("segment: drop the bookkeeping of removed segments: %w", err)
	}
	return nil
}

// reindex adds to b the index entry of the record rh at off in seg unless
// the index holds its chunk.
func (s *Store) reindex(b *pebble.Batch, seg uint64, off int64, rh recordHeader) error {
	if ok, err := s.Has(rh.hash); err != nil || ok {
		return err
	}
	loc := location{seg: seg, off: off, length: rh.length}
	return b.Set(indexKey(rh.hash), loc.encode(), nil)
}

// rewriteHeader empties segment seg's file and writes its header block
// again, for a segment whose creation a crash cut short.
func (s *Store) rewriteHeader(seg uint64, f vfs.File) (scanResult, error) {
	name := s.fs.PathJoin(s.o.Dir, segmentName(seg))
	f, err := s.truncate(seg, f, 0)
	if err != nil {
		return scanResult{}, err
	}
	if _, err := f.WriteAt(headerBlock(seg), 0); err != nil {
		return scanResult{}, fmt.Errorf("segment: rewrite header of %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return scanResult{}, fmt.Errorf("segment: sync %s: %w", name, err)
	}
	return scanResult{size: blockSize, usable: true}, nil
}

// truncate cuts segment seg's file to size and syncs it. vfs.File has no
// Truncate: files that have one (the real disk) use it; others get the
// prefix copied to a new file renamed over the old. It returns the file to
// use from now on (also stored in s.files).
func (s *Store) truncate(seg uint64, f vfs.File, size int64) (vfs.File, error) {
	name := s.fs.PathJoin(s.o.Dir, segmentName(seg))
	if t, ok := f.(interface{ Truncate(int64) error }); ok {
		if err := t.Truncate(size); err != nil {
			return nil, fmt.Errorf("segment: truncate %s: %w", name, err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("segment: sync %s: %w", name, err)
		}
		return f, nil
	}
	tmp := name + ".tmp"
	out, err := s.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("segment: truncate %s: %w", name, err)
	}
	err = func() error {
		buf := make([]byte, min(size, 1<<20))
		for off := int64(0); off < size; {
			n := min(int64(len(buf)), size-off)
			if _, err := f.ReadAt(buf[:n], off); err != nil {
				return err
			}
			if _, err := out.Write(buf[:n]); err != nil {
				return err
			}
			off += n
		}
		return out.Sync()
	}()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		f.Close()
		delete(s.files.m, seg)
		err = s.fs.Rename(tmp, name)
	}
	if err == nil {
		err = syncDir(s.fs, s.o.Dir)
	}
	if err == nil {
		f, err = s.fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	}
	if err != nil {
		return nil, fmt.Errorf("segment: truncate %s: %w", name, err)
	}
	s.files.m[seg] = f
	return f, nil
}
