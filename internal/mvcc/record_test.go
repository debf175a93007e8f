package mvcc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
)

func sampleRecords() []*Record {
	full := &Record{
		Parent: 1 << 40, StartTS: 12345, DeleteMarker: false, Size: 1 << 33,
		ETag: `"d41d8cd98f00b204e9800998ecf8427e"`, ContentType: "application/json",
		Meta: map[string]string{"b": "2", "a": "1", "": "empty"}, Tags: map[string]string{"t": "v"},
		Inline: []byte("hello\x00world"), Manifest: []byte{1, 2, 3},
		Headers: map[string]string{"cache-control": "no-cache", "x-amz-checksum-crc32": "AAAAAA=="},
	}
	for i := range full.Hash {
		full.Hash[i] = byte(i)
	}
	clone := &Record{Size: 4, Inline: []byte("data"), Origin: &Origin{SpaceID: 1<<32 - 1, Key: "a/b\x00", Version: 1 << 50}}
	return []*Record{{}, {DeleteMarker: true, Parent: 7, StartTS: 9}, {Size: -1}, full, clone}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		b := r.Marshal()
		got, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip: got %+v, want %+v", got, r)
		}
		if got := (&Record{}); unmarshal(got, b, false) != nil || !reflect.DeepEqual(got, listed(r)) {
			t.Fatalf("without content: got %+v; want %+v", got, listed(r))
		}
		// Deterministic: maps in sorted order, so repeated encodings agree.
		for range 10 {
			if !bytes.Equal(r.Marshal(), b) {
				t.Fatal("Marshal is not deterministic")
			}
		}
	}
}

// TestRecordFormat pins the encoding of format 1: it is persistent.
func TestRecordFormat(t *testing.T) {
	r := &Record{DeleteMarker: true, Parent: 5, StartTS: 300, Size: 3, ETag: "e",
		Tags: map[string]string{"k": "v"}, Inline: []byte("abc")}
	want := []byte{0xCA, 0x7E, 1, // magic, format
		1,          // flags: delete marker
		5,          // parent
		0xAC, 0x02, // start ts 300
		6, // size 3, zig-zag
	}
	want = append(want, make([]byte, 32)...) // hash
	want = append(want, 1, 'e', 0, 0, 1, 1, 'k', 1, 'v', 3, 'a', 'b', 'c', 0)
	want = binary.BigEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if got := r.Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("encoding\n got % x\nwant % x", got, want)
	}
	// Headers set flag 2 and follow the manifest.
	r.Headers = map[string]string{"h": "v"}
	want = want[:len(want)-4]
	want[3] |= 2
	want = append(want, 1, 1, 'h', 1, 'v')
	want = binary.BigEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if got := r.Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("encoding with headers\n got % x\nwant % x", got, want)
	}
	// An origin sets flag 4 and follows the headers: space id, key, version.
	r.Origin = &Origin{SpaceID: 7, Key: "k", Version: 300}
	want = want[:len(want)-4]
	want[3] |= 4
	want = append(want, 7, 1, 'k', 0xAC, 0x02)
	want = binary.BigEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if got := r.Marshal(); !bytes.Equal(got, want) {
		t.Fatalf("encoding with an origin\n got % x\nwant % x", got, want)
	}
}

