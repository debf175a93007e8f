// Package query compiles and runs Cairn's object queries: a CEL filter
// over an object's latest visible version (its key, tags, user metadata,
// size, content type, modification time, version count and, for a JSON
// document, its fields), and the plan that says which index entries can
// produce its candidates.
//
// The package is pure: a range evaluates a Query next to its data with
// the records it reads, and the caller gives it the version count when
// the filter asks for one.
package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// MaxSource bounds a filter's text, in bytes.
const MaxSource = 16 << 10

// costLimit bounds one evaluation's work (CEL's cost units): a filter
// runs once per candidate, next to the data, and must not stall a range.
const costLimit = 1 << 20

// ErrInvalid is the class of a filter that does not compile: a syntax
// error, an unknown variable, or an expression that is not boolean.
var ErrInvalid = errors.New("query: invalid filter")

// Variables are the names a filter may use, with their CEL types.
var Variables = []struct{ Name, Type, Doc string }{
	{"key", "string", "the object's key"},
	{"tags", "map(string, string)", "the object's tags"},
	{"meta", "map(string, string)", "the object's user metadata"},
	{"size", "int", "the content length in bytes"},
	{"content_type", "string", "the MIME type"},
	{"modified", "timestamp", "when the version was written (its commit time)"},
	{"version_count", "int", "how many versions of the key the space keeps (delete markers too)"},
	{"doc", "dyn", "the JSON document (objects of type application/json)"},
}

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

func celEnv() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = cel.NewEnv(
			cel.Variable("key", cel.StringType),
			cel.Variable("tags", cel.MapType(cel.StringType, cel.StringType)),
			cel.Variable("meta", cel.MapType(cel.StringType, cel.StringType)),
			cel.Variable("size", cel.IntType),
			cel.Variable("content_type", cel.StringType),
			cel.Variable("modified", cel.TimestampType),
			cel.Variable("version_count", cel.IntType),
			cel.Variable("doc", cel.DynType),
			cel.CrossTypeNumericComparisons(true),
		)
	})
	return env, envErr
}

// Query is a compiled filter. It is safe for concurrent use.
type Query struct {
	// Source is the filter's text.
	Source string
	// Plan is the query's plan with tag indexes alone (every range has
	// them): which index entries hold every match's candidates, and the
	// key span. PlanFor adds a range's field indexes.
	Plan Plan

	keyPlan  Plan
	accesses []Plan

	prg          cel.Program
	usesDoc      bool
	usesVersions bool
}

// Compile compiles a filter. The empty filter matches every object.
func Compile(src string) (*Query, error) {
	if len(src) > MaxSource {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, len(src), MaxSource)
	}
	if strings.TrimSpace(src) == "" {
		src = "true"
	}
	e, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, iss.Err())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("%w: the filter is of type %s, not bool", ErrInvalid, ast.OutputType())
	}
	prg, err := e.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(costLimit))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	q := &Query{Source: src, prg: prg}
	root := ast.NativeRep().Expr()
	q.keyPlan, q.accesses = plan(root)
	q.Plan = choose(q.keyPlan, q.accesses, nil)
	q.usesDoc, q.usesVersions = uses(root, "doc"), uses(root, "version_count")
	return q, nil
}

// cache holds compiled queries by source, for the ranges that evaluate
// the same filter page after page.
var cache struct {
	sync.Mutex
	m map[string]*Query
}

// cacheMax bounds the cache; it is emptied when full.
const cacheMax = 256

// Cached is Compile with a cache of recent filters.
func Cached(src string) (*Query, error) {
	cache.Lock()
	q := cache.m[src]
	cache.Unlock()
	if q != nil {
		return q, nil
	}
	q, err := Compile(src)
	if err != nil {
		return nil, err
	}
	cache.Lock()
	if cache.m == nil || len(cache.m) >= cacheMax {
		cache.m = make(map[string]*Query)
	}
	cache.m[src] = q
	cache.Unlock()
	return q, nil
}

// PlanFor is the query's plan on a range whose ready field indexes
// usable names: usable(path, typ) reports whether doc.path is indexed,
// ready, with type typ.
func (q *Query) PlanFor(usable func(path string, typ byte) bool) Plan {
	return choose(q.keyPlan, q.accesses, usable)
}

// TagEquals reports whether the filter holds only for objects whose tag
// name has one value (a top-level conjunct tags.NAME == "v"), and the
// value.
func (q *Query) TagEquals(name string) (string, bool) {
	for _, a := range q.accesses {
		if a.Kind == keys.IndexTag && a.Access == TagEqual && a.Tag == name {
			if v, rest, err := keys.DecodeEscaped(a.Lower); err == nil && len(rest) == 0 {
				return string(v), true
			}
		}
	}
	return "", false
}

// UsesVersions reports whether the filter reads version_count (the
// caller must then give Input.Versions).
func (q *Query) UsesVersions() bool { return q.usesVersions }

// Input is one object as a filter sees it: its key and its visible
// version.
type Input struct {
	Key string
	Rec *mvcc.Record
	// Versions counts the key's versions; called only by a filter that
	// reads version_count.
	Versions func() (int, error)
}

// Match reports whether in passes the filter. A filter that fails on an
// object (a missing tag or field, a type mismatch) does not match it; the
// error is only for an evaluation that ran out of its budget, or a
// version count that could not be read.
func (q *Query) Match(in Input) (bool, error) {
	a := &activation{in: in, q: q}
	out, _, err := q.prg.Eval(a)
	if a.err != nil {
		return false, a.err
	}
	if err != nil {
		if strings.Contains(err.Error(), "cost limit") {
			return false, fmt.Errorf("query: the filter is too costly for one object (%v)", err)
		}
		return false, nil
	}
	b, ok := out.(types.Bool)
	return ok && bool(b), nil
}

// activation resolves a filter's variables from one object, lazily.
type activation struct {
	in  Input
	q   *Query
	err error
	doc any
	got bool
}

func (a *activation) Parent() cel.Activation { return nil }

func (a *activation) ResolveName(name string) (any, bool) {
	r := a.in.Rec
	switch name {
	case "key":
		return a.in.Key, true
	case "tags":
		return stringMap(r.Tags), true
	case "meta":
		return stringMap(r.Meta), true
	case "size":
		return r.Size, true
	case "content_type":
		return r.ContentType, true
	case "modified":
		return time.UnixMilli(tstamp.Physical(r.Version)).UTC(), true
	case "version_count":
		if a.in.Versions == nil {
			return nil, false
		}
		n, err := a.in.Versions()
		if err != nil {
			a.err = err
			return nil, false
		}
		return int64(n), true
	case "doc":
		if !a.got {
			a.doc, a.got = Document(r), true
		}
		if a.doc == nil {
			return nil, false
		}
		return a.doc, true
	}
	return nil, false
}

var emptyMap = map[string]string{}

func stringMap(m map[string]string) map[string]string {
	if m == nil {
		return emptyMap
	}
	return m
}

// IsDocument reports whether a content type is a JSON document's:
// application/json, or any type with a +json suffix.
func IsDocument(contentType string) bool {
	t, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return t == "application/json" || strings.HasSuffix(t, "+json")
}

// Document returns the parsed JSON document a version holds, or nil:
// only documents stored inside their record (up to the node's inline
// threshold) are read here; a query never reads an object's chunks.
func Document(r *mvcc.Record) any {
	if r.DeleteMarker || len(r.Inline) == 0 || !IsDocument(r.ContentType) {
		return nil
	}
	var v any
	if err := json.Unmarshal(r.Inline, &v); err != nil {
		return nil
	}
	return v
}
