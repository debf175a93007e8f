package object

import (
	"context"
	"strings"

	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
)

// Compose implements Composer: the new version's manifest is
// the sources' chunks, so no data is copied, except where a source range
// starts or ends inside a chunk (that chunk's part is stored as a new
// chunk) and for inline sources (their bytes become a chunk). The
// version's BLAKE3 hash (and its MD5 ETag, when etag is not given) are of
// the whole content, so unless the version is a whole copy of one source
// the content is read once, through verified chunk reads.
func (st *Store) Compose(ctx context.Context, req *PutRequest, etag string, sources []ComposeSource) (Info, error) {
	// The target is held only to learn its copies, then again to commit:
	// a source may be in the same space, and a space held twice by one
	// operation deadlocks once a fence or snapshot waits for it.
	if err := validMeta(req.Meta, req.Tags, req.Headers); err != nil {
		return Info{}, err
	}
	s, _, release, err := st.writeTarget(ctx, req.Space, req.Key, placing{tags: req.Tags, create: true})
	if err != nil {
		return Info{}, err
	}
	replicas := s.Replicas()
	release()
	var m chunk.Manifest
	var whole *Info // the one source, copied whole
	for i, src := range sources {
		sm, info, full, err := st.sourceChunks(ctx, src, replicas)
		if err != nil {
			return Info{}, err
		}
		if len(sources) == 1 && full {
			whole = &info
		}
		m.Chunks = append(m.Chunks, sm.Chunks...)
		if m.Size() > st.cfg.MaxObjectSize {
			return Info{}, Errorf(TooLarge, "the sources up to %d are over the %d byte object limit", i, st.cfg.MaxObjectSize)
		}
	}
	r, err := st.composeRecord(ctx, m, whole, replicas)
	if err != nil {
		return Info{}, err
	}
	// Touched after composeRecord, which may read the whole content.
	if err := st.touchShared(ctx, m); err != nil {
		return Info{}, err
	}
	s, obj, release, err := st.writeTarget(ctx, req.Space, req.Key, placing{tags: req.Tags, create: true})
	if err != nil {
		return Info{}, err
	}
	defer release()
	if etag != "" {
		r.ETag = etag
	}
	r.ContentType, r.Meta, r.Tags, r.Headers = req.ContentType, req.Meta, req.Tags, req.Headers
	return st.commit(ctx, s, obj, req.Space, req.Key, &kv.PutCmd{Rec: r, IfMatch: req.IfMatch, IfNoneMatch: req.IfNoneMatch})
}

// sourceChunks reads one source version and returns the chunks of its
// range (storing new chunks for a range's partial first and last chunks),
// its info, and whether the range is the whole body.
func (st *Store) sourceChunks(ctx context.Context, src ComposeSource, replicas int) (chunk.Manifest, Info, bool, error) {
	ss, sobj, release, err := st.target(ctx, src.Space, src.Key)
	if err != nil {
		return chunk.Manifest{}, Info{}, false, err
	}
	defer release()
	rec, err := st.readRecord(ctx, ss, sobj, src.Version, 0)
	if err != nil {
		return chunk.Manifest{}, Info{}, false, err
	}
	info := objectInfo(src.Space, src.Key, rec)
	off, length := src.Offset, src.Length
	if length < 0 {
		length = rec.Size - off
	}
	if off < 0 || length < 0 || off > rec.Size || length > rec.Size-off {
		return chunk.Manifest{}, info, false, Errorf(InvalidRange, "range %d+%d is outside %q, %d bytes", off, length, src.Key, rec.Size)
	}
	full := off == 0 && length == rec.Size
	if length == 0 {
		return chunk.Manifest{}, info, full, nil
	}
	pm, err := st.manifestOf(ctx, rec, ss.Replicas())
	if err != nil {
		return chunk.Manifest{}, info, full, err
	}
	var out chunk.Manifest
	for _, p := range pm.Span(off, length) {
		if p.Off == int64(p.Ref.Off) && p.Len == int64(p.Size) {
			out.Chunks = append(out.Chunks, p.Ref) // the whole entry
			continue
		}
		c, err := st.cfg.Chunks.GetChunk(ctx, p.Hash, nil, ss.Replicas())
		if err != nil {
			return chunk.Manifest{}, info, full, err
		}
		b, err := p.Of(c)
		if err != nil {
			return chunk.Manifest{}, info, full, Errorf(Corrupt, "%v", err)
		}
		ref, err := st.storeChunk(ctx, replicas)(b)
		if err != nil {
			return chunk.Manifest{}, info, full, err
		}
		out.Chunks = append(out.Chunks, ref)
	}
	return out, info, full, nil
}

// composeRecord is the record of a composed body: a whole copy of one
// source keeps its hash and ETag (if that is the MD5 of the content, not
// a multipart upload's); anything else is summarized.
func (st *Store) composeRecord(ctx context.Context, m chunk.Manifest, whole *Info, replicas int) (*mvcc.Record, error) {
	if whole != nil && m.Size() > int64(st.cfg.InlineThreshold) && !strings.Contains(whole.ETag, "-") {
		return &mvcc.Record{Size: m.Size(), Hash: whole.Hash, ETag: whole.ETag, Manifest: m.Marshal()}, nil
	}
	return st.summarize(ctx, m, replicas)
}