func TestRecordCorrupt(t *testing.T) {
	good := sampleRecords()[3].Marshal()
	reseal := func(b []byte) []byte {
		b = bytes.Clone(b[:len(b)-4])
		return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := map[string][]byte{
		"empty":  nil,
		"short":  good[:5],
		"magic":  reseal(mutate(func(b []byte) []byte { b[0] = 0; return b })),
		"format": reseal(mutate(func(b []byte) []byte { b[2] = 2; return b })),
		"flags":  reseal(mutate(func(b []byte) []byte { b[3] = 0x80; return b })),
		"no headers": func() []byte { // the headers flag with an empty map
			b := sampleRecords()[1].Marshal()
			b = append(b[:len(b)-4:len(b)-4], 0, 0, 0, 0, 0)
			b[3] |= 2
			return reseal(b)
		}(),
		"no origin": func() []byte { // the origin flag with an empty key
			b := sampleRecords()[1].Marshal()
			b = append(b[:len(b)-4:len(b)-4], 1, 0, 5, 0, 0, 0, 0)
			b[3] |= 4
			return reseal(b)
		}(),
		"origin id": func() []byte { // a space id over 32 bits
			b := sampleRecords()[1].Marshal()
			b = append(b[:len(b)-4:len(b)-4], 0x80, 0x80, 0x80, 0x80, 0x10, 1, 'k', 5, 0, 0, 0, 0)
			b[3] |= 4
			return reseal(b)
		}(),
		"crc":        mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }),
		"bit flip":   mutate(func(b []byte) []byte { b[40] ^= 4; return b }),
		"truncated":  reseal(good[:len(good)-6]),
		"trailing":   reseal(append(mutate(func(b []byte) []byte { return b[:len(b)-4] }), 0, 0, 0, 0, 0)),
		"overlong":   reseal(append([]byte{0xCA, 0x7E, 1, 0, 0x80, 0x00}, make([]byte, 45)...)),
		"huge len":   reseal(append(append([]byte{0xCA, 0x7E, 1, 0, 0, 0, 0}, make([]byte, 32)...), 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0, 0, 0, 0)),
		"huge map":   reseal(append(append([]byte{0xCA, 0x7E, 1, 0, 0, 0, 0}, make([]byte, 32)...), 0, 0, 0xFF, 0xFF, 0x03, 0, 0, 0, 0, 0)),
		"map order":  reseal(append(append([]byte{0xCA, 0x7E, 1, 0, 0, 0, 0}, make([]byte, 32)...), 0, 0, 2, 1, 'b', 0, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0)),
		"map repeat": reseal(append(append([]byte{0xCA, 0x7E, 1, 0, 0, 0, 0}, make([]byte, 32)...), 0, 0, 2, 1, 'a', 0, 1, 'a', 0, 0, 0, 0, 0, 0, 0, 0)),
	}
	for name, b := range cases {
		_, err := Unmarshal(b)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
		t.Logf("%s: %v", name, err)
		if err := unmarshal(&Record{}, b, false); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: without content: err = %v, want ErrCorrupt", name, err)
		}
	}
	// The well-formed version of the map cases decodes.
	ok := reseal(append(append([]byte{0xCA, 0x7E, 1, 0, 0, 0, 0}, make([]byte, 32)...), 0, 0, 2, 1, 'a', 0, 1, 'b', 0, 0, 0, 0, 0, 0, 0, 0))
	if r, err := Unmarshal(ok); err != nil || len(r.Meta) != 2 {
		t.Errorf("well-formed map: %+v %v", r, err)
	}
}

func TestUnmarshalOwnsMemory(t *testing.T) {
	b := sampleRecords()[3].Marshal()
	r, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if string(r.Inline) != "hello\x00world" || string(r.Manifest) != "\x01\x02\x03" {
		t.Fatalf("decoded record aliases its input: %+v", r)
	}
}

// FuzzUnmarshal feeds raw bytes, and the same bytes resealed with a valid
// checksum so the fuzzer reaches the body decoder. Whatever decodes must
// re-encode to the same bytes (the encoding is canonical).
func FuzzUnmarshal(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(r.Marshal())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, binary.BigEndian.AppendUint32(bytes.Clone(b), crc32.Checksum(b, castagnoli))} {
			r, err := Unmarshal(in)
			l := &Record{}
			lerr := unmarshal(l, in, false)
			if (err == nil) != (lerr == nil) {
				t.Fatalf("Unmarshal: %v; without content: %v", err, lerr)
			}
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error not ErrCorrupt: %v", err)
				}
				continue
			}
			if !reflect.DeepEqual(l, listed(r)) {
				t.Fatalf("without content: %+v, want %+v", l, listed(r))
			}
			if re := r.Marshal(); !bytes.Equal(re, in) {
				t.Fatalf("re-encoding differs\n got % x\nwant % x", re, in)
			}
		}
	})
}
