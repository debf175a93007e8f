package mvcc

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/cairn-db/cairn/internal/codec"
)

// Record is one version of an object: the value stored at
// keys.Version(obj, Version).
type Record struct {
	// Version is the commit timestamp. It lives in the key, not in the
	// encoded value; the read functions fill it in.
	Version uint64
	// Parent is the newest version of the key older than this one when this
	// one was written, 0 if none. Put sets it. It records lineage and is not
	// rewritten when versions are pruned or deleted.
	Parent uint64
	// StartTS is the start timestamp of the writing transaction; Put sets it
	// to Version when it is 0 (a plain write).
	StartTS uint64
	// DeleteMarker marks a delete: the object is absent at this version.
	DeleteMarker bool
	// Size is the content length in bytes.
	Size int64
	// Hash is the BLAKE3 hash of the content, computed by the caller.
	Hash [32]byte
	// ETag is the S3 entity tag.
	ETag string
	// ContentType is the MIME type.
	ContentType string
	// Meta is the user metadata.
	Meta map[string]string
	// Tags are the object tags.
	Tags map[string]string
	// Headers are the content headers and checksums kept with the
	// version, by lower-case HTTP name (see wire.ObjectInfo.Headers).
	// Encoded only when present (flagHeaders), after Manifest.
	Headers map[string]string
	// Inline holds the content of small objects.
	Inline []byte
	// Manifest is the encoded chunk manifest of large objects (package chunk
	// owns its format).
	Manifest []byte
	// Origin is the version this one was cloned from, in another object
	// (or an older version of this one), when it is a clone: its content
	// is Origin's, chunks shared. Encoded only when set (flagOrigin),
	// after Headers.
	Origin *Origin
}

// Origin names a version of an object by its space's id (stable for the
// space's life; names may be reused after a delete), its key and its
// version.
type Origin struct {
	SpaceID uint32
	Key     string
	Version uint64
}

