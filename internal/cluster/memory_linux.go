package cluster

import "golang.org/x/sys/unix"

// defaultChunkCache is Config.ChunkCache's default: an eighth of the
// machine's memory, or 1 GiB where it cannot be read.
func defaultChunkCache() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 1 << 30
	}
	return int64(uint64(si.Totalram)*uint64(si.Unit)) / 8
}
