package tstamp

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	now := time.UnixMilli(1_790_000_000_123)
	ts := Make(now.UnixMilli(), 77)
	if Physical(ts) != now.UnixMilli() || Logical(ts) != 77 || !Time(ts).Equal(now) {
		t.Fatalf("round trip of %d lost parts", ts)
	}
	got, err := Parse(String(ts))
	if err != nil || got != ts {
		t.Fatalf("Parse(String(%d)) = %d, %v", ts, got, err)
	}
	if String(ts) >= String(ts+1) {
		t.Fatal("printed ids do not sort like timestamps")
	}
	for _, bad := range []string{"", "xyz", "000000000000000g", "00000000000000000"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestString(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, ts := range append([]uint64{0, 1, 0xf, 0x10, Max, Max - 1, 1 << 63}, r.Uint64(), r.Uint64(), r.Uint64()>>20) {
		if got, want := String(ts), fmt.Sprintf("%016x", ts); got != want {
			t.Errorf("String(%#x) = %q, want %q", ts, got, want)
		}
	}
}
