package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSleep: a sleep ends with its duration, or at once with its
// context's error.
func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("a sleep that ran out: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("a canceled sleep: %v", err)
	}
}
