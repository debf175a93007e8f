//go:build !linux

package segment

import (
	"errors"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// openDirect is Linux-only; elsewhere segments are written through the
// page cache.
func openDirect(name string) (*os.File, error) {
	return nil, errors.New("O_DIRECT is not supported on this platform")
}

// openDirectRead is Linux-only; elsewhere chunks are read through the page
// cache.
func openDirectRead(name string) (*os.File, error) {
	return nil, errors.ErrUnsupported
}

// readRecord is Linux-only (see direct_linux.go): elsewhere a record is
// read in two calls.
func readRecord(vfs.File, []byte, []byte, int64) bool { return false }
