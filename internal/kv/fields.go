package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/codec"
	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/query"
)

// Field indexes.
//
// A space declares a field index on a document path (doc.PATH) with a
// type; each of its ranges keeps the declaration in its own state, under
// its id ('t' | range | 'd' | esc(path) -> type, ready), so that its
// apply step indexes the documents it writes from then on, with no race
// against the catalog. The entries are the tag index's with kind 'f' and
// a typed value (keys.AppendField*), written and removed with their
// version (IndexVersion). A coordinator declares the index on every range
// of the space, then fills the index of the versions written before, a
// chunk of keys per command, then marks every range ready: only then does
// a range's planner use it. Only documents stored in their record are
// read (the apply step never reads chunks).

// kindDecl is the index kind of a range's field declarations.
const kindDecl byte = 'd'

// Field types, as declared.
const (
	FieldString = keys.FieldString
	FieldNumber = keys.FieldNumber
	FieldTime   = keys.FieldTime
)

// FieldTypeName names a field type.
func FieldTypeName(t byte) string {
	switch t {
	case FieldString:
		return "string"
	case FieldNumber:
		return "number"
	case FieldTime:
		return "time"
	}
	return fmt.Sprintf("type(%q)", t)
}

// ParseFieldType parses "string", "number" or "time".
func ParseFieldType(s string) (byte, error) {
	switch s {
	case "string":
		return FieldString, nil
	case "number":
		return FieldNumber, nil
	case "time":
		return FieldTime, nil
	}
	return 0, fmt.Errorf("field type %q: use string, number or time", s)
}

// MaxFieldPath bounds a field path's length.
const MaxFieldPath = 256

// CheckFieldPath checks a document path: dot-separated names (without
// the "doc." prefix), none empty.
func CheckFieldPath(p string) error {
	if p == "" || len(p) > MaxFieldPath {
		return fmt.Errorf("field path %q: 1 to %d bytes", p, MaxFieldPath)
	}
	for _, part := range strings.Split(p, ".") {
		if part == "" {
			return fmt.Errorf("field path %q: an empty name between dots", p)
		}
	}
	return nil
}

// FieldDecl is a range's declaration of a field index.
type FieldDecl struct {
	Path  string
	Type  byte
	Ready bool // filled: the planner may use it
}

// IndexCmd changes a range's field indexes: the range holding [Start,
// End) (which must be within its bounds: otherwise ErrWrongRange).
type IndexCmd struct {
	Op         byte // IndexDeclare, IndexFill, IndexReady, IndexDrop
	Start, End []byte
	Path       string
	Type       byte
	// MaxKeys bounds the objects an IndexFill reads; its Result.Next says
	// where it stopped (nil: at End).
	MaxKeys int
}

// IndexCmd operations.
const (
	IndexDeclare byte = 1 // declare (idempotent; not ready)
	IndexFill    byte = 2 // index the versions of [Start, End) (some of them: MaxKeys)
	IndexReady   byte = 3 // mark ready
	IndexDrop    byte = 4 // drop the declaration and every entry
)

const opIndex byte = 14

// Encode returns the command's bytes.
func (c *IndexCmd) Encode() []byte {
	b := append(make([]byte, 0, 32+len(c.Start)+len(c.End)+len(c.Path)), opIndex, cmdVersion, c.Op)
	b = appendBytes(b, c.Start)
	b = appendOptBytes(b, c.End)
	b = appendBytes(b, []byte(c.Path))
	b = append(b, c.Type)
	return binary.AppendUvarint(b, uint64(c.MaxKeys))
}

func appendOptBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 0)
	}
	return appendBytes(append(b, 1), v)
}

func decodeIndexCmd(b []byte) (*IndexCmd, error) {
	d := codec.NewDecoder(b, func(msg string) error { return fmt.Errorf("%w: %s", ErrBadCommand, msg) })
	c := &IndexCmd{Op: d.U8(), Start: d.Bytes()}
	if d.U8() == 1 {
		c.End = d.Bytes()
	}
	c.Path, c.Type, c.MaxKeys = string(d.Bytes()), d.U8(), int(d.Uvarint())
	if err := d.Done(); err != nil {
		return nil, err
	}
	if c.Op < IndexDeclare || c.Op > IndexDrop || CheckFieldPath(c.Path) != nil {
		return nil, fmt.Errorf("%w: index command %d on %q", ErrBadCommand, c.Op, c.Path)
	}
	return c, nil
}

// ErrIndexType is the result of declaring a field index with another
// type than the range's declaration of the same path.
var ErrIndexType = errors.New("kv: the field is indexed with another type")

