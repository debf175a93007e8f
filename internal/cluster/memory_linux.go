package cluster

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// defaultChunkCache is Config.ChunkCache's default: an eighth of the
// memory this process may use — the machine's, or less where a cgroup
// (a container's limit) or GOMEMLIMIT says so — or 1 GiB where none of
// them can be read.
func defaultChunkCache() int64 {
	var limit int64
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil && si.Totalram > 0 {
		limit = int64(uint64(si.Totalram) * uint64(si.Unit))
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(f); err == nil {
			// "max" (v2) or a huge number (v1) means no limit.
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (limit == 0 || n < limit) {
				limit = n
			}
		}
	}
	if m := debug.SetMemoryLimit(-1); m > 0 && m < 1<<62 && (limit == 0 || m < limit) {
		limit = m
	}
	if limit == 0 {
		return 1 << 30
	}
	return limit / 8
}
