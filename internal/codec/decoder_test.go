package codec

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

var errBad = errors.New("bad input")

func newTest(b []byte) Decoder {
	return NewDecoder(b, func(msg string) error { return errors.Join(errBad, errors.New(msg)) })
}

// TestRoundTrip: what the Append functions and encoding/binary write, the
// Decoder reads back, to the last byte.
func TestRoundTrip(t *testing.T) {
	var b []byte
	b = append(b, 7, 1)
	b = binary.BigEndian.AppendUint16(b, 0xbeef)
	b = binary.BigEndian.AppendUint32(b, 0xdeadbeef)
	b = binary.BigEndian.AppendUint64(b, 1<<60)
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -5)
	b = AppendBytes(b, []byte("key"))
	b = AppendBytes32(b, []byte("body"))
	b = binary.AppendUvarint(b, 2)
	b = AppendBytes(AppendBytes(b, []byte("a")), []byte("b"))

	d := newTest(b)
	if d.U8() != 7 || !d.Bool() || d.U16() != 0xbeef || d.U32() != 0xdeadbeef || d.U64() != 1<<60 {
		t.Fatal("fixed-size fields")
	}
	if d.CanonicalUvarint() != 300 || d.CanonicalVarint() != -5 {
		t.Fatal("varints")
	}
	if d.Str() != "key" || string(d.Bytes32()) != "body" {
		t.Fatal("strings")
	}
	n := d.Count(2)
	var got []string
	for range n {
		got = append(got, d.Str())
	}
	if strings.Join(got, ",") != "a,b" {
		t.Fatalf("counted strings %v", got)
	}
	if err := d.Done(); err != nil {
		t.Fatal(err)
	}
}

// TestFailures: every kind of bad input fails with the owner's error,
// the first failure sticks, and later reads return zero values.
func TestFailures(t *testing.T) {
	for name, c := range map[string]struct {
		in   []byte
		read func(d *Decoder)
		msg  string
	}{
		"short u32":        {[]byte{1, 2}, func(d *Decoder) { d.U32() }, "truncated"},
		"bad bool":         {[]byte{2}, func(d *Decoder) { d.Bool() }, "boolean byte 2"},
		"bad varint":       {[]byte{0x80}, func(d *Decoder) { d.Uvarint() }, "bad varint"},
		"long varint":      {[]byte{0x81, 0x00}, func(d *Decoder) { d.CanonicalUvarint() }, "bad varint"},
		"long length":      {[]byte{5, 'a'}, func(d *Decoder) { d.Bytes() }, "length 5 exceeds"},
		"long field32":     {[]byte{0, 0, 0, 9, 'a'}, func(d *Decoder) { d.Bytes32() }, "field of 9 bytes"},
		"count past input": {[]byte{100, 1, 2}, func(d *Decoder) { d.Count(1) }, "100 elements claimed"},
		"trailing":         {[]byte{1, 2}, func(d *Decoder) { d.U8() }, "1 trailing bytes"},
	} {
		d := newTest(c.in)
		c.read(&d)
		err := d.Done()
		if !errors.Is(err, errBad) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %q from the owner's error", name, err, c.msg)
		}
		if d.U64() != 0 || d.Bytes() != nil || d.Err() != err {
			t.Errorf("%s: reads after a failure", name)
		}
	}
	// A named field is named in the message.
	d := newTest(nil)
	d.What = "key"
	d.Str()
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), "bad key") {
		t.Errorf("named field: %v", err)
	}
	// FailWith keeps the first failure.
	d = newTest(nil)
	first := errors.New("first")
	d.FailWith(first)
	d.U8()
	if d.Err() != first {
		t.Errorf("FailWith: %v", d.Err())
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add([]byte{3, 'a', 'b', 'c', 0, 0, 0, 1, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := newTest(b)
		for d.Err() == nil && d.Len() > 0 {
			switch d.U8() % 6 {
			case 0:
				d.Bytes()
			case 1:
				d.Bytes32()
			case 2:
				for range d.Count(1) {
					d.U8()
				}
			case 3:
				d.CanonicalVarint()
			case 4:
				d.U64()
			case 5:
				d.Bool()
			}
		}
		if d.Err() != nil && !errors.Is(d.Err(), errBad) {
			t.Fatalf("failure not the owner's: %v", d.Err())
		}
	})
}
