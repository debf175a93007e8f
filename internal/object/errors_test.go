package object

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestKinds(t *testing.T) {
	for k := Internal; k < kindCount; k++ {
		if kindNames[k] == "" {
			t.Errorf("kind %d has no name", k)
		}
		e := Errorf(k, "detail %d", k)
		if got := KindOf(fmt.Errorf("wrapped: %w", e)); got != k {
			t.Errorf("KindOf(wrapped %v) = %v", k, got)
		}
		if !errors.Is(fmt.Errorf("wrapped: %w", e), &Error{Kind: k}) {
			t.Errorf("errors.Is does not match kind %v through a wrap", k)
		}
		if errors.Is(e, &Error{Kind: k%(kindCount-1) + 1}) {
			t.Errorf("kind %v matches kind %v", k, k%(kindCount-1)+1)
		}
	}
	if got := ErrNotFound.Error(); got != "cairn: not found" {
		t.Errorf("ErrNotFound.Error() = %q", got)
	}
}

func TestClasses(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Class
	}{
		{ErrNotLeader, ClassRetryable},
		{ErrRangeMoved, ClassRetryable},
		{ErrUnavailable, ClassRetryable},
		{ErrNotFound, ClassNotFound},
		{ErrDeleted, ClassNotFound},
		{ErrSpaceNotFound, ClassNotFound},
		{ErrPreconditionFailed, ClassConflict},
		{ErrSpaceNotEmpty, ClassConflict},
		{ErrKeyTooLong, ClassInvalid},
		{ErrTruncated, ClassInvalid},
		{ErrCorrupt, ClassCorrupt},
		{ErrAccessDenied, ClassDenied},
		{ErrOutcomeUnknown, ClassUnknown},
		{context.Canceled, ClassCanceled},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), ClassCanceled},
		{errors.New("disk on fire"), ClassInternal},
	} {
		if got := ClassOf(c.err); got != c.want {
			t.Errorf("ClassOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if !IsRetryable(fmt.Errorf("x: %w", ErrNotLeader)) || IsRetryable(ErrOutcomeUnknown) || IsRetryable(nil) {
		t.Error("IsRetryable")
	}
	if KindOf(nil) != 0 {
		t.Error("KindOf(nil) != 0")
	}
}

// protoErr stands for a protocol's error that carries a kind.
type protoErr struct{ k Kind }

func (p protoErr) Error() string    { return "proto" }
func (p protoErr) ObjectKind() Kind { return p.k }

func TestKinded(t *testing.T) {
	if KindOf(fmt.Errorf("peer: %w", protoErr{NotFound})) != NotFound {
		t.Error("KindOf does not see a Kinded error")
	}
	if KindOf(protoErr{0}) != Internal {
		t.Error("a Kinded error of no kind is not Internal")
	}
	if !errors.Is(Errorf(NotFound, "x"), protoErr{NotFound}) {
		t.Error("an *Error does not match a Kinded target of its kind")
	}
	if errors.Is(Errorf(Internal, "x"), protoErr{0}) {
		t.Error("an *Error matches a Kinded target of no kind")
	}
}
