package query

import (
	"fmt"
	"strings"

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
	// Tag is the tag an index access reads.
	Tag string
	// Lower and Upper bound the encoded values (keys.AppendEscaped) of
	// the index entries read: [Lower, Upper); a nil Upper means every
	// value after Lower.
	Lower, Upper []byte
	// KeyPrefix: only keys that start with it can match
	// (key.startsWith(...), or key == ... with KeyExact).
	KeyPrefix string
	KeyExact  bool
}

// String describes the plan, for explain output.
func (p Plan) String() string {
	var b strings.Builder
	b.WriteString(p.Access.String())
	if p.Access != Scan {
		fmt.Fprintf(&b, " %q", p.Tag)
	}
	switch {
	case p.KeyExact:
		fmt.Fprintf(&b, ", key %q", p.KeyPrefix)
	case p.KeyPrefix != "":
		fmt.Fprintf(&b, ", keys starting %q", p.KeyPrefix)
	}
	return b.String()
}

// plan picks, among the conjuncts at the top of the filter, the most
// selective index access and the narrowest key prefix.
func plan(e celast.Expr) Plan {
	var best Plan
	ranges := map[string]*Plan{}
	for _, c := range conjuncts(e, nil) {
		if p, ok := keyConjunct(c); ok {
			if p.KeyExact || len(p.KeyPrefix) > len(best.KeyPrefix) && !best.KeyExact {
				best.KeyPrefix, best.KeyExact = p.KeyPrefix, p.KeyExact
			}
			continue
		}
		p, ok := tagConjunct(c)
		if !ok {
			continue
		}
		if p.Access == TagRange {
			// Bounds of one tag narrow each other.
			if r := ranges[p.Tag]; r != nil {
				if string(p.Lower) > string(r.Lower) {
					r.Lower = p.Lower
				}
				if p.Upper != nil && (r.Upper == nil || string(p.Upper) < string(r.Upper)) {
					r.Upper = p.Upper
				}
				p = *r
			} else {
				ranges[p.Tag] = &p
			}
		}
		if p.Access >= best.Access {
			best.Access, best.Tag, best.Lower, best.Upper = p.Access, p.Tag, p.Lower, p.Upper
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