// Record encoding (see the package doc for the drawing).
const (
	recordMagic0  = 0xCA
	recordMagic1  = 0x7E
	recordFormat1 = 1
	headerLen     = 3 // magic (2) + format version (1)
	trailerLen    = 4 // CRC32C
	flagDelete    = 1 << 0
	flagHeaders   = 1 << 1 // a Headers map follows Manifest
	flagOrigin    = 1 << 2 // an Origin follows Headers
	knownFlags    = flagDelete | flagHeaders | flagOrigin
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Marshal encodes r (without Version, which lives in the key). Maps are
// written in sorted key order, so equal records encode to equal bytes.
func (r *Record) Marshal() []byte { return r.AppendMarshal(make([]byte, 0, r.MarshalCap())) }

// AppendMarshal appends Marshal's encoding of r to b.
func (r *Record) AppendMarshal(b []byte) []byte {
	start := len(b)
	b = append(b, recordMagic0, recordMagic1, recordFormat1)
	var flags byte
	if r.DeleteMarker {
		flags |= flagDelete
	}
	if len(r.Headers) > 0 {
		flags |= flagHeaders
	}
	if r.Origin != nil {
		flags |= flagOrigin
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, r.Parent)
	b = binary.AppendUvarint(b, r.StartTS)
	b = binary.AppendVarint(b, r.Size)
	b = append(b, r.Hash[:]...)
	b = appendString(b, r.ETag)
	b = appendString(b, r.ContentType)
	b = appendMap(b, r.Meta)
	b = appendMap(b, r.Tags)
	b = appendBytes(b, r.Inline)
	b = appendBytes(b, r.Manifest)
	if len(r.Headers) > 0 {
		b = appendMap(b, r.Headers)
	}
	if o := r.Origin; o != nil {
		b = binary.AppendUvarint(b, uint64(o.SpaceID))
		b = appendString(b, o.Key)
		b = binary.AppendUvarint(b, o.Version)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// MarshalCap is an upper bound of the length of r's encoding.
func (r *Record) MarshalCap() int {
	n := headerLen + 1 + 3*binary.MaxVarintLen64 + 32 + len(r.ETag) + len(r.ContentType) +
		len(r.Inline) + len(r.Manifest) + 6*binary.MaxVarintLen64 + trailerLen
	for k, v := range r.Meta {
		n += len(k) + len(v) + 2*binary.MaxVarintLen64
	}
	for k, v := range r.Tags {
		n += len(k) + len(v) + 2*binary.MaxVarintLen64
	}
	for k, v := range r.Headers {
		n += len(k) + len(v) + 2*binary.MaxVarintLen64
	}
	if r.Origin != nil {
		n += len(r.Origin.Key) + 3*binary.MaxVarintLen64
	}
	return n
}

// appendBytes is appendString for a byte slice, without copying it into a
// string first (inline bodies make that copy a large share of a small PUT).
func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendMap(b []byte, m map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		b = appendString(b, k)
		b = appendString(b, m[k])
	}
	return b
}

// Unmarshal decodes a record written by Marshal. Version is left 0. The
// result owns its memory (nothing aliases b). Any damage — bad magic, unknown
// format version or flags, bad checksum, truncation, trailing bytes, or a
// non-canonical encoding — is reported as ErrCorrupt.
func Unmarshal(b []byte) (*Record, error) {
	r := &Record{}
	if err := unmarshal(r, b, true); err != nil {
		return nil, err
	}
	return r, nil
}

// unmarshal is Unmarshal into r, a zero Record. Without content it leaves
// Inline and Manifest nil instead of copying them out of b, but checks the
// record all the same (their lengths, and the checksum over every byte).
func unmarshal(r *Record, b []byte, content bool) error {
	if len(b) < headerLen+trailerLen {
		return fmt.Errorf("%w: record of %d bytes is too short", ErrCorrupt, len(b))
	}
	if b[0] != recordMagic0 || b[1] != recordMagic1 {
		return fmt.Errorf("%w: bad record magic %#x %#x", ErrCorrupt, b[0], b[1])
	}
	if b[2] != recordFormat1 {
		return fmt.Errorf("%w: unknown record format version %d", ErrCorrupt, b[2])
	}
	body, sum := b[:len(b)-trailerLen], binary.BigEndian.Uint32(b[len(b)-trailerLen:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return fmt.Errorf("%w: record checksum %08x, want %08x", ErrCorrupt, got, sum)
	}
	d := newDecoder(body[headerLen:])
	flags := d.byte()
	if flags&^knownFlags != 0 {
		d.fail("unknown flags %#x", flags)
	}
	r.DeleteMarker = flags&flagDelete != 0
	r.Parent = d.uvarint()
	r.StartTS = d.uvarint()
	r.Size = d.varint()
	copy(r.Hash[:], d.bytes(32))
	r.ETag = d.string()
	r.ContentType = d.string()
	r.Meta = d.stringMap()
	r.Tags = d.stringMap()
	if content {
		r.Inline = d.clonedBytes()
		r.Manifest = d.clonedBytes()
	} else {
		d.bytes(d.length())
		d.bytes(d.length())
	}
	if flags&flagHeaders != 0 {
		if r.Headers = d.stringMap(); d.Err() == nil && len(r.Headers) == 0 {
			d.fail("headers flag with no headers")
		}
	}
	if flags&flagOrigin != 0 {
		o := &Origin{}
		id := d.uvarint()
		if id > 1<<32-1 {
			d.fail("origin space id %d out of range", id)
		}
		o.SpaceID, o.Key, o.Version = uint32(id), d.string(), d.uvarint()
		if d.Err() == nil && (o.Key == "" || o.Version == 0) {
			d.fail("origin without a key or version")
		}
		r.Origin = o
	}
	return d.Done()
}

// decoder reads the body of a record (codec.Decoder, varints in their
// shortest form so that decoding is one to one); a failure is ErrCorrupt.
type decoder struct{ codec.Decoder }

func newDecoder(b []byte) decoder {
	return decoder{codec.NewDecoder(b, func(msg string) error { return fmt.Errorf("%w: record: %s", ErrCorrupt, msg) })}
}

func (d *decoder) fail(format string, args ...any) { d.Fail(format, args...) }
func (d *decoder) bytes(n int) []byte              { return d.Take(uint64(n)) }
func (d *decoder) byte() byte                      { return d.U8() }
func (d *decoder) uvarint() uint64                 { return d.CanonicalUvarint() }
func (d *decoder) varint() int64                   { return d.CanonicalVarint() }
func (d *decoder) length() int                     { return d.Length(true) }

func (d *decoder) string() string { return string(d.bytes(d.length())) }

func (d *decoder) clonedBytes() []byte {
	n := d.length()
	if n == 0 {
		return nil
	}
	return slices.Clone(d.bytes(n))
}

func (d *decoder) stringMap() map[string]string {
	n := d.uvarint()
	if n == 0 || d.Err() != nil {
		return nil
	}
	if n > uint64(d.Len()/2) { // each entry takes at least two bytes
		d.fail("map of %d entries exceeds the %d remaining bytes", n, d.Len())
		return nil
	}
	m := make(map[string]string, n)
	var prev string
	for i := range n {
		k, v := d.string(), d.string()
		if d.Err() != nil {
			return nil
		}
		if i > 0 && k <= prev {
			d.fail("map keys out of order")
			return nil
		}
		m[k], prev = v, k
	}
	return m
}
