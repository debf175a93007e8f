package query

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Fields returns the values at dotted paths ("a.b") of a JSON document,
// as encoding/json decodes them into an any (nil where a path has no
// value), or ok false when doc is not a JSON object it can read.
//
// It decodes only those values: the rest of the document is skipped, a
// string with one search for its closing quote. So an index of two fields
// of a large document does not pay for decoding all of it. The skipped
// parts are not checked as strictly as a full decode checks them: a
// malformed document may yield values where Document yields none. A
// field index may then hold an entry its filter rejects (an index only
// narrows the candidates); it never misses a value Document would find.
// A later duplicate key replaces an earlier one, as in a full decode.
func Fields(doc []byte, paths []string) (vals []any, ok bool) {
	raw := map[string][]byte{}
	s := fieldScanner{b: doc, paths: paths, raw: raw}
	i := s.ws(0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false
	}
	i, ok = s.object(i, "")
	if !ok || s.ws(i) != len(doc) {
		return nil, false
	}
	vals = make([]any, len(paths))
	for j, p := range paths {
		r, found := raw[p]
		if !found {
			continue
		}
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return nil, false
		}
		vals[j] = v
	}
	return vals, true
}

type fieldScanner struct {
	b     []byte
	paths []string
	raw   map[string][]byte
}

func (s *fieldScanner) ws(i int) int {
	for i < len(s.b) && (s.b[i] == ' ' || s.b[i] == '\t' || s.b[i] == '\n' || s.b[i] == '\r') {
		i++
	}
	return i
}

// wanted reports whether path is asked for, and whether a path below it
// is.
func (s *fieldScanner) wanted(path string) (leaf, below bool) {
	for _, p := range s.paths {
		if p == path {
			leaf = true
		} else if len(p) > len(path) && p[len(path)] == '.' && strings.HasPrefix(p, path) {
			below = true
		}
	}
	return leaf, below
}

// forget drops what was found at path and below it (a duplicate key
// replaces it).
func (s *fieldScanner) forget(path string) {
	for p := range s.raw {
		if p == path || len(p) > len(path) && p[len(path)] == '.' && strings.HasPrefix(p, path) {
			delete(s.raw, p)
		}
	}
}

// object reads the object at b[i] ('{') whose path is prefix and returns
// the index after it.
func (s *fieldScanner) object(i int, prefix string) (int, bool) {
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(s.b) || s.b[i] != '"' {
			return 0, false
		}
		end, ok := s.str(i)
		if !ok {
			return 0, false
		}
		key := s.b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || bytes.IndexByte(key, '.') >= 0 {
			// An escaped key, or one with a dot (a path would mistake
			// it for nesting): decode the document whole.
			return 0, false
		}
		path := string(key)
		if prefix != "" {
			path = prefix + "." + path
		}
		i = s.ws(end)
		if i >= len(s.b) || s.b[i] != ':' {
			return 0, false
		}
		i = s.ws(i + 1)
		leaf, below := s.wanted(path)
		if leaf || below {
			s.forget(path)
		}
		var vend int
		if below && i < len(s.b) && s.b[i] == '{' {
			vend, ok = s.object(i, path)
		} else {
			vend, ok = s.value(i)
		}
		if !ok {
			return 0, false
		}
		if leaf {
			s.raw[path] = s.b[i:vend]
		}
		i = s.ws(vend)
		if i >= len(s.b) {
			return 0, false
		}
		switch s.b[i] {
		case ',':
			i = s.ws(i + 1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// str returns the index after the string that starts at b[i] ('"').
func (s *fieldScanner) str(i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(s.b[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for m := j - 1; m > i && s.b[m] == '\\'; m-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, true
		}
		j++
	}
}

// value returns the index after the value that starts at b[i].
func (s *fieldScanner) value(i int) (int, bool) {
	if i >= len(s.b) {
		return 0, false
	}
	switch s.b[i] {
	case '"':
		return s.str(i)
	case '{', '[':
		depth := 0
		for i < len(s.b) {
			switch s.b[i] {
			case '"':
				end, ok := s.str(i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	}
	// A number or a literal: up to the next delimiter.
	j := i
scan:
	for ; j < len(s.b); j++ {
		switch s.b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			break scan
		}
	}
	if j == i {
		return 0, false
	}
	return j, true
}
