package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Decoder reads a byte format field by field. Use NewDecoder.
type Decoder struct {
	b      []byte
	err    error
	errorf func(msg string) error
	// What names the field being read, for the failure message ("bad
	// key"); empty, the message says what failed ("truncated").
	What string
}

// NewDecoder reads b. errorf makes the error a failed read reports from
// its message; it decides the error's class.
func NewDecoder(b []byte, errorf func(msg string) error) Decoder {
	return Decoder{b: b, errorf: errorf}
}

// Fail records a failure, unless one is recorded already, and stops
// reading.
func (d *Decoder) Fail(format string, args ...any) {
	if d.err == nil {
		msg := fmt.Sprintf(format, args...)
		if d.What != "" {
			msg = "bad " + d.What
		}
		d.err = d.errorf(msg)
	}
	d.b = nil
}

// FailWith records err as the failure, unless one is recorded already.
func (d *Decoder) FailWith(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

// Err is the first failure, or nil.
func (d *Decoder) Err() error { return d.err }

// Len is the number of bytes not read yet.
func (d *Decoder) Len() int { return len(d.b) }

// Rest returns the bytes not read yet (aliasing the input) and reads them.
func (d *Decoder) Rest() []byte {
	b := d.b
	d.b = nil
	return b
}

// Done returns the first failure, or a failure if bytes are left over.
func (d *Decoder) Done() error {
	if d.err == nil && len(d.b) != 0 {
		d.What = ""
		d.Fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

// Take reads n bytes, aliasing the input.
func (d *Decoder) Take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.Fail("truncated: %d bytes wanted, %d left", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// U8 reads a byte.
func (d *Decoder) U8() uint8 {
	if v := d.Take(1); v != nil {
		return v[0]
	}
	return 0
}

// U16 reads a big-endian uint16.
func (d *Decoder) U16() uint16 {
	if v := d.Take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

// U32 reads a big-endian uint32.
func (d *Decoder) U32() uint32 {
	if v := d.Take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

// U64 reads a big-endian uint64.
func (d *Decoder) U64() uint64 {
	if v := d.Take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	switch v := d.U8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.Fail("boolean byte %d", v)
		return false
	}
}

// Uvarint reads a uvarint (binary.AppendUvarint).
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.Fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// CanonicalUvarint reads a uvarint in its shortest form only, for formats
// whose decoding must be one to one (a checksummed record).
func (d *Decoder) CanonicalUvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || (n > 1 && d.b[n-1] == 0) {
		d.Fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// CanonicalVarint reads a zig-zag varint (binary.AppendVarint) in its
// shortest form only.
func (d *Decoder) CanonicalVarint() int64 {
	u := d.CanonicalUvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// Length reads a uvarint length (shortest form if canonical) that must
// fit in the bytes left.
func (d *Decoder) Length(canonical bool) int {
	var n uint64
	if canonical {
		n = d.CanonicalUvarint()
	} else {
		n = d.Uvarint()
	}
	if d.err == nil && n > uint64(len(d.b)) {
		d.Fail("length %d exceeds the %d remaining bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

// Bytes reads a uvarint-length-prefixed byte string, aliasing the input.
func (d *Decoder) Bytes() []byte { return d.Take(uint64(d.Length(false))) }

// Str reads a uvarint-length-prefixed string.
func (d *Decoder) Str() string { return string(d.Bytes()) }

// Bytes32 reads a u32-length-prefixed byte string, aliasing the input.
func (d *Decoder) Bytes32() []byte {
	n := d.U32()
	if d.err == nil && uint64(n) > uint64(len(d.b)) {
		d.Fail("field of %d bytes in %d", n, len(d.b))
		return nil
	}
	return d.Take(uint64(n))
}

// Clone returns a copy of b, or nil for an empty b: for a field a decoded
// value keeps after the input is reused.
func Clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}

// Count reads a uvarint element count and bounds it by the bytes left,
// given the smallest encoding of one element.
func (d *Decoder) Count(minElem int) int {
	return d.bound(d.Uvarint(), minElem)
}

// Count32 is Count for a u32 count.
func (d *Decoder) Count32(minElem int) int {
	return d.bound(uint64(d.U32()), minElem)
}

func (d *Decoder) bound(n uint64, minElem int) int {
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b))/uint64(max(minElem, 1)) || n > math.MaxInt32 {
		d.Fail("%d elements claimed in %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

// AppendBytes appends v with a uvarint length prefix (Bytes reads it).
func AppendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// AppendBytes32 appends v with a u32 length prefix (Bytes32 reads it).
func AppendBytes32(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}
