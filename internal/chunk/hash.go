package chunk

import (
	"encoding/hex"
	"fmt"

	"github.com/zeebo/blake3"
)

// HashSize is the size of a Hash in bytes.
const HashSize = 32

// Hash is the BLAKE3-256 digest of a chunk or of a whole object's content.
// Chunks are addressed by it.
type Hash [HashSize]byte

// String returns the lowercase hex form of h.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is the zero value (no hash).
func (h Hash) IsZero() bool { return h == Hash{} }

// ParseHash parses the hex form produced by String.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*HashSize {
		return h, fmt.Errorf("chunk: hash %q: want %d hex digits, got %d", s, 2*HashSize, len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("chunk: hash %q: %w", s, err)
	}
	return h, nil
}

// AppendHashes appends hs to b back to back: the hash lists nodes send
// each other.
func AppendHashes(b []byte, hs []Hash) []byte {
	for _, h := range hs {
		b = append(b, h[:]...)
	}
	return b
}

// ParseHashes parses a list AppendHashes made.
func ParseHashes(b []byte) ([]Hash, error) {
	if len(b)%HashSize != 0 {
		return nil, fmt.Errorf("chunk: %d bytes is not a list of hashes", len(b))
	}
	hs := make([]Hash, len(b)/HashSize)
	for i := range hs {
		hs[i] = Hash(b[i*HashSize:])
	}
	return hs, nil
}

// Sum returns the BLAKE3-256 hash of b.
func Sum(b []byte) Hash { return blake3.Sum256(b) }

// Hasher computes a Hash over a stream (for whole-object content hashes).
// It is not safe for concurrent use.
type Hasher struct {
	h *blake3.Hasher
}

// NewHasher returns an empty Hasher.
func NewHasher() *Hasher { return &Hasher{h: blake3.New()} }

// Write adds p to the hashed stream. It never returns an error.
func (h *Hasher) Write(p []byte) (int, error) { return h.h.Write(p) }

// Sum returns the hash of everything written so far; it does not change the
// Hasher's state.
func (h *Hasher) Sum() Hash {
	var out Hash
	h.h.Sum(out[:0])
	return out
}

// Reset returns the Hasher to its empty state.
func (h *Hasher) Reset() { h.h.Reset() }
