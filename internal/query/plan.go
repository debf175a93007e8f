package query

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"

	"github.com/cairn-db/cairn/internal/keys"
)

// Access names how a plan finds its candidates.
type Access byte

const (
	// Scan: every object of the span is a candidate.
	Scan Access = iota
	// TagExists: the objects with the tag at all.
	TagExists
	// TagRange: the objects whose tag value is in a range.
	TagRange
	// TagPrefix: the objects whose tag value starts with a prefix.
	TagPrefix
	// TagEqual: the objects whose tag has one value.
	TagEqual
)

func (a Access) String() string {
	return [...]string{"scan", "tag exists", "tag range", "tag prefix", "tag equal"}[a]
}

// Plan is how a query finds its candidates; the whole filter then runs on
// each. A conjunct the plan serves stays in the filter: the index only
// narrows, so a plan can never make a query wrong, only slow.
type Plan struct {
	Access Access
	// Kind is the index an access reads: keys.IndexTag, or
	// keys.IndexField (then Type is the field's type).
	Kind byte
	Type byte
	// Tag is the tag (or, for a field, the document path) an index
	// access reads.
	Tag string
	// Lower and Upper bound the encoded values (keys.AppendEscaped for a
	// tag, keys.AppendField* for a field) of the index entries read:
	// [Lower, Upper); a nil Upper means every value after Lower.
	Lower, Upper []byte
	// KeyPrefix: only keys that start with it can match
	// (key.startsWith(...), or key == ... with KeyExact).
	KeyPrefix string
	KeyExact  bool
}

// String describes the plan, for explain output.
func (p Plan) String() string {
	var b strings.Builder
	switch {
	case p.Access == Scan:
		b.WriteString("scan")
	case p.Kind == keys.IndexField:
		fmt.Fprintf(&b, "field %s %q", strings.TrimPrefix(p.Access.String(), "tag "), "doc."+p.Tag)
	default:
		fmt.Fprintf(&b, "%s %q", p.Access, p.Tag)
	}
	switch {
	case p.KeyExact:
		fmt.Fprintf(&b, ", key %q", p.KeyPrefix)
	case p.KeyPrefix != "":
		fmt.Fprintf(&b, ", keys starting %q", p.KeyPrefix)
	}
	return b.String()
}

// plan collects, among the conjuncts at the top of the filter, every
// index access (tags and document fields) and the narrowest key prefix.
func plan(e celast.Expr) (keyPlan Plan, accesses []Plan) {
	for _, c := range conjuncts(e, nil) {
		if p, ok := keyConjunct(c); ok {
			if p.KeyExact || len(p.KeyPrefix) > len(keyPlan.KeyPrefix) && !keyPlan.KeyExact {
				keyPlan.KeyPrefix, keyPlan.KeyExact = p.KeyPrefix, p.KeyExact
			}
			continue
		}
		if p, ok := tagConjunct(c); ok {
			p.Kind = keys.IndexTag
			accesses = append(accesses, p)
		} else if p, ok := fieldConjunct(c); ok {
			p.Kind = keys.IndexField
			accesses = append(accesses, p)
		}
	}
	return keyPlan, accesses
}

// choose picks the most selective access among those usable (fields:
// those whose path usable says is indexed, ready, with the type the
// access compares), merging the bounds of range conditions on one index,
// and gives it the key plan's prefix.
func choose(keyPlan Plan, accesses []Plan, usable func(path string, typ byte) bool) Plan {
	best := keyPlan
	type index struct {
		kind byte
		name string
	}
	ranges := map[index]*Plan{}
	for _, p := range accesses {
		if p.Kind == keys.IndexField && (usable == nil || !usable(p.Tag, p.Type)) {
			continue
		}
		if p.Access == TagRange {
			// Bounds on one index narrow each other.
			ix := index{p.Kind, p.Tag}
			if r := ranges[ix]; r != nil {
				if string(p.Lower) > string(r.Lower) {
					r.Lower = p.Lower
				}
				if p.Upper != nil && (r.Upper == nil || string(p.Upper) < string(r.Upper)) {
					r.Upper = p.Upper
				}
				p = *r
			} else {
				ranges[ix] = &p
			}
		}
		if p.Access > best.Access || p.Access == best.Access && p.Kind == best.Kind && p.Tag == best.Tag {
			best.Access, best.Kind, best.Type, best.Tag, best.Lower, best.Upper = p.Access, p.Kind, p.Type, p.Tag, p.Lower, p.Upper
		}
	}
	return best
}

// conjuncts flattens a tree of && into its operands.
func conjuncts(e celast.Expr, out []celast.Expr) []celast.Expr {
	if e.Kind() == celast.CallKind && e.AsCall().FunctionName() == operators.LogicalAnd {
		for _, a := range e.AsCall().Args() {
			out = conjuncts(a, out)
		}
		return out
	}
	return append(out, e)
}

