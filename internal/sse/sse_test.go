package sse

import (
	"bytes"
	"crypto/aes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// reference encrypts a body made of segs block by block, the slow way,
// from the definition of the counter blocks.
func reference(t *testing.T, dk []byte, segs []Segment, plain []byte) []byte {
	b, _ := aes.NewCipher(dk)
	out := make([]byte, len(plain))
	pos := 0
	for _, s := range segs {
		for o := int64(0); o < s.Size; o += aes.BlockSize {
			var iv, ks [aes.BlockSize]byte
			copy(iv[:], s.Nonce[:])
			for i := 0; i < 8; i++ {
				iv[8+i] = byte(uint64(o/aes.BlockSize) >> (56 - 8*i))
			}
			b.Encrypt(ks[:], iv[:])
			for i := int64(0); i < aes.BlockSize && o+i < s.Size; i++ {
				out[pos] = plain[pos] ^ ks[i]
				pos++
			}
		}
	}
	return out
}

func TestSegmentsAndRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		dk := NewKey()
		var segs []Segment
		var total int64
		for i := rng.IntN(4) + 1; i > 0; i-- {
			s := Segment{Nonce: NewNonce(), Size: int64(rng.IntN(300))}
			segs = append(segs, s)
			total += s.Size
		}
		plain := make([]byte, total)
		for i := range plain {
			plain[i] = byte(rng.Uint32())
		}
		want := reference(t, dk, segs, plain)
		// Encrypting each segment on its own makes the reference's bytes.
		var got []byte
		pos := int64(0)
		for _, s := range segs {
			r, err := Encrypt(bytes.NewReader(plain[pos:pos+s.Size]), dk, s.Nonce)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(iotest(r, rng))
			got = append(got, b...)
			pos += s.Size
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: segment encryption differs from the reference", round)
		}
		// Any range decrypts to the plaintext's range, whatever the reads.
		off := int64(0)
		if total > 0 {
			off = rng.Int64N(total + 1)
		}
		end := off + rng.Int64N(total-off+1)
		r, err := Decrypt(bytes.NewReader(want[off:end]), dk, segs, off)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(iotest(r, rng))
		if err != nil || !bytes.Equal(b, plain[off:end]) {
			t.Fatalf("round %d: range %d-%d: err %v, bytes differ: %v", round, off, end, err, !bytes.Equal(b, plain[off:end]))
		}
		// The stored form of the segments reads back.
		back, err := ParseSegments(EncodeSegments(segs))
		if err != nil || len(back) != len(segs) || back[0] != segs[0] {
			t.Fatalf("segments round trip: %v %v", back, err)
		}
	}
}

// iotest reads r in reads of random small sizes.
func iotest(r io.Reader, rng *rand.Rand) io.Reader {
	return readerFunc(func(p []byte) (int, error) {
		if len(p) > 1 {
			p = p[:1+rng.IntN(len(p))]
		}
		return r.Read(p)
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestWrap(t *testing.T) {
	kek, dk := NewKey(), NewKey()
	w, err := Wrap(kek, dk, []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unwrap(kek, w, []byte("ad"))
	if err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("unwrap: %v", err)
	}
	if _, err := Unwrap(NewKey(), w, []byte("ad")); !errors.Is(err, ErrUnwrap) {
		t.Fatalf("another key: %v, want ErrUnwrap", err)
	}
	if _, err := Unwrap(kek, w, []byte("other")); !errors.Is(err, ErrUnwrap) {
		t.Fatalf("other ad: %v, want ErrUnwrap", err)
	}
	w[len(w)-1] ^= 1
	if _, err := Unwrap(kek, w, []byte("ad")); !errors.Is(err, ErrUnwrap) {
		t.Fatalf("damaged: %v, want ErrUnwrap", err)
	}
}

func TestParseSegmentsRejects(t *testing.T) {
	for _, s := range []string{"", "x", "AAAA:5", "AAAAAAAAAAA:-1,AAAAAAAAAAA:3", "AAAAAAAAAAA:-2"} {
		if _, err := ParseSegments(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}
