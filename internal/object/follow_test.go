package object

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

func TestReferences(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want []string
	}{
		{`{"a": {"$ref": "s/k"}, "b": [{"$ref": "s/j"}, {"$ref": "s/k"}], "c": {"d": {"$ref": "t/x/y"}}}`, []string{"s/k", "s/j", "t/x/y"}},
		{`[{"$ref": "s/2"}, {"$ref": "s/1"}]`, []string{"s/2", "s/1"}},
		// Not references: another member beside it, a non-string, a
		// structure, a top-level string.
		{`{"$ref": "s/k", "x": 1}`, nil},
		{`{"$ref": "s/k", "$ref": "s/j"}`, nil},
		{`{"a": {"$ref": 7}, "b": {"$ref": {"$ref": "s/in"}}, "c": {"$ref": ["s/no"]}}`, []string{"s/in"}},
		{`"s/k"`, nil},
		// Not one JSON value.
		{`{"a": {"$ref": "s/k"}`, nil},
		{`{"a": {"$ref": "s/k"}} {}`, nil},
		{`not json`, nil},
	} {
		if got := References([]byte(c.doc)); !slices.Equal(got, c.want) {
			t.Errorf("References(%s) = %q, want %q", c.doc, got, c.want)
		}
	}
}

// duplicateKeys reports whether an object in doc (valid JSON) names a
// member twice, which a decoded map cannot show.
func duplicateKeys(doc []byte) bool {
	d := json.NewDecoder(bytes.NewReader(doc))
	var stack []map[string]bool
	expectKey := func() bool { return len(stack) > 0 && stack[len(stack)-1] != nil }
	inObject := []bool{}
	awaitingKey := false
	for {
		t, err := d.Token()
		if err != nil {
			return false
		}
		switch t {
		case json.Delim('{'):
			stack = append(stack, map[string]bool{})
			inObject = append(inObject, true)
			awaitingKey = true
			continue
		case json.Delim('['):
			stack = append(stack, nil)
			inObject = append(inObject, false)
			awaitingKey = false
			continue
		case json.Delim('}'), json.Delim(']'):
			stack, inObject = stack[:len(stack)-1], inObject[:len(inObject)-1]
			awaitingKey = len(inObject) > 0 && inObject[len(inObject)-1]
			continue
		}
		if awaitingKey && expectKey() {
			k := t.(string)
			if stack[len(stack)-1][k] {
				return true
			}
			stack[len(stack)-1][k] = true
			awaitingKey = false
			continue
		}
		awaitingKey = len(inObject) > 0 && inObject[len(inObject)-1]
	}
}

// FuzzReferences: References never fails on any input, and on valid JSON
// without duplicate members finds exactly the references a walk of the
// decoded value finds (as a set: a map loses the members' order).
func FuzzReferences(f *testing.F) {
	for _, s := range []string{`{"a": {"$ref": "s/k"}}`, `[{"$ref": "a/b"}, {"$ref": "a/b", "x": 1}]`, `{"$ref": {"$ref": "x/y"}}`, `1`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got := References(doc)
		var v any
		if json.Unmarshal(doc, &v) != nil || duplicateKeys(doc) {
			return
		}
		want := map[string]bool{}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if r, ok := v["$ref"].(string); ok && len(v) == 1 {
					want[r] = true
					return
				}
				for _, m := range v {
					walk(m)
				}
			case []any:
				for _, m := range v {
					walk(m)
				}
			}
		}
		walk(v)
		if len(got) != len(want) {
			t.Fatalf("References(%q) = %q, a walk finds %v", doc, got, want)
		}
		for _, r := range got {
			if !want[r] {
				t.Fatalf("References(%q) = %q, a walk finds %v", doc, got, want)
			}
		}
	})
}