// tagRef returns NAME if e is tags.NAME or tags["NAME"].
func tagRef(e celast.Expr) (string, bool) {
	switch e.Kind() {
	case celast.SelectKind:
		s := e.AsSelect()
		if !s.IsTestOnly() && isIdent(s.Operand(), "tags") {
			return s.FieldName(), true
		}
	case celast.CallKind:
		c := e.AsCall()
		if c.FunctionName() == operators.Index && len(c.Args()) == 2 && isIdent(c.Args()[0], "tags") {
			return stringLit(c.Args()[1])
		}
	}
	return "", false
}

func isIdent(e celast.Expr, name string) bool {
	return e.Kind() == celast.IdentKind && e.AsIdent() == name
}

func stringLit(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// flipped maps a comparison to the one with its operands swapped.
var flipped = map[string]string{
	operators.Equals: operators.Equals, operators.Less: operators.Greater, operators.LessEquals: operators.GreaterEquals,
	operators.Greater: operators.Less, operators.GreaterEquals: operators.LessEquals,
}

// tagConjunct recognizes the conjuncts the tag index serves.
func tagConjunct(e celast.Expr) (Plan, bool) {
	switch e.Kind() {
	case celast.SelectKind: // has(tags.NAME)
		s := e.AsSelect()
		if s.IsTestOnly() && isIdent(s.Operand(), "tags") {
			return Plan{Access: TagExists, Tag: s.FieldName()}, true
		}
		return Plan{}, false
	case celast.CallKind:
	default:
		return Plan{}, false
	}
	c := e.AsCall()
	args := c.Args()
	fn := c.FunctionName()
	switch {
	case fn == operators.In && len(args) == 2 && isIdent(args[1], "tags"): // "NAME" in tags
		if name, ok := stringLit(args[0]); ok {
			return Plan{Access: TagExists, Tag: name}, true
		}
	case fn == "startsWith" && c.IsMemberFunction() && len(args) == 1:
		name, ok1 := tagRef(c.Target())
		p, ok2 := stringLit(args[0])
		if ok1 && ok2 {
			lo := keys.AppendEscapedPrefix(nil, []byte(p))
			return Plan{Access: TagPrefix, Tag: name, Lower: lo, Upper: keys.PrefixEnd(lo)}, true
		}
	case flipped[fn] != "" && len(args) == 2:
		name, ok1 := tagRef(args[0])
		v, ok2 := stringLit(args[1])
		if !ok1 || !ok2 {
			name, ok1 = tagRef(args[1])
			v, ok2 = stringLit(args[0])
			fn = flipped[fn]
		}
		if !ok1 || !ok2 {
			return Plan{}, false
		}
		enc := keys.AppendEscaped(nil, []byte(v))
		switch fn {
		case operators.Equals:
			return Plan{Access: TagEqual, Tag: name, Lower: enc, Upper: keys.PrefixEnd(enc)}, true
		case operators.Greater:
			return Plan{Access: TagRange, Tag: name, Lower: keys.PrefixEnd(enc)}, true
		case operators.GreaterEquals:
			return Plan{Access: TagRange, Tag: name, Lower: enc}, true
		case operators.Less:
			return Plan{Access: TagRange, Tag: name, Upper: enc}, true
		case operators.LessEquals:
			return Plan{Access: TagRange, Tag: name, Upper: keys.PrefixEnd(enc)}, true
		}
	}
	return Plan{}, false
}

// docPath returns PATH if e is doc.PATH (a chain of selections on doc).
func docPath(e celast.Expr) (string, bool) {
	var parts []string
	for e.Kind() == celast.SelectKind {
		s := e.AsSelect()
		if s.IsTestOnly() {
			return "", false
		}
		parts = append(parts, s.FieldName())
		e = s.Operand()
	}
	if len(parts) == 0 || !isIdent(e, "doc") {
		return "", false
	}
	slices.Reverse(parts)
	return strings.Join(parts, "."), true
}

// fieldLiteral encodes a literal as a field value: a string, a number,
// or (timestamp("...")) a time.
func fieldLiteral(e celast.Expr) (typ byte, enc []byte, ok bool) {
	if e.Kind() == celast.CallKind {
		c := e.AsCall()
		if c.FunctionName() != "timestamp" || len(c.Args()) != 1 {
			return 0, nil, false
		}
		s, ok := stringLit(c.Args()[0])
		if !ok {
			return 0, nil, false
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || t.Year() < 1678 || t.Year() > 2261 {
			return 0, nil, false // (outside what the index holds: not planned)
		}
		return keys.FieldTime, keys.AppendFieldTime(nil, t.UnixNano()), true
	}
	if e.Kind() != celast.LiteralKind {
		return 0, nil, false
	}
	switch v := e.AsLiteral().(type) {
	case types.String:
		return keys.FieldString, keys.AppendFieldString(nil, []byte(v)), true
	case types.Int:
		return keys.FieldNumber, keys.AppendFieldNumber(nil, float64(v)), true
	case types.Uint:
		return keys.FieldNumber, keys.AppendFieldNumber(nil, float64(v)), true
	case types.Double:
		if math.IsNaN(float64(v)) {
			return 0, nil, false
		}
		return keys.FieldNumber, keys.AppendFieldNumber(nil, float64(v)), true
	}
	return 0, nil, false
}

// fieldOperand returns PATH if e is doc.PATH or, for times,
// timestamp(doc.PATH).
func fieldOperand(e celast.Expr) (path string, timed, ok bool) {
	if e.Kind() == celast.CallKind {
		c := e.AsCall()
		if c.FunctionName() == "timestamp" && len(c.Args()) == 1 {
			p, ok := docPath(c.Args()[0])
			return p, true, ok
		}
		return "", false, false
	}
	p, ok := docPath(e)
	return p, false, ok
}

// fieldConjunct recognizes the conjuncts a field index serves:
// comparisons of doc.PATH with a literal (timestamp(doc.PATH) with a
// timestamp) and doc.PATH.startsWith("p").
func fieldConjunct(e celast.Expr) (Plan, bool) {
	// has(doc.PATH) holds for a value of any type, and "v" in doc.PATH
	// for a map's key too: a typed index holds neither, so neither is
	// planned.
	if e.Kind() != celast.CallKind {
		return Plan{}, false
	}
	c := e.AsCall()
	args := c.Args()
	fn := c.FunctionName()
	switch {
	case fn == "startsWith" && c.IsMemberFunction() && len(args) == 1:
		path, ok1 := docPath(c.Target())
		p, ok2 := stringLit(args[0])
		if ok1 && ok2 {
			lo := keys.AppendEscapedPrefix([]byte{keys.FieldString}, []byte(p))
			return Plan{Access: TagPrefix, Type: keys.FieldString, Tag: path, Lower: lo, Upper: keys.PrefixEnd(lo)}, true
		}
	case flipped[fn] != "" && len(args) == 2:
		path, timed, ok1 := fieldOperand(args[0])
		typ, enc, ok2 := fieldLiteral(args[1])
		if !ok1 || !ok2 {
			path, timed, ok1 = fieldOperand(args[1])
			typ, enc, ok2 = fieldLiteral(args[0])
			fn = flipped[fn]
		}
		if !ok1 || !ok2 || timed != (typ == keys.FieldTime) {
			return Plan{}, false
		}
		all := []byte{typ}
		switch fn {
		case operators.Equals:
			return Plan{Access: TagEqual, Type: typ, Tag: path, Lower: enc, Upper: keys.PrefixEnd(enc)}, true
		case operators.Greater:
			return Plan{Access: TagRange, Type: typ, Tag: path, Lower: keys.PrefixEnd(enc), Upper: keys.PrefixEnd(all)}, true
		case operators.GreaterEquals:
			return Plan{Access: TagRange, Type: typ, Tag: path, Lower: enc, Upper: keys.PrefixEnd(all)}, true
		case operators.Less:
			return Plan{Access: TagRange, Type: typ, Tag: path, Lower: all, Upper: enc}, true
		case operators.LessEquals:
			return Plan{Access: TagRange, Type: typ, Tag: path, Lower: all, Upper: keys.PrefixEnd(enc)}, true
		}
	}
	return Plan{}, false
}

// keyConjunct recognizes key.startsWith("p") and key == "k".
func keyConjunct(e celast.Expr) (Plan, bool) {
	if e.Kind() != celast.CallKind {
		return Plan{}, false
	}
	c := e.AsCall()
	args := c.Args()
	switch {
	case c.FunctionName() == "startsWith" && c.IsMemberFunction() && len(args) == 1 && isIdent(c.Target(), "key"):
		if p, ok := stringLit(args[0]); ok {
			return Plan{KeyPrefix: p}, true
		}
	case c.FunctionName() == operators.Equals && len(args) == 2:
		for i := range 2 {
			if isIdent(args[i], "key") {
				if k, ok := stringLit(args[1-i]); ok {
					return Plan{KeyPrefix: k, KeyExact: true}, true
				}
			}
		}
	}
	return Plan{}, false
}

// uses reports whether the identifier name appears anywhere in e.
func uses(e celast.Expr, name string) bool {
	found := false
	visit(e, func(x celast.Expr) {
		if isIdent(x, name) {
			found = true
		}
	})
	return found
}

// visit calls f on e and every expression under it.
func visit(e celast.Expr, f func(celast.Expr)) {
	if e == nil {
		return
	}
	f(e)
	switch e.Kind() {
	case celast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			visit(c.Target(), f)
		}
		for _, a := range c.Args() {
			visit(a, f)
		}
	case celast.SelectKind:
		visit(e.AsSelect().Operand(), f)
	case celast.ListKind:
		for _, a := range e.AsList().Elements() {
			visit(a, f)
		}
	case celast.MapKind:
		for _, en := range e.AsMap().Entries() {
			me := en.AsMapEntry()
			visit(me.Key(), f)
			visit(me.Value(), f)
		}
	case celast.StructKind:
		for _, en := range e.AsStruct().Fields() {
			visit(en.AsStructField().Value(), f)
		}
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		visit(c.IterRange(), f)
		visit(c.AccuInit(), f)
		visit(c.LoopCondition(), f)
		visit(c.LoopStep(), f)
		visit(c.Result(), f)
	}
}
