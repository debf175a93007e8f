package query

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

var fieldPaths = []string{"a", "a.b", "b.c.d", "x", "s", "n.m"}

// wholeFields is Fields the slow way: the document decoded whole.
func wholeFields(doc []byte, paths []string) ([]any, bool) {
	var v any
	if json.Unmarshal(doc, &v) != nil {
		return nil, false
	}
	if _, isObj := v.(map[string]any); !isObj {
		return nil, false
	}
	out := make([]any, len(paths))
	for i, p := range paths {
		d := v
		for part := range strings.SplitSeq(p, ".") {
			m, ok := d.(map[string]any)
			if !ok {
				d = nil
				break
			}
			d = m[part]
		}
		out[i] = d
	}
	return out, true
}

// checkFields: on a valid document Fields either declines (ok false) or
// finds exactly what a whole decode finds.
func checkFields(t *testing.T, doc string) {
	t.Helper()
	got, ok := Fields([]byte(doc), fieldPaths)
	want, wok := wholeFields([]byte(doc), fieldPaths)
	if !wok || !ok {
		if wok && ok != wok && !strings.ContainsAny(doc, `\.`) {
			t.Errorf("%s: declined a document without escapes", doc)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %#v\n want %#v", doc, got, want)
	}
}

func TestFields(t *testing.T) {
	for _, doc := range []string{
		`{}`,
		` { "a" : 1 } `,
		`{"a":{"b":2,"c":[1,{"d":"}"}]},"x":"y\"z\\","s":"tail"}`,
		`{"b":{"c":{"d":[1,2,"x"]}},"n":{"m":null},"x":true,"s":false}`,
		`{"a":{"b":1},"a":{"c":2}}`,
		`{"a":{"b":1},"a":5}`,
		`{"a":5,"a":{"b":7}}`,
		`{"x":-1.5e3,"pad":"` + strings.Repeat("p", 900) + `","a":{"b":"v"}}`,
		`{"s":"with \\\" quote","x":[[],{}],"a":{}}`,
		`{"a\u0062":1,"a":{"b":2}}`,
		`{"b":{"c":"not an object"},"x":{"y":1}}`,
		`{"a":{"b":"x"},"a.b":"y"}`,
		`{"a.b":"y","a":{"b":"x"}}`,
	} {
		checkFields(t, doc)
	}
	for _, bad := range []string{``, `[]`, `"a"`, `{"a":1`, `{"a" 1}`, `{"a":1,}x`, `{"a":"unterminated}`, `{a:1}`} {
		if _, ok := Fields([]byte(bad), fieldPaths); ok {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func FuzzFields(f *testing.F) {
	for _, s := range []string{`{"a":{"b":2},"x":"y"}`, `{"b":{"c":{"d":1}},"s":"\\\""}`, `{"a":1,"a":{"b":[{"c":"]"}]}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		checkFields(t, doc)
	})
}
