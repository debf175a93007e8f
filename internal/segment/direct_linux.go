package segment

import (
	"os"
	"syscall"
)

// openDirect opens name for writing with O_DIRECT; it fails where the file
// system refuses direct I/O.
func openDirect(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_WRONLY|syscall.O_DIRECT, 0)
}
