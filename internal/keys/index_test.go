package keys

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

func TestIndexEntryRoundTrip(t *testing.T) {
	obj := Object(7, nil, []byte("a\x00b"))
	for _, c := range []struct {
		kind  byte
		name  string
		value []byte
	}{
		{IndexTag, "color", AppendEscaped(nil, []byte("red"))},
		{IndexTag, "x\x00y", AppendEscaped(nil, []byte("\x00"))},
		{IndexField, "doc.age", AppendFieldNumber(nil, -3.5)},
		{IndexField, "doc.name", AppendFieldString(nil, []byte("Ada"))},
		{IndexField, "doc.ok", AppendFieldBool(nil, true)},
		{IndexField, "doc.at", AppendFieldTime(nil, -1)},
	} {
		k := AppendIndexEntry(nil, 42, c.kind, []byte(c.name), c.value, obj, 99)
		e, err := DecodeIndexEntry(k)
		if err != nil || e.RangeID != 42 || e.Kind != c.kind || string(e.Name) != c.name ||
			!bytes.Equal(e.Value, c.value) || !bytes.Equal(e.Obj, obj) || e.TS != 99 {
			t.Fatalf("%q: %+v, %v", c.name, e, err)
		}
		moved := RekeyIndexEntry(nil, k, 43)
		if e2, err := DecodeIndexEntry(moved); err != nil || e2.RangeID != 43 || !bytes.Equal(moved[9:], k[9:]) {
			t.Fatalf("rekeyed: %+v, %v", e2, err)
		}
		for n := range len(k) - 1 {
			if _, err := DecodeIndexEntry(k[:n]); err == nil {
				t.Fatalf("%q: a truncated entry (%d bytes) decoded", c.name, n)
			}
		}
	}
	tag := AppendTagEntry(nil, 1, []byte("n"), []byte("v"), obj, 5)
	if want := AppendIndexEntry(nil, 1, IndexTag, []byte("n"), AppendEscaped(nil, []byte("v")), obj, 5); !bytes.Equal(tag, want) {
		t.Fatalf("AppendTagEntry %x, want %x", tag, want)
	}
}

func TestFieldNumberOrder(t *testing.T) {
	nums := []float64{math.Inf(-1), -1e300, -2, -1.5, -1e-300, 0, 1e-300, 1, 2.5, 1e300, math.Inf(1)}
	var enc [][]byte
	for _, f := range nums {
		enc = append(enc, AppendFieldNumber(nil, f))
		if g, ok := DecodeFieldNumber(enc[len(enc)-1]); !ok || g != f {
			t.Fatalf("%v decodes as %v", f, g)
		}
	}
	if !slices.IsSortedFunc(enc, bytes.Compare) {
		t.Fatal("number encodings out of order")
	}
	if !bytes.Equal(AppendFieldNumber(nil, math.Copysign(0, -1)), AppendFieldNumber(nil, 0)) {
		t.Fatal("-0 and 0 encode differently")
	}
	if bytes.Compare(AppendFieldTime(nil, -5), AppendFieldTime(nil, 3)) >= 0 {
		t.Fatal("time encodings out of order")
	}
}
