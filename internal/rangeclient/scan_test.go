package rangeclient

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/mvcc"
)

func ents(keys ...string) []mvcc.Entry {
	var out []mvcc.Entry
	for _, k := range keys {
		out = append(out, mvcc.Entry{Obj: []byte(k)})
	}
	return out
}

func keysOf(es []mvcc.Entry) string {
	s := ""
	for _, e := range es {
		s += string(e.Obj)
	}
	return s
}

// TestGather: consecutive ranges' pages join in key order; a range with
// more than its page ends the scan truncated (later ranges' entries come
// after its own); the limit cuts; a full page looks at the rest of its
// window, and hands the ranges after it to the caller.
func TestGather(t *testing.T) {
	errBoom := errors.New("boom")
	for i, c := range []struct {
		pages      []page
		limit      int
		want       string
		more, full bool
		err        error
	}{
		{pages: []page{{ents: ents("a", "b")}, {ents: ents("c")}}, limit: 0, want: "abc"},
		{pages: []page{{ents: ents("a", "b")}, {ents: ents("c")}}, limit: 10, want: "abc"},
		{pages: []page{{ents: ents("a", "b"), more: true}, {ents: ents("c")}}, limit: 10, want: "ab", more: true},
		{pages: []page{{ents: ents("a", "b")}, {ents: ents("c", "d")}}, limit: 3, want: "abc", more: true},
		{pages: []page{{ents: ents("a", "b")}, {ents: ents("c")}}, limit: 2, want: "ab", more: true},
		{pages: []page{{ents: ents("a", "b")}, {}}, limit: 2, want: "ab", full: true},
		{pages: []page{{ents: ents("a")}, {ents: ents("b")}}, limit: 2, want: "ab", full: true},
		{pages: []page{{ents: ents("a", "b")}, {err: errBoom}}, limit: 2, want: "ab", err: errBoom},
		{pages: []page{{ents: ents("a")}, {err: errBoom}, {ents: ents("c")}}, limit: 5, want: "a", err: errBoom},
		{pages: []page{{}, {}}, limit: 1, want: ""},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			out, more, full, err := gather(nil, c.pages, c.limit)
			if keysOf(out) != c.want || more != c.more || full != c.full || !errors.Is(err, c.err) {
				t.Fatalf("gather = %q more %v full %v err %v; want %q more %v full %v err %v",
					keysOf(out), more, full, err, c.want, c.more, c.full, c.err)
			}
		})
	}
}
