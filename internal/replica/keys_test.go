package replica

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func TestValueFraming(t *testing.T) {
	v := encodeValue([]byte("payload"))
	p, err := decodeValue(v)
	if err != nil || string(p) != "payload" {
		t.Fatalf("round trip: %q, %v", p, err)
	}
	for i := range v {
		bad := bytes.Clone(v)
		bad[i] ^= 0x10
		if _, err := decodeValue(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipping byte %d: %v", i, err)
		}
	}
	if _, err := decodeValue(v[:len(v)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated value: %v", err)
	}
	if _, err := decodeUint64s(encodeUint64s(1, 2), 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wrong length: %v", err)
	}
}

func TestKeysSortAndParse(t *testing.T) {
	p := rangePrefix(0x0102)
	if !bytes.HasPrefix(p, []byte("\x01r")) || len(p) != 10 {
		t.Fatalf("prefix %x", p)
	}
	if bytes.Compare(logKey(p, 255), logKey(p, 256)) >= 0 {
		t.Fatal("log keys do not sort by index")
	}
	if bytes.Compare(rangePrefix(1), rangePrefix(2)) >= 0 || bytes.HasPrefix(rangePrefix(2), rangePrefix(1)) {
		t.Fatal("range prefixes overlap")
	}
	if i, ok := logIndex(p, logKey(p, 77)); !ok || i != 77 {
		t.Fatalf("logIndex %d %v", i, ok)
	}
	if _, ok := logIndex(p, stateKey(p, suffixHardState)); ok {
		t.Fatal("hard state key parsed as a log key")
	}
}

func TestCommandFraming(t *testing.T) {
	id, cmd, err := decodeCommand(encodeCommand(42, []byte("x")))
	if err != nil || id != 42 || string(cmd) != "x" {
		t.Fatalf("%d %q %v", id, cmd, err)
	}
	if _, _, err := decodeCommand([]byte{cmdVersion, 1}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short command: %v", err)
	}
	if _, _, err := decodeCommand(append([]byte{9}, make([]byte, 8)...)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad version: %v", err)
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(encodeValue([]byte("x")))
	f.Add(encodeUint64s(5, 5))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeValue(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeValue(p), b) {
			t.Fatalf("accepted %x, which does not re-encode", b)
		}
		_, _ = decodeEntry(b)
	})
}

func FuzzDecodeCommand(f *testing.F) {
	f.Add(encodeCommand(1, []byte("cmd")))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, cmd, err := decodeCommand(b)
		if err == nil && !bytes.Equal(encodeCommand(id, cmd), b) {
			t.Fatalf("accepted %x, which does not re-encode", b)
		}
	})
}

// TestFormatGolden pins the persistent formats: a change here breaks every
// node's existing data and needs a new format version instead.
func TestFormatGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"log key", logKey(rangePrefix(1), 6), "017200000000000000016c0000000000000006"},
		{"applied key", stateKey(rangePrefix(2), suffixApplied), "0172000000000000000261"},
		{"truncated value", encodeUint64s(5, 5), "ca0100000000000000050000000000000005952b4096"},
		{"command", encodeCommand(7, []byte("x")), "01000000000000000778"},
	} {
		if got := fmt.Sprintf("%x", c.got); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
