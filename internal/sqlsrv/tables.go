package sqlsrv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/sqltypes"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/tstamp"
)

// provider serves the one database.
type provider struct {
	svc  Service
	keys *auth.Keyring
}

func (p *provider) Database(ctx *sql.Context, name string) (sql.Database, error) {
	if !strings.EqualFold(name, Database) {
		return nil, sql.ErrDatabaseNotFound.New(name)
	}
	return &database{p: p}, nil
}

func (p *provider) HasDatabase(ctx *sql.Context, name string) bool {
	return strings.EqualFold(name, Database)
}

func (p *provider) AllDatabases(ctx *sql.Context) []sql.Database {
	return []sql.Database{&database{p: p}}
}

// database is cairn: a table per space (a branch is one), and per snapshot, the user may read.
type database struct {
	p *provider
}

var (
	_ sql.Database          = (*database)(nil)
	_ sql.VersionedDatabase = (*database)(nil)
	_ sql.ReadOnlyDatabase  = (*database)(nil)
)

func (d *database) Name() string     { return Database }
func (d *database) IsReadOnly() bool { return true }

// user is the access key of the statement's connection.
func user(ctx *sql.Context) string {
	if ctx == nil || ctx.Session == nil {
		return ""
	}
	return ctx.Session.Client().User
}

func (d *database) readable(ctx *sql.Context, space string) bool {
	return d.p.keys.Allowed(user(ctx), space, auth.Read)
}

