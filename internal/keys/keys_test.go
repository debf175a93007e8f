package keys

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func newRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// randBytes favours the bytes that matter to the escaping: 0x00, 0x01, 0xFF.
func randBytes(r *rand.Rand, maxLen int) []byte {
	b := make([]byte, r.IntN(maxLen+1))
	for i := range b {
		switch r.IntN(4) {
		case 0:
			b[i] = 0x00
		case 1:
			b[i] = 0x01
		case 2:
			b[i] = 0xFF
		default:
			b[i] = byte(r.IntN(256))
		}
	}
	return b
}

func TestEscapedRoundTrip(t *testing.T) {
	cases := [][]byte{nil, {}, {0}, {0, 0}, {0xFF}, {0, 0xFF}, {0, 1}, []byte("abc"), []byte("a\x00b\x00")}
	for _, c := range cases {
		enc := AppendEscaped([]byte("pre"), c)
		v, rest, err := DecodeEscaped(append(enc[3:], 'z'))
		if err != nil || !bytes.Equal(v, c) || string(rest) != "z" {
			t.Errorf("%q: got %q %q %v", c, v, rest, err)
		}
	}
	if got := AppendEscaped(nil, []byte{0, 'a'}); !bytes.Equal(got, []byte{0, 0xFF, 'a', 0, 1}) {
		t.Errorf("encoding of 00 61 = % x", got)
	}
}

func TestDecodeEscapedMalformed(t *testing.T) {
	for _, b := range [][]byte{nil, {}, {'a'}, {0}, {'a', 0}, {0, 2}, {0, 0xFF}, {0, 0xFF, 0}, {0, 0xFF, 0, 0}} {
		if _, _, err := DecodeEscaped(b); !errors.Is(err, ErrMalformedKey) {
			t.Errorf("% x: err = %v", b, err)
		}
	}
}

type tuple struct {
	space   uint32
	pprefix []byte
	key     []byte
	ts      uint64
}

func compareTuples(a, b tuple) int {
	if c := cmp.Compare(a.space, b.space); c != 0 {
		return c
	}
	if c := bytes.Compare(a.pprefix, b.pprefix); c != 0 {
		return c
	}
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	return -cmp.Compare(a.ts, b.ts) // newest first
}

func randTuple(r *rand.Rand) tuple {
	spaces := []uint32{0, 1, 2, 0xFFFFFFFF}
	return tuple{
		space:   spaces[r.IntN(len(spaces))],
		pprefix: randBytes(r, 3),
		key:     randBytes(r, 6),
		ts:      []uint64{0, 1, 2, 1 << 40, ^uint64(0)}[r.IntN(5)],
	}
}