// applyIndex applies an IndexCmd.
func (m *StateMachine) applyIndex(b *pebble.Batch, c *IndexCmd) any {
	if bytes.Compare(c.Start, m.bounds.Start) < 0 ||
		m.bounds.End != nil && (c.End == nil || bytes.Compare(c.End, m.bounds.End) > 0) {
		return ErrWrongRange
	}
	decls, err := m.fieldDecls(b)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(decls, func(d FieldDecl) bool { return d.Path == c.Path })
	key := keys.AppendIndexPrefix(nil, m.bounds.ID, kindDecl, []byte(c.Path))
	switch c.Op {
	case IndexDeclare:
		if i >= 0 {
			if decls[i].Type != c.Type {
				return fmt.Errorf("%w: %s is indexed as a %s", ErrIndexType, c.Path, FieldTypeName(decls[i].Type))
			}
			return &Result{}
		}
		if err := b.Set(key, []byte{c.Type, 0}, nil); err != nil {
			return err
		}
		m.decls = append(slices.Clone(decls), FieldDecl{Path: c.Path, Type: c.Type})
		return &Result{}
	case IndexReady:
		if i < 0 {
			return fmt.Errorf("%w: %s is not declared here", ErrBadCommand, c.Path)
		}
		if err := b.Set(key, []byte{decls[i].Type, 1}, nil); err != nil {
			return err
		}
		m.decls = slices.Clone(decls)
		m.decls[i].Ready = true
		return &Result{}
	case IndexDrop:
		if i < 0 {
			return &Result{}
		}
		prefix := keys.AppendIndexPrefix(nil, m.bounds.ID, keys.IndexField, []byte(c.Path))
		if err := errors.Join(b.Delete(key, nil), b.DeleteRange(prefix, keys.PrefixEnd(prefix), nil)); err != nil {
			return err
		}
		m.decls = slices.Delete(slices.Clone(decls), i, i+1)
		return &Result{}
	}
	// IndexFill: every version of up to MaxKeys objects from Start.
	if i < 0 {
		return fmt.Errorf("%w: %s is not declared here", ErrBadCommand, c.Path)
	}
	one := []FieldDecl{decls[i]}
	lo, hi := keys.VersionSpan(c.Start, c.End)
	it, err := b.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	var (
		prev []byte
		n    int
		buf  []byte
	)
	for ok := it.First(); ok; ok = it.Next() {
		obj, ts, err := keys.DecodeVersion(it.Key())
		if err != nil {
			return fmt.Errorf("%w: version key %x: %v", mvcc.ErrCorrupt, it.Key(), err)
		}
		if !bytes.Equal(obj, prev) {
			if c.MaxKeys > 0 && n == c.MaxKeys {
				return &Result{Next: slices.Clone(obj)}
			}
			n++
			prev = append(prev[:0], obj...)
		}
		rec, err := mvcc.Unmarshal(it.Value())
		if err != nil {
			return fmt.Errorf("object %x: %w", obj, err)
		}
		for _, fv := range fieldValues(rec, one) {
			buf = keys.AppendIndexEntry(buf[:0], m.bounds.ID, keys.IndexField, []byte(fv.path), fv.value, obj, ts)
			if err := b.Set(buf, nil, nil); err != nil {
				return err
			}
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	return &Result{}
}

// fieldDecls returns the range's field declarations, read once from the
// batch and kept until the range's state is replaced (SetBounds,
// Restored) or an IndexCmd changes them.
func (m *StateMachine) fieldDecls(r pebble.Reader) ([]FieldDecl, error) {
	if m.declsKnown {
		return m.decls, nil
	}
	decls, err := readDecls(r, m.bounds.ID)
	if err != nil {
		return nil, err
	}
	m.decls, m.declsKnown = decls, true
	return decls, nil
}

// readDecls reads a range's field declarations.
func readDecls(r pebble.Reader, rangeID uint64) ([]FieldDecl, error) {
	prefix := keys.AppendIndexPrefix(nil, rangeID, kindDecl, nil)
	prefix = prefix[:len(prefix)-2] // every name: without the empty name's terminator
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: keys.PrefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var decls []FieldDecl
	for ok := it.First(); ok; ok = it.Next() {
		name, rest, err := keys.DecodeEscaped(it.Key()[len(prefix):])
		v := it.Value()
		if err != nil || len(rest) != 0 || len(v) != 2 {
			return nil, fmt.Errorf("%w: field declaration %x", mvcc.ErrCorrupt, it.Key())
		}
		decls = append(decls, FieldDecl{Path: string(name), Type: v[0], Ready: v[1] == 1})
	}
	return decls, it.Error()
}

// fieldValue is one indexed value of a version.
type fieldValue struct {
	path  string
	value []byte
}

// fieldValues returns a version's values of the declared fields, in
// declaration order then value order, without repeats: a field holding
// an array has each element of the declared type indexed. Only documents
// stored in their record have any.
func fieldValues(rec *mvcc.Record, decls []FieldDecl) []fieldValue {
	if rec == nil || len(decls) == 0 {
		return nil
	}
	if rec.DeleteMarker || len(rec.Inline) == 0 || !query.IsDocument(rec.ContentType) {
		return nil
	}
	// Only the declared fields are decoded (query.Fields); a document it
	// cannot read that way is decoded whole.
	paths := make([]string, len(decls))
	for i, d := range decls {
		paths[i] = d.Path
	}
	got, ok := query.Fields(rec.Inline, paths)
	if !ok {
		doc := query.Document(rec)
		if doc == nil {
			return nil
		}
		got = make([]any, len(decls))
		for i, d := range decls {
			got[i], _ = lookup(doc, d.Path)
		}
	}
	var out []fieldValue
	for i, d := range decls {
		v := got[i]
		if v == nil {
			continue
		}
		vals := []any{v}
		if a, isArr := v.([]any); isArr {
			vals = a
		}
		var encs [][]byte
		for _, x := range vals {
			if e := encodeField(d.Type, x); e != nil {
				encs = append(encs, e)
			}
		}
		slices.SortFunc(encs, bytes.Compare)
		encs = slices.CompactFunc(encs, bytes.Equal)
		for _, e := range encs {
			out = append(out, fieldValue{path: d.Path, value: e})
		}
	}
	return out
}

// lookup walks a dotted path into a parsed document.
func lookup(doc any, path string) (any, bool) {
	for part := range strings.SplitSeq(path, ".") {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil, false
		}
		if doc, ok = m[part]; !ok {
			return nil, false
		}
	}
	return doc, true
}

// encodeField encodes a JSON value as a field of type t, or nil if it is
// not one.
func encodeField(t byte, v any) []byte {
	switch t {
	case FieldString:
		if s, ok := v.(string); ok {
			return keys.AppendFieldString(nil, []byte(s))
		}
	case FieldNumber:
		if f, ok := v.(float64); ok {
			return keys.AppendFieldNumber(nil, f)
		}
	case FieldTime:
		if s, ok := v.(string); ok {
			if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
				// Unix nanoseconds hold the years 1678 to 2261: a time
				// outside sorts at that end (a range the planner reads
				// takes it as a candidate; the filter decides).
				ns := ts.UnixNano()
				switch {
				case ts.Year() < 1678:
					ns = math.MinInt64
				case ts.Year() > 2261:
					ns = math.MaxInt64
				}
				return keys.AppendFieldTime(nil, ns)
			}
		}
	}
	return nil
}

