package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/keys"
)

// comparerKeys returns keys of every shape the node writes or seeks with:
// version keys, their bare prefixes and bounds, listing prefixes, locks,
// transaction records and other components' keys, with user keys holding
// the escape bytes.
func comparerKeys(rng *rand.Rand) [][]byte {
	alphabet := []byte{0x00, 0x01, 0x02, 'a', 'b', 0xfe, 0xff}
	randBytes := func(max int) []byte {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return b
	}
	tss := []uint64{0, 1, 2, 255, 256, 1 << 40, ^uint64(0) - 1, ^uint64(0)}
	var out [][]byte
	for range 60 {
		key := randBytes(6)
		if len(key) == 0 {
			key = []byte{'k'}
		}
		var pprefix []byte
		if rng.IntN(2) == 0 {
			pprefix = randBytes(3)
		}
		obj := keys.Object(uint32(rng.IntN(3)), pprefix, key)
		for range 2 {
			out = append(out, keys.Version(obj, tss[rng.IntN(len(tss))]))
		}
		out = append(out, keys.Version(obj, rng.Uint64()))
		prefix := keys.VersionPrefix(obj)
		end, _ := keys.VersionPrefixEnd(nil, prefix)
		out = append(out, prefix, end, keys.PrefixEnd(prefix),
			append([]byte{keys.PrefixVersion}, keys.ObjectPrefix(uint32(rng.IntN(3)), pprefix, key[:rng.IntN(len(key)+1)])...),
			keys.Lock(obj), keys.TxnRecord(obj, rng.Uint64()))
	}
	out = append(out, []byte{keys.PrefixVersion}, []byte{keys.PrefixVersion + 1}, []byte(PrefixRangeLocal+"\x00\x00\x00\x00\x00\x00\x00\x01x"), []byte(PrefixChunkIndex), []byte{0xff})
	return out
}

func split(k []byte) ([]byte, []byte) { n := Comparer.Split(k); return k[:n], k[n:] }

// checkOrder asserts pebble's Split contract over every pair of ks: byte
// order orders prefixes first, and suffixes within a prefix.
func checkOrder(t *testing.T, ks [][]byte) {
	t.Helper()
	for _, a := range ks {
		for _, b := range ks {
			c := Comparer.Compare(a, b)
			ap, as := split(a)
			bp, bs := split(b)
			pc := bytes.Compare(ap, bp)
			switch {
			case pc != 0 && c != pc:
				t.Fatalf("Compare(%x, %x) = %d but their prefixes %x, %x compare %d", a, b, c, ap, bp, pc)
			case pc == 0 && c != Comparer.ComparePointSuffixes(as, bs):
				t.Fatalf("Compare(%x, %x) = %d disagrees with their suffixes %x, %x", a, b, c, as, bs)
			}
		}
	}
}

// TestComparerSplit: a version key splits into 'v' | object and its
// timestamp; every other key is all prefix.
func TestComparerSplit(t *testing.T) {
	obj := keys.Object(7, []byte{0, 0xff}, []byte("a\x00b"))
	v := keys.Version(obj, 42)
	if p, s := split(v); !bytes.Equal(p, keys.VersionPrefix(obj)) || len(s) != 8 {
		t.Fatalf("split(version) = %x | %x", p, s)
	}
	for _, k := range [][]byte{keys.VersionPrefix(obj), keys.Lock(obj), keys.TxnRecord(obj, 42), []byte("v"), []byte(PrefixRangeLocal + "12345678901234567890"), v[:len(v)-1], append(slices.Clone(v), 0)} {
		if n := Comparer.Split(k); n != len(k) {
			t.Errorf("Split(%x) = %d, want %d (no suffix)", k, n, len(k))
		}
	}
}

