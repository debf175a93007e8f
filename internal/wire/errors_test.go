package wire

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/internal/object"
)

// TestKindCodes: every kind of the object service has a code, codes and
// kinds map one to one, and errors match across the two types.
func TestKindCodes(t *testing.T) {
	for k := object.Internal; k.String() != fmt.Sprintf("kind %d", uint8(k)); k++ {
		c, ok := kindCodes[k]
		if !ok {
			t.Errorf("kind %v has no code", k)
			continue
		}
		if codeKinds[c] != k {
			t.Errorf("code %v maps back to %v, not %v", c, codeKinds[c], k)
		}
		oe := object.Errorf(k, "m")
		if CodeOf(fmt.Errorf("w: %w", oe)) != c {
			t.Errorf("CodeOf(%v) = %v, want %v", k, CodeOf(oe), c)
		}
		we := Errorf(c, "m")
		if object.KindOf(fmt.Errorf("w: %w", we)) != k {
			t.Errorf("KindOf(code %v) = %v, want %v", c, object.KindOf(we), k)
		}
		if !errors.Is(we, &object.Error{Kind: k}) || !errors.Is(oe, &Error{Code: c}) {
			t.Errorf("kind %v and code %v do not match each other under errors.Is", k, c)
		}
	}
	if len(codeKinds) != len(kindCodes) {
		t.Errorf("%d codes for %d kinds", len(codeKinds), len(kindCodes))
	}
	// The protocol's own failures stand for no kind, and match none.
	for _, c := range []Code{CodeUnauthenticated, CodeTLSRequired, CodeUnknownOp} {
		if errors.Is(object.ErrInternal, &Error{Code: c}) || errors.Is(&Error{Code: c}, object.ErrInternal) {
			t.Errorf("code %v matches object.ErrInternal", c)
		}
		if object.KindOf(&Error{Code: c}) != object.Internal {
			t.Errorf("code %v is not an internal failure to the object service", c)
		}
	}
}

// TestRangeCodes: the range client's codes, which cross the peer reply
// envelope, are this protocol's numbers for the kinds the object service
// maps them to (so peers of every version read a reply alike).
func TestRangeCodes(t *testing.T) {
	for c, k := range object.RangeCodes() {
		if kindCodes[k] != Code(c) {
			t.Errorf("range code %d maps to kind %v, whose code is %d", c, k, kindCodes[k])
		}
	}
}
