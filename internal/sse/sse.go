// Package sse encrypts object bodies at rest: the envelope behind S3's
// server-side encryption (SSE-S3, SSE-KMS, SSE-C).
//
// Every encrypted version has its own random 256-bit data key. The body
// is encrypted with AES-256 in counter mode, so ciphertext and plaintext
// have the same length and any byte range can be decrypted on its own.
// A body is one or more segments (a multipart upload's parts), each with
// its own random 64-bit nonce: segment i's counter block for byte offset
// o within it is nonce_i || o/16 (big-endian), so no two blocks of one
// data key share a counter, even when a part is uploaded again.
//
// Counter mode does not authenticate; the stored bytes are: the chunk
// store verifies every chunk's BLAKE3 hash on read, so a byte changed on
// disk is an error, never a different plaintext. The data key itself is
// kept only wrapped (Wrap: AES-256-GCM) under a key encryption key: the
// cluster key (SSE-S3), a key of the cluster's KMS (SSE-KMS) or the
// customer's key, which is never stored (SSE-C). A wrong key fails to
// unwrap.
//
// Random data keys make equal plaintexts encrypt to unrelated bytes, so
// the content-addressed chunk store never shares a chunk between two
// encrypted versions: nothing about one key's data can be learned by
// writing under another.
package sse

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// KeySize is the size of a data key and of every key that wraps one.
const KeySize = 32

// NonceSize is the size of a segment's nonce.
const NonceSize = 8

// ErrUnwrap is the error of a wrapped data key that does not open: the
// wrong key, or damaged.
var ErrUnwrap = errors.New("sse: the data key does not open with this key")

// NewKey returns a random key.
func NewKey() []byte {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return k
}

// NewNonce returns a random segment nonce.
func NewNonce() [NonceSize]byte {
	var n [NonceSize]byte
	if _, err := rand.Read(n[:]); err != nil {
		panic(err)
	}
	return n
}

const wrapVersion = 1

// Wrap seals the data key dk under kek, bound to ad:
// version u8 (1) | nonce [12] | AES-256-GCM(dk) with its tag.
func Wrap(kek, dk, ad []byte) ([]byte, error) {
	g, err := gcm(kek)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 1+g.NonceSize(), 1+g.NonceSize()+len(dk)+g.Overhead())
	out[0] = wrapVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, err
	}
	return g.Seal(out, out[1:], dk, ad), nil
}

// Unwrap opens what Wrap sealed with the same kek and ad; anything else
// is ErrUnwrap.
func Unwrap(kek, wrapped, ad []byte) ([]byte, error) {
	g, err := gcm(kek)
	if err != nil {
		return nil, err
	}
	if len(wrapped) < 1+g.NonceSize()+g.Overhead() || wrapped[0] != wrapVersion {
		return nil, ErrUnwrap
	}
	n := 1 + g.NonceSize()
	dk, err := g.Open(nil, wrapped[1:n], wrapped[n:], ad)
	if err != nil || len(dk) != KeySize {
		return nil, ErrUnwrap
	}
	return dk, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("sse: a key is %d bytes, not %d", KeySize, len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Segment is one independently encrypted stretch of a body.
type Segment struct {
	Nonce [NonceSize]byte
	Size  int64
}

// stream returns the keystream of a segment starting at byte offset off
// within it.
func stream(b cipher.Block, nonce [NonceSize]byte, off int64) (cipher.Stream, int) {
	var iv [aes.BlockSize]byte
	copy(iv[:NonceSize], nonce[:])
	binary.BigEndian.PutUint64(iv[NonceSize:], uint64(off/aes.BlockSize))
	s := cipher.NewCTR(b, iv[:])
	skip := int(off % aes.BlockSize)
	if skip > 0 {
		var junk [aes.BlockSize]byte
		s.XORKeyStream(junk[:skip], junk[:skip])
	}
	return s, skip
}

// Encrypt returns a reader of r's bytes encrypted as one segment under dk
// and nonce.
func Encrypt(r io.Reader, dk []byte, nonce [NonceSize]byte) (io.Reader, error) {
	return Decrypt(r, dk, []Segment{{Nonce: nonce, Size: -1}}, 0)
}

// Decrypt returns a reader of the plaintext of the bytes r yields, which
// are the ciphertext of the body made of segs from offset off on. (Counter
// mode is its own inverse: Encrypt is Decrypt of one open-ended segment.)
// A last segment of Size -1 runs to the end.
func Decrypt(r io.Reader, dk []byte, segs []Segment, off int64) (io.Reader, error) {
	b, err := aes.NewCipher(dk)
	if err != nil || len(dk) != KeySize {
		return nil, fmt.Errorf("sse: bad data key (%d bytes)", len(dk))
	}
	d := &ctrReader{r: r, b: b, segs: segs}
	for d.i < len(segs) && segs[d.i].Size >= 0 && off >= segs[d.i].Size {
		off -= segs[d.i].Size
		d.i++
	}
	if d.i == len(segs) {
		if off > 0 {
			return nil, fmt.Errorf("sse: offset past the segments")
		}
		return d, nil
	}
	d.start(off)
	return d, nil
}

type ctrReader struct {
	r    io.Reader
	b    cipher.Block
	segs []Segment
	i    int   // current segment
	left int64 // bytes left in it (-1: unbounded)
	s    cipher.Stream
}

func (d *ctrReader) start(off int64) {
	seg := d.segs[d.i]
	d.s, _ = stream(d.b, seg.Nonce, off)
	d.left = -1
	if seg.Size >= 0 {
		d.left = seg.Size - off
	}
}

func (d *ctrReader) Read(p []byte) (int, error) {
	for d.i < len(d.segs) && d.left == 0 {
		d.i++
		if d.i < len(d.segs) {
			d.start(0)
		}
	}
	if d.i >= len(d.segs) {
		return 0, io.EOF // past the last segment: any more ciphertext is not ours
	}
	if d.left >= 0 && int64(len(p)) > d.left {
		p = p[:d.left]
	}
	n, err := d.r.Read(p)
	d.s.XORKeyStream(p[:n], p[:n])
	if d.left >= 0 {
		d.left -= int64(n)
	}
	return n, err
}

// EncodeSegments is the stored form of a body's segments:
// "NONCE:SIZE,NONCE:SIZE" (nonces base64url), the last size -1 for a
// single segment that runs to the end.
func EncodeSegments(segs []Segment) string {
	var b strings.Builder
	for i, s := range segs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(base64.RawURLEncoding.EncodeToString(s.Nonce[:]))
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(s.Size, 10))
	}
	return b.String()
}

// ParseSegments reads what EncodeSegments wrote.
func ParseSegments(s string) ([]Segment, error) {
	var out []Segment
	for _, f := range strings.Split(s, ",") {
		n, size, ok := strings.Cut(f, ":")
		nb, err := base64.RawURLEncoding.DecodeString(n)
		v, err2 := strconv.ParseInt(size, 10, 64)
		if !ok || err != nil || err2 != nil || len(nb) != NonceSize || v < -1 {
			return nil, fmt.Errorf("sse: malformed segment list %q", s)
		}
		var seg Segment
		copy(seg.Nonce[:], nb)
		seg.Size = v
		out = append(out, seg)
	}
	for i, seg := range out {
		if seg.Size < 0 && i != len(out)-1 {
			return nil, fmt.Errorf("sse: malformed segment list %q", s)
		}
	}
	return out, nil
}
