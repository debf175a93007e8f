//go:build !linux

package segment

import (
	"errors"
	"os"
)

// openDirect is Linux-only; elsewhere segments are written through the
// page cache.
func openDirect(name string) (*os.File, error) {
	return nil, errors.New("O_DIRECT is not supported on this platform")
}
