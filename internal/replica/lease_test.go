package replica

import (
	"testing"
	"time"
)

func TestLease(t *testing.T) {
	const offset, timeout = 500 * time.Millisecond, time.Second
	t0 := time.Unix(100, 0)
	var l lease
	if l.valid(t0, 1, offset, timeout) || !l.expiration(offset, timeout).IsZero() {
		t.Fatal("zero lease is valid")
	}
	l = l.extend(3, t0)
	if got := l.expiration(offset, timeout); !got.Equal(t0.Add(500 * time.Millisecond)) {
		t.Fatalf("expiration %v", got)
	}
	if !l.valid(t0.Add(499*time.Millisecond), 3, offset, timeout) {
		t.Fatal("lease invalid before expiration")
	}
	if l.valid(t0.Add(500*time.Millisecond), 3, offset, timeout) {
		t.Fatal("lease valid at expiration")
	}
	if l.valid(t0, 4, offset, timeout) {
		t.Fatal("lease valid in another term")
	}
	// An older acknowledgement does not shorten the lease; a new term resets it.
	if got := l.extend(3, t0.Add(-time.Second)).contact; !got.Equal(t0) {
		t.Fatalf("older ack moved contact to %v", got)
	}
	if got := l.extend(4, t0.Add(-time.Second)); got.term != 4 || !got.contact.Equal(t0.Add(-time.Second)) {
		t.Fatalf("new term lease %+v", got)
	}
	term, at, ok := decodeLeaseCtx(encodeLeaseCtx(7, t0))
	if !ok || term != 7 || !at.Equal(t0) {
		t.Fatalf("lease ctx %d %v %v", term, at, ok)
	}
	if _, _, ok := decodeLeaseCtx([]byte("short")); ok {
		t.Fatal("decoded a short lease ctx")
	}
}
