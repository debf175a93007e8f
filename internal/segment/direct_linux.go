package segment

import (
	"os"
	"syscall"
)

// openDirect opens name for writing with O_DIRECT, or returns nil if the
// file system refuses it (tmpfs, some network file systems).
func openDirect(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_WRONLY|syscall.O_DIRECT, 0)
}