func TestOrdering(t *testing.T) {
	r := newRand(t)
	for range 20000 {
		a, b := randTuple(r), randTuple(r)
		if r.IntN(4) == 0 { // share a prefix often
			b.space, b.pprefix = a.space, a.pprefix
			if r.IntN(2) == 0 {
				b.key = append(bytes.Clone(a.key), randBytes(r, 2)...)
			}
		}
		want := compareTuples(a, b)
		ka := Version(Object(a.space, a.pprefix, a.key), a.ts)
		kb := Version(Object(b.space, b.pprefix, b.key), b.ts)
		if got := bytes.Compare(ka, kb); got != want {
			t.Fatalf("%+v vs %+v: compare = %d, want %d\n% x\n% x", a, b, got, want, ka, kb)
		}
		// Object keys alone order by (space, pprefix, key).
		oa, ob := Object(a.space, a.pprefix, a.key), Object(b.space, b.pprefix, b.key)
		a.ts, b.ts = 0, 0
		if got, want := bytes.Compare(oa, ob), compareTuples(a, b); got != want {
			t.Fatalf("objects %+v vs %+v: compare = %d, want %d", a, b, got, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	r := newRand(t)
	for range 5000 {
		tp := randTuple(r)
		obj := Object(tp.space, tp.pprefix, tp.key)
		s, p, k, err := DecodeObject(obj)
		if err != nil || s != tp.space || !bytes.Equal(p, tp.pprefix) || !bytes.Equal(k, tp.key) {
			t.Fatalf("%+v: decoded %d %q %q %v", tp, s, p, k, err)
		}
		o2, ts, err := DecodeVersion(Version(obj, tp.ts))
		if err != nil || ts != tp.ts || !bytes.Equal(o2, obj) {
			t.Fatalf("%+v: version decoded %q %d %v", tp, o2, ts, err)
		}
		if !bytes.HasPrefix(Version(obj, tp.ts), VersionPrefix(obj)) {
			t.Fatal("version key does not start with VersionPrefix")
		}
		if l := Lock(obj); l[0] != 'l' || !bytes.Equal(l[1:], obj) {
			t.Fatalf("lock key % x", l)
		}
		if o2, _, rec, err := DecodeLock(Lock(obj)); err != nil || rec || !bytes.Equal(o2, obj) {
			t.Fatalf("%+v: lock decoded %q %v %v", tp, o2, rec, err)
		}
		tr := TxnRecord(obj, tp.ts)
		if o2, ts, rec, err := DecodeLock(tr); err != nil || !rec || ts != tp.ts || !bytes.Equal(o2, obj) {
			t.Fatalf("%+v: txn record decoded %q %d %v %v", tp, o2, ts, rec, err)
		}
		// A transaction record lies in its object's lock span, after the lock.
		lo, hi := LockSpan(obj, PrefixEnd(obj))
		if bytes.Compare(tr, lo) <= 0 || bytes.Compare(tr, hi) >= 0 {
			t.Fatalf("%+v: txn record outside its object's lock span", tp)
		}
		// A children index entry decodes to its parts and lies in its
		// parent object's child span, under its version's prefix.
		child := Object(tp.space+1, nil, tp.key)
		ck := Child(obj, tp.ts, child)
		if o2, ts, c2, err := DecodeChild(ck); err != nil || ts != tp.ts || !bytes.Equal(o2, obj) || !bytes.Equal(c2, child) {
			t.Fatalf("%+v: child decoded %q %d %q %v", tp, o2, ts, c2, err)
		}
		if !bytes.HasPrefix(ck, ChildPrefix(obj, tp.ts)) {
			t.Fatal("child key does not start with ChildPrefix")
		}
		if lo, hi := ChildSpan(obj, PrefixEnd(obj)); bytes.Compare(ck, lo) <= 0 || bytes.Compare(ck, hi) >= 0 {
			t.Fatalf("%+v: child entry outside its object's child span", tp)
		}
		if _, _, _, err := DecodeChild(ck[:len(ck)-1]); err == nil {
			t.Fatalf("%+v: a truncated child key decoded", tp)
		}
	}
}

// TestPrefix checks that ObjectPrefix(s, p, kp) prefixes Object(s, p, k)
// exactly when k starts with kp, and that PrefixEnd bounds the span.
func TestPrefix(t *testing.T) {
	r := newRand(t)
	for range 20000 {
		kp, k := randBytes(r, 3), randBytes(r, 5)
		if r.IntN(2) == 0 {
			k = append(bytes.Clone(kp), k...)
		}
		pp := randBytes(r, 2)
		prefix := ObjectPrefix(7, pp, kp)
		obj := Object(7, pp, k)
		want := bytes.HasPrefix(k, kp)
		if got := bytes.HasPrefix(obj, prefix); got != want {
			t.Fatalf("key %q prefix %q: HasPrefix = %v, want %v", k, kp, got, want)
		}
		end := PrefixEnd(prefix)
		inSpan := bytes.Compare(obj, prefix) >= 0 && bytes.Compare(obj, end) < 0
		if inSpan != want {
			t.Fatalf("key %q prefix %q: in span = %v, want %v", k, kp, inSpan, want)
		}
		// Other placement prefixes never fall in the span.
		if pp2 := randBytes(r, 2); !bytes.Equal(pp2, pp) {
			o2 := Object(7, pp2, k)
			if bytes.Compare(o2, prefix) >= 0 && bytes.Compare(o2, end) < 0 {
				t.Fatalf("pprefix %q falls in span of %q", pp2, pp)
			}
		}
	}
}

func TestSpace(t *testing.T) {
	for _, s := range []uint32{0, 5, 0xFFFFFFFE, 0xFFFFFFFF} {
		for _, o := range [][]byte{Object(s, nil, []byte{0}), Object(s, []byte{0xFF, 0xFF}, []byte{0xFF, 0xFF, 0xFF})} {
			end := SpaceEnd(s)
			if bytes.Compare(o, SpaceStart(s)) < 0 || (end != nil && bytes.Compare(o, end) >= 0) {
				t.Errorf("space %d: object % x outside [% x, % x)", s, o, SpaceStart(s), end)
			}
			lo, hi := VersionSpan(SpaceStart(s), end)
			v := Version(o, 3)
			if bytes.Compare(v, lo) < 0 || bytes.Compare(v, hi) >= 0 {
				t.Errorf("space %d: version % x outside [% x, % x)", s, v, lo, hi)
			}
		}
		if s < 0xFFFFFFFF {
			if o := Object(s+1, nil, nil); bytes.Compare(o, SpaceEnd(s)) < 0 {
				t.Errorf("space %d: next space's object below SpaceEnd", s)
			}
		}
	}
	if SpaceEnd(0xFFFFFFFF) != nil {
		t.Error("SpaceEnd(max) should be unbounded")
	}
	lo, hi := VersionSpan(nil, nil)
	if string(lo) != "v" || string(hi) != "w" {
		t.Errorf("VersionSpan(nil, nil) = %q, %q", lo, hi)
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want []byte }{
		{nil, nil}, {[]byte{0xFF}, nil}, {[]byte{1}, []byte{2}}, {[]byte{1, 0xFF}, []byte{2}}, {[]byte{1, 2, 0xFF, 0xFF}, []byte{1, 3}},
	} {
		if got := PrefixEnd(c.in); !bytes.Equal(got, c.want) {
			t.Errorf("PrefixEnd(% x) = % x, want % x", c.in, got, c.want)
		}
	}
}

func TestHashPrefix(t *testing.T) {
	// FNV-1a 32 of "" is 0x811c9dc5, of "a" 0xe40c292c: buckets 5 and 12.
	if got := HashPrefix(nil); !bytes.Equal(got, []byte{5}) {
		t.Errorf("HashPrefix(\"\") = % x", got)
	}
	if got := HashPrefix([]byte("a")); !bytes.Equal(got, []byte{12}) {
		t.Errorf("HashPrefix(\"a\") = % x", got)
	}
	// Sequential keys spread over every bucket.
	var seen [HashBuckets]int
	for i := range 1600 {
		seen[HashPrefix(fmt.Appendf(nil, "key-%06d", i))[0]]++
	}
	for b, n := range seen {
		if n < 50 {
			t.Errorf("bucket %d holds %d of 1600 sequential keys", b, n)
		}
	}
}

func TestCheckKey(t *testing.T) {
	if err := CheckKey(nil); !errors.Is(err, ErrEmptyKey) {
		t.Error(err)
	}
	if err := CheckKey(make([]byte, MaxKeyLen)); err != nil {
		t.Error(err)
	}
	if err := CheckKey(make([]byte, MaxKeyLen+1)); !errors.Is(err, ErrKeyTooLong) {
		t.Error(err)
	}
}

func TestDecodeMalformed(t *testing.T) {
	obj := Object(1, nil, []byte("k"))
	bad := [][]byte{nil, {1, 2, 3}, obj[:len(obj)-1], append(bytes.Clone(obj), 'x'), {0, 0, 0, 1, 0, 1}}
	for _, b := range bad {
		if _, _, _, err := DecodeObject(b); !errors.Is(err, ErrMalformedKey) {
			t.Errorf("DecodeObject(% x) err = %v", b, err)
		}
	}
	v := Version(obj, 9)
	for _, b := range [][]byte{nil, v[:len(v)-1], append([]byte{'l'}, v[1:]...), Version(obj[:len(obj)-1], 9)} {
		if _, _, err := DecodeVersion(b); !errors.Is(err, ErrMalformedKey) {
			t.Errorf("DecodeVersion(% x) err = %v", b, err)
		}
	}
}

func FuzzDecodeObject(f *testing.F) {
	f.Add(Object(1, nil, []byte("a/b")))
	f.Add(Object(0xFFFFFFFF, HashPrefix([]byte("x")), []byte{0, 0xFF, 0}))
	f.Add([]byte{0, 0, 0, 1, 0, 0xFF, 0, 1, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, p, k, err := DecodeObject(b)
		if err != nil {
			if !errors.Is(err, ErrMalformedKey) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if re := Object(s, p, k); !bytes.Equal(re, b) {
			t.Fatalf("re-encoding % x != input % x", re, b)
		}
	})
}

func FuzzDecodeVersion(f *testing.F) {
	f.Add(Version(Object(1, nil, []byte("a")), 5))
	f.Add(Version(Object(2, []byte{0}, []byte{0, 0}), ^uint64(0)))
	f.Fuzz(func(t *testing.T, b []byte) {
		obj, ts, err := DecodeVersion(b)
		if err != nil {
			if !errors.Is(err, ErrMalformedKey) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if re := Version(obj, ts); !bytes.Equal(re, b) {
			t.Fatalf("re-encoding % x != input % x", re, b)
		}
	})
}

func BenchmarkObject(b *testing.B) {
	key := []byte("photos/2026/11/21/img_0001.jpg")
	b.ReportAllocs()
	for b.Loop() {
		_ = Version(Object(3, nil, key), 12345)
	}
}

func FuzzDecodeLock(f *testing.F) {
	obj := Object(3, nil, []byte("a\x00b"))
	f.Add(Lock(obj))
	f.Add(TxnRecord(obj, 77))
	f.Fuzz(func(t *testing.T, k []byte) {
		obj, ts, rec, err := DecodeLock(k)
		if err != nil {
			return
		}
		want := Lock(obj)
		if rec {
			want = TxnRecord(obj, ts)
		}
		if !bytes.Equal(want, k) {
			t.Fatalf("DecodeLock(% x) = %q %d %v, which encodes as % x", k, obj, ts, rec, want)
		}
	})
}
