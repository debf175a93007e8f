//go:build !(amd64 && gc && !purego)

package md5lanes

// haveKernel is false: without the AVX-512 kernel every Stream hashes with
// crypto/md5 in its writer's goroutine.
const haveKernel = false

func block16(state *uint32, base uintptr, ptrs *int32, mask uint64, n int) {
	panic("md5lanes: no multi-lane kernel on this platform")
}
