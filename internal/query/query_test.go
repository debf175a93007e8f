package query

import (
	"errors"
	"testing"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/tstamp"
)

func rec(size int64, ct string, tags map[string]string, inline string) *mvcc.Record {
	return &mvcc.Record{Version: tstamp.Make(1_764_000_000_000, 0), Size: size, ContentType: ct, Tags: tags,
		Meta: map[string]string{"owner": "ann"}, Inline: []byte(inline)}
}

func TestMatch(t *testing.T) {
	red := rec(2048, "image/png", map[string]string{"color": "red", "shape": "round"}, "")
	doc := rec(40, "application/json", nil, `{"type":"Employee","age":41,"name":{"first":"Ada"},"skills":["go","sql"]}`)
	bare := rec(10, "text/plain", nil, "")
	cases := []struct {
		src  string
		in   *mvcc.Record
		want bool
	}{
		{`tags.color == "red" && size > 1024`, red, true},
		{`tags.color == "red" && size > 4096`, red, false},
		{`tags.color == "blue" || tags.shape == "round"`, red, true},
		{`!(tags.color == "red")`, red, false},
		{`tags.color.matches("^r.d$")`, red, true},
		{`has(tags.color)`, bare, false},
		{`"color" in tags`, red, true},
		{`tags.color == "red"`, bare, false}, // no such tag: no match, no error
		{`key.startsWith("img/")`, red, true},
		{`meta.owner == "ann"`, red, true},
		{`content_type == "image/png"`, red, true},
		{`modified > timestamp("2025-01-01T00:00:00Z")`, red, true},
		{`modified < timestamp("2025-01-01T00:00:00Z")`, red, false},
		{`doc.type == "Employee" && doc.age > 40`, doc, true},
		{`doc.age >= 41.0 && doc.name.first == "Ada"`, doc, true},
		{`"sql" in doc.skills`, doc, true},
		{`doc.type == "Employee"`, red, false}, // not a document
		{`version_count == 3`, red, true},
		{``, bare, true},
	}
	for _, c := range cases {
		q, err := Compile(c.src)
		if err != nil {
			t.Fatalf("Compile(%q): %v", c.src, err)
		}
		got, err := q.Match(Input{Key: "img/1", Rec: c.in, Versions: func() (int, error) { return 3, nil }})
		if err != nil || got != c.want {
			t.Errorf("%q: got %v, %v; want %v", c.src, got, err, c.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, src := range []string{`size +`, `nosuch == 1`, `size`, `tags.color`, `size == "big"`} {
		if _, err := Compile(src); !errors.Is(err, ErrInvalid) {
			t.Errorf("Compile(%q) = %v, want ErrInvalid", src, err)
		}
	}
}

func TestPlan(t *testing.T) {
	esc := func(s string) []byte { return keys.AppendEscaped(nil, []byte(s)) }
	cases := []struct {
		src    string
		access Access
		tag    string
		lo, hi []byte
		prefix string
		exact  bool
	}{
		{`size > 10`, Scan, "", nil, nil, "", false},
		{`tags.color == "red" && size > 1024`, TagEqual, "color", esc("red"), keys.PrefixEnd(esc("red")), "", false},
		{`"red" == tags["color"]`, TagEqual, "color", esc("red"), keys.PrefixEnd(esc("red")), "", false},
		{`has(tags.x) && tags.color.startsWith("re")`, TagPrefix, "color", []byte("re"), keys.PrefixEnd([]byte("re")), "", false},
		{`tags.y >= "b" && tags.y < "d"`, TagRange, "y", esc("b"), esc("d"), "", false},
		{`has(tags.x)`, TagExists, "x", nil, nil, "", false},
		{`tags.a == "1" || tags.b == "2"`, Scan, "", nil, nil, "", false},
		{`key.startsWith("logs/") && tags.t == "x"`, TagEqual, "t", esc("x"), keys.PrefixEnd(esc("x")), "logs/", false},
		{`key == "a/b"`, Scan, "", nil, nil, "a/b", true},
	}
	for _, c := range cases {
		q, err := Compile(c.src)
		if err != nil {
			t.Fatalf("Compile(%q): %v", c.src, err)
		}
		p := q.Plan
		if p.Access != c.access || p.Tag != c.tag || string(p.Lower) != string(c.lo) || string(p.Upper) != string(c.hi) ||
			p.KeyPrefix != c.prefix || p.KeyExact != c.exact {
			t.Errorf("%q: plan %+v (%s)", c.src, p, p)
		}
	}
}
