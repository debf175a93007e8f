// Package clock holds the waiting that packages reading time through a
// configured clock share: a sleep that ends with its context.
package clock

import (
	"context"
	"time"
)

// Sleep waits for d, or returns ctx's error if ctx ends first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
