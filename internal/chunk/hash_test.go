package chunk

import (
	"bytes"
	"testing"
)

func TestSumKnownVector(t *testing.T) {
	// BLAKE3 of the empty input, from the BLAKE3 specification's test vectors.
	const empty = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
	if got := Sum(nil).String(); got != empty {
		t.Fatalf("Sum(nil) = %s, want %s", got, empty)
	}
}

func TestHasherMatchesSum(t *testing.T) {
	data := bytes.Repeat([]byte("cairn chunk "), 100000)
	h := NewHasher()
	for p := data; len(p) > 0; {
		n := min(len(p), 777)
		h.Write(p[:n])
		p = p[n:]
	}
	if got, want := h.Sum(), Sum(data); got != want {
		t.Fatalf("streamed %s, one-shot %s", got, want)
	}
	if h.Sum() != Sum(data) {
		t.Fatal("Sum changed the hasher state")
	}
	h.Reset()
	if h.Sum() != Sum(nil) {
		t.Fatal("Reset did not empty the hasher")
	}
}

func TestParseHash(t *testing.T) {
	h := Sum([]byte("x"))
	got, err := ParseHash(h.String())
	if err != nil || got != h {
		t.Fatalf("ParseHash(String()) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "00", h.String() + "0", "zz" + h.String()[2:]} {
		if _, err := ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) succeeded", bad)
		}
	}
	if !(Hash{}).IsZero() || h.IsZero() {
		t.Fatal("IsZero")
	}
}

// TestGearTable recomputes the gear table from its documented origin
// (splitmix64 from the seed "cairngea"), so an accidental edit is caught:
// changing it would silently stop deduplication against stored chunks.
func TestGearTable(t *testing.T) {
	x := uint64(0x636169726e676561)
	for i := range gear {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		if gear[i] != z {
			t.Fatalf("gear[%d] = %#x, want %#x", i, gear[i], z)
		}
	}
}

func TestHashLists(t *testing.T) {
	hs := []Hash{Sum([]byte("a")), Sum([]byte("b")), {}}
	b := AppendHashes([]byte(nil), hs)
	got, err := ParseHashes(b)
	if err != nil || len(got) != len(hs) || got[0] != hs[0] || got[1] != hs[1] || got[2] != hs[2] {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if got, err := ParseHashes(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty list: %v %v", got, err)
	}
	if _, err := ParseHashes(b[:len(b)-1]); err == nil {
		t.Fatal("a list cut short parsed")
	}
}