func (d *database) GetTableNames(ctx *sql.Context) ([]string, error) {
	spaces, err := d.p.svc.ListSpaces(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range spaces {
		if d.readable(ctx, s.Name) {
			names = append(names, s.Name)
		}
	}
	snaps, err := d.p.svc.Snapshots(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		if d.readable(ctx, s.Name) {
			names = append(names, s.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (d *database) GetTableInsensitive(ctx *sql.Context, name string) (sql.Table, bool, error) {
	return d.table(ctx, name, 0)
}

func (d *database) GetTableNamesAsOf(ctx *sql.Context, _ interface{}) ([]string, error) {
	return d.GetTableNames(ctx)
}

func (d *database) GetTableInsensitiveAsOf(ctx *sql.Context, name string, asOf interface{}) (sql.Table, bool, error) {
	var at time.Time
	switch v := asOf.(type) {
	case time.Time:
		at = v
	case string:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			if ts, perr := tstamp.Parse(v); perr == nil {
				return d.table(ctx, name, ts)
			}
			return nil, false, fmt.Errorf("AS OF %q: give an RFC 3339 time (2026-11-25T10:00:00Z) or a version id", v)
		}
		at = t
	default:
		return nil, false, fmt.Errorf("AS OF of type %T: give an RFC 3339 time", asOf)
	}
	return d.table(ctx, name, tstamp.FromTime(at)|tstamp.MaxLogical)
}

// table opens space name's table (as of asOf, 0: the latest). Names
// match as the catalog spells them (lower case).
func (d *database) table(ctx *sql.Context, name string, asOf uint64) (sql.Table, bool, error) {
	name = strings.ToLower(name)
	if !d.readable(ctx, name) {
		return nil, false, nil
	}
	ixs, err := d.p.svc.Indexes(ctx, name)
	if object.KindOf(err) == object.SpaceNotFound {
		// A snapshot has no catalog entry of its own: its space's
		// indexes are found by its queries.
		if _, qerr := d.p.svc.Query(ctx, &object.QueryRequest{Space: name, Filter: "false", Limit: 1}); qerr != nil {
			return nil, false, nil
		}
		ixs, err = nil, nil
	}
	if err != nil {
		return nil, false, err
	}
	t := &table{svc: d.p.svc, name: name, asOf: asOf}
	t.schema = sql.Schema{
		{Name: "key", Type: keyType, Source: name, PrimaryKey: true},
		{Name: "version", Type: shortText, Source: name},
		{Name: "size", Type: types.Int64, Source: name},
		{Name: "etag", Type: shortText, Source: name, Nullable: true},
		{Name: "content_type", Type: shortText, Source: name, Nullable: true},
		{Name: "modified", Type: types.DatetimeMaxPrecision, Source: name},
		{Name: "tags", Type: types.JSON, Source: name, Nullable: true},
		{Name: "meta", Type: types.JSON, Source: name, Nullable: true},
		{Name: "doc", Type: types.JSON, Source: name, Nullable: true},
	}
	for _, ix := range ixs {
		if ix.State != "ready" {
			continue
		}
		col := fieldColumn(ix.Path)
		var typ sql.Type
		switch ix.Type {
		case "number":
			typ = types.Float64
		case "time":
			typ = types.DatetimeMaxPrecision
		default:
			typ = keyType
		}
		t.fields = append(t.fields, field{col: col, path: strings.TrimPrefix(ix.Path, "doc."), typ: ix.Type})
		t.schema = append(t.schema, &sql.Column{Name: col, Type: typ, Source: name, Nullable: true})
	}
	return t, true, nil
}

// fieldColumn names the column of an indexed field: doc.a.b is doc_a_b.
func fieldColumn(path string) string { return strings.ReplaceAll(path, ".", "_") }

var (
	keyType   = types.MustCreateString(sqltypes.VarChar, 1024, sql.Collation_Default)
	shortText = types.MustCreateString(sqltypes.VarChar, 255, sql.Collation_Default)
)

// field is an indexed document field with its column.
type field struct {
	col, path, typ string
}

// table is one space (or snapshot) as of a time.
type table struct {
	svc    Service
	name   string
	asOf   uint64
	schema sql.Schema
	fields []field
}

var (
	_ sql.Table            = (*table)(nil)
	_ sql.IndexAddressable = (*table)(nil)
	_ sql.IndexedTable     = (*table)(nil)
)

func (t *table) Name() string               { return t.name }
func (t *table) String() string             { return t.name }
func (t *table) Schema() sql.Schema         { return t.schema }
func (t *table) Collation() sql.CollationID { return sql.Collation_Default }
func (t *table) Partitions(*sql.Context) (sql.PartitionIter, error) {
	return sql.PartitionsToPartitionIter(&partition{filter: "true"}), nil
}

// partition is one query of the table's rows: a CEL filter.
type partition struct{ filter string }

func (p *partition) Key() []byte { return []byte(p.filter) }

func (t *table) PartitionRows(ctx *sql.Context, p sql.Partition) (sql.RowIter, error) {
	return &rows{t: t, req: object.QueryRequest{Space: t.name, Filter: p.(*partition).filter, AsOf: t.asOf, Limit: 1000, Docs: true}}, nil
}

// rows reads a partition's objects page by page, at one timestamp.
type rows struct {
	t    *table
	req  object.QueryRequest
	page []object.Info
	docs map[string]json.RawMessage
	done bool
}

func (r *rows) Next(ctx *sql.Context) (sql.Row, error) {
	for len(r.page) == 0 {
		if r.done {
			return nil, io.EOF
		}
		qctx, cancel := context.WithTimeout(ctx, timeout)
		res, err := r.t.svc.Query(qctx, &r.req)
		cancel()
		if err != nil {
			return nil, err
		}
		r.page, r.docs = res.Objects, res.Docs
		r.done = !res.Truncated || res.Next == ""
		r.req.After, r.req.AsOf = res.Next, res.AsOf
	}
	o := r.page[0]
	r.page = r.page[1:]
	return r.t.row(&o, r.docs[o.Key]), nil
}

func (r *rows) Close(*sql.Context) error { return nil }

// row is an object's row.
func (t *table) row(o *object.Info, doc json.RawMessage) sql.Row {
	row := sql.Row{o.Key, tstamp.String(o.Version), o.Size, nullString(o.ETag), nullString(o.ContentType),
		time.Unix(0, o.Modified).UTC(), jsonMap(o.Tags), jsonMap(o.Meta), nil}
	var parsed any
	if doc != nil {
		row[8] = types.NewLazyJSONDocument(bytes.TrimSpace(doc))
		_ = json.Unmarshal(doc, &parsed)
	}
	for _, f := range t.fields {
		row = append(row, fieldValue(parsed, f))
	}
	return row
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func jsonMap(m map[string]string) any {
	if len(m) == 0 {
		return nil
	}
	v := make(map[string]interface{}, len(m))
	for k, s := range m {
		v[k] = s
	}
	return types.JSONDocument{Val: v}
}

// fieldValue is a document's value of an indexed field, in its column's
// type (NULL if absent or of another type).
func fieldValue(doc any, f field) any {
	for part := range strings.SplitSeq(f.path, ".") {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[part]
	}
	switch f.typ {
	case "number":
		if v, ok := doc.(float64); ok {
			return v
		}
	case "time":
		if s, ok := doc.(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return t.UTC()
			}
		}
	default:
		if s, ok := doc.(string); ok {
			return s
		}
	}
	return nil
}

// Indexes: the key, and each indexed field. A lookup becomes a filter
// the object service's planner serves from the ranges' indexes; the
// engine keeps its WHERE above (PreciseMatch false).

func (t *table) GetIndexes(*sql.Context) ([]sql.Index, error) {
	ixs := []sql.Index{&index{t: t, col: "key", typ: keyType}}
	for i, f := range t.fields {
		ixs = append(ixs, &index{t: t, col: f.col, typ: t.schema[9+i].Type, f: &t.fields[i]})
	}
	return ixs, nil
}

func (t *table) IndexedAccess(*sql.Context, sql.IndexLookup) sql.IndexedTable { return t }
func (t *table) PreciseMatch() bool                                           { return false }

func (t *table) LookupPartitions(ctx *sql.Context, l sql.IndexLookup) (sql.PartitionIter, error) {
	rs, ok := l.Ranges.(sql.MySQLRangeCollection)
	ix, _ := l.Index.(*index)
	if !ok || ix == nil {
		return t.Partitions(ctx)
	}
	var parts []sql.Partition
	for _, r := range rs {
		if len(r) != 1 {
			return t.Partitions(ctx)
		}
		f, ok := ix.filter(r[0])
		if !ok {
			return t.Partitions(ctx)
		}
		parts = append(parts, &partition{filter: f})
	}
	if len(parts) == 0 {
		parts = append(parts, &partition{filter: "false"})
	}
	return sql.PartitionsToPartitionIter(parts...), nil
}

// index is the key's or an indexed field's.
type index struct {
	t   *table
	col string
	typ sql.Type
	f   *field // nil: the key
}

func (i *index) ID() string                                 { return i.col }
func (i *index) Database() string                           { return Database }
func (i *index) Table() string                              { return i.t.name }
func (i *index) Expressions() []string                      { return []string{i.t.name + "." + i.col} }
func (i *index) IsUnique() bool                             { return false }
func (i *index) IsSpatial() bool                            { return false }
func (i *index) IsFullText() bool                           { return false }
func (i *index) IsVector() bool                             { return false }
func (i *index) Comment() string                            { return "" }
func (i *index) IndexType() string                          { return "BTREE" }
func (i *index) IsGenerated() bool                          { return false }
func (i *index) CanSupportOrderBy(sql.Expression) bool      { return false }
func (i *index) PrefixLengths() []uint16                    { return nil }
func (i *index) CanSupport(*sql.Context, ...sql.Range) bool { return true }
func (i *index) ColumnExpressionTypes() []sql.ColumnExpressionType {
	return []sql.ColumnExpressionType{{Expression: i.t.name + "." + i.col, Type: i.typ}}
}

// filter turns one column range into a CEL filter.
func (i *index) filter(r sql.MySQLRangeColumnExpr) (string, bool) {
	operand := "key"
	if i.f != nil {
		operand = "doc." + i.f.path
		if i.f.typ == "time" {
			operand = "timestamp(" + operand + ")"
		}
	}
	var conds []string
	bound := func(c sql.MySQLRangeCut, lower bool) bool {
		switch c.(type) {
		case sql.BelowNull, sql.AboveNull, sql.AboveAll:
			return true // unbounded on this side
		}
		lit, ok := i.literal(sql.GetMySQLRangeCutKey(c))
		if !ok {
			return false
		}
		_, above := c.(sql.Above)
		op := map[[2]bool]string{{true, false}: ">=", {true, true}: ">", {false, false}: "<", {false, true}: "<="}[[2]bool{lower, above}]
		conds = append(conds, operand+" "+op+" "+lit)
		return true
	}
	if _, isNull := r.LowerBound.(sql.BelowNull); isNull {
		if _, upNull := r.UpperBound.(sql.AboveNull); upNull {
			return "false", true // IS NULL: no object has a null key or indexed value
		}
	}
	if !bound(r.LowerBound, true) || !bound(r.UpperBound, false) {
		return "", false
	}
	if len(conds) == 0 {
		if i.f == nil {
			return "true", true
		}
		return "has(doc." + i.f.path + ")", true
	}
	return strings.Join(conds, " && "), true
}

// literal is a bound's key as a CEL literal of the index's type.
func (i *index) literal(k any) (string, bool) {
	switch v := k.(type) {
	case string:
		if i.f != nil && i.f.typ != "string" {
			return "", false
		}
		return strconv.Quote(v), true
	case int64:
		return i.literal(float64(v))
	case float64:
		if i.f == nil || i.f.typ != "number" {
			return "", false
		}
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s, true
	case time.Time:
		if i.f == nil || i.f.typ != "time" {
			return "", false
		}
		return "timestamp(" + strconv.Quote(v.UTC().Format(time.RFC3339Nano)) + ")", true
	}
	return "", false
}