// TestComparerOrder checks the Split contract over keys of every shape,
// and that Separator, Successor and ImmediateSuccessor return keys that
// keep it and sit where pebble needs them.
func TestComparerOrder(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 9))
		ks := comparerKeys(rng)
		slices.SortFunc(ks, Comparer.Compare)
		ks = slices.CompactFunc(ks, bytes.Equal)
		var derived [][]byte
		for i := 0; i+1 < len(ks); i++ {
			a := ks[i]
			for _, b := range []([]byte){ks[i+1], ks[min(i+1+rng.IntN(8), len(ks)-1)]} {
				s := Comparer.Separator(nil, a, b)
				if Comparer.Compare(a, s) > 0 || Comparer.Compare(s, b) >= 0 {
					t.Fatalf("Separator(%x, %x) = %x is not in [a, b)", a, b, s)
				}
				derived = append(derived, s)
			}
			s := Comparer.Successor(nil, a)
			if Comparer.Compare(s, a) < 0 {
				t.Fatalf("Successor(%x) = %x is before it", a, s)
			}
			derived = append(derived, s)
			if p, _ := split(a); len(p) == len(a) {
				is := Comparer.ImmediateSuccessor(nil, a)
				for _, k := range ks {
					kp, _ := split(k)
					if bytes.Equal(kp, a) && Comparer.Compare(k, is) >= 0 {
						t.Fatalf("ImmediateSuccessor(%x) = %x is not after %x of its prefix", a, is, k)
					}
					if bytes.Compare(kp, a) > 0 && len(kp) < len(k) && Comparer.Compare(k, is) < 0 {
						t.Fatalf("ImmediateSuccessor(%x) = %x is after %x of a later prefix", a, is, k)
					}
				}
				derived = append(derived, is)
			}
		}
		checkOrder(t, append(ks, derived...))
	}
}

// TestPrefixSeekMatchesSeek writes versions of many objects through
// flushes, compactions and range deletions, and asserts that a prefix seek
// (bloom filters) finds exactly what a bounded seek finds.
func TestPrefixSeekMatchesSeek(t *testing.T) {
	e, err := Open(Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	db := e.DB()
	rng := rand.New(rand.NewPCG(1, 2))
	objs := make([][]byte, 300)
	for i := range objs {
		objs[i] = keys.Object(1, nil, []byte(fmt.Sprintf("k%03d\x00%d", i, i%7)))
	}
	for round := range 6 {
		b := db.NewBatch()
		for i := range 400 {
			obj := objs[rng.IntN(len(objs))]
			if err := b.Set(keys.Version(obj, uint64(round*1000+i+1)), []byte("x"), nil); err != nil {
				t.Fatal(err)
			}
		}
		if round == 3 {
			lo, hi := keys.VersionSpan(objs[40], objs[90])
			if err := b.DeleteRange(lo, hi, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if round == 4 {
			if err := db.Compact(t.Context(), []byte{keys.PrefixVersion}, []byte{keys.PrefixVersion + 1}, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := func(obj []byte, ts uint64, prefix bool) string {
		p := keys.VersionPrefix(obj)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: keys.PrefixEnd(p)})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		seek := keys.Version(obj, ts)
		var found []string
		for ok := map[bool]func([]byte) bool{true: it.SeekPrefixGE, false: it.SeekGE}[prefix](seek); ok; ok = it.Next() {
			found = append(found, fmt.Sprintf("%x", it.Key()))
		}
		return strings.Join(found, ",")
	}
	missing := keys.Object(1, nil, []byte("k150\x00x"))
	for _, obj := range append(objs, missing) {
		for _, ts := range []uint64{^uint64(0), 3500, 10} {
			if a, b := first(obj, ts, true), first(obj, ts, false); a != b {
				t.Fatalf("object %x at %d: prefix seek found %s, seek found %s", obj, ts, a, b)
			}
		}
	}
}

// TestOpenRejectsOtherComparer: a store written under pebble's default
// comparer is refused with an error that says what to do.
func TestOpenRejectsOtherComparer(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: "db", FS: fs})
	if err == nil || !strings.Contains(err.Error(), "empty data directory") {
		t.Fatalf("Open of a store under another comparer: %v", err)
	}
}
