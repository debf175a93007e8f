package segment

import (
	"os"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// openDirect opens name for writing with O_DIRECT; it fails where the file
// system refuses direct I/O.
func openDirect(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_WRONLY|syscall.O_DIRECT, 0)
}

// openDirectRead opens name for reading with O_DIRECT.
func openDirectRead(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_DIRECT, 0)
}

// readRecord reads a record's header and data at off of f with one
// system call where f is a file of the real disk (a chunk read is
// otherwise two: the header, then the data). It reports false where it
// could not (no descriptor: a memory file system; a short read), leaving
// the reads to the caller.
func readRecord(f vfs.File, hdr, data []byte, off int64) bool {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return false
	}
	n, err := unix.Preadv(int(fd), [][]byte{hdr, data}, off)
	return err == nil && n == len(hdr)+len(data)
}
