//go:build !linux

package cluster

// defaultChunkCache is Config.ChunkCache's default: 1 GiB where the
// machine's memory is not read.
func defaultChunkCache() int64 { return 1 << 30 }