// indexFields writes the field entries that change between old and rec
// (either nil) of obj at version ts.
func (ix *indexer) indexFields(w keyWriter, obj []byte, ts uint64, old, rec *mvcc.Record) error {
	if len(ix.decls) == 0 {
		return nil
	}
	if old != nil && rec != nil && bytes.Equal(old.Inline, rec.Inline) && old.ContentType == rec.ContentType {
		return nil // a retag: the document is the same
	}
	was, is := fieldValues(old, ix.decls), fieldValues(rec, ix.decls)
	same := func(a fieldValue, in []fieldValue) bool {
		return slices.ContainsFunc(in, func(b fieldValue) bool { return a.path == b.path && bytes.Equal(a.value, b.value) })
	}
	for _, fv := range was {
		if same(fv, is) {
			continue
		}
		ix.buf = keys.AppendIndexEntry(ix.buf[:0], ix.rangeID, keys.IndexField, []byte(fv.path), fv.value, obj, ts)
		if err := w.Delete(ix.buf); err != nil {
			return err
		}
	}
	for _, fv := range is {
		if same(fv, was) {
			continue
		}
		ix.buf = keys.AppendIndexEntry(ix.buf[:0], ix.rangeID, keys.IndexField, []byte(fv.path), fv.value, obj, ts)
		if err := w.Set(ix.buf, nil); err != nil {
			return err
		}
	}
	return nil
}

// copyDecls copies range from's field declarations to range to, in b. A
// split's new range declares what its parent did, as it was; a merge's
// range (merge) declares what either side did, ready only where both
// sides were ready with one type: an index only one side had is not
// whole (a build or a drop was half way).
func copyDecls(b *pebble.Batch, from, to uint64, merge bool) error {
	src, err := readDecls(b, from)
	if err != nil {
		return err
	}
	dst, err := readDecls(b, to)
	if err != nil {
		return err
	}
	put := func(d FieldDecl) error {
		ready := byte(0)
		if d.Ready {
			ready = 1
		}
		return b.Set(keys.AppendIndexPrefix(nil, to, kindDecl, []byte(d.Path)), []byte{d.Type, ready}, nil)
	}
	for _, d := range src {
		if merge {
			i := slices.IndexFunc(dst, func(x FieldDecl) bool { return x.Path == d.Path })
			d.Ready = d.Ready && i >= 0 && dst[i].Ready && dst[i].Type == d.Type
			if i >= 0 {
				d.Type = dst[i].Type
			}
		}
		if err := put(d); err != nil {
			return err
		}
	}
	if merge {
		for _, d := range dst {
			if d.Ready && !slices.ContainsFunc(src, func(x FieldDecl) bool { return x.Path == d.Path }) {
				d.Ready = false
				if err := put(d); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
