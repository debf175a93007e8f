//go:build amd64 && gc && !purego

package md5lanes

import "golang.org/x/sys/cpu"

// haveKernel reports whether block16 can run here: it needs AVX-512F, and
// AVX-512DQ for VANDNPD.
var haveKernel = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

// block16 runs n bytes (a multiple of 64, more than 0) of MD5 blocks for
// each lane set in mask, lane i's bytes starting at base+ptrs[i]. state
// is a state16's first word. Every lane's state words are loaded and
// stored; a lane not in mask comes out as garbage.
//
//go:noescape
func block16(state *uint32, base uintptr, ptrs *int32, mask uint64, n int)

// consts16 is MD5's 64 sine constants, each repeated once per lane; the
// kernel reads the table through the slice's data pointer.
var consts16 = func() []uint32 {
	c := make([]uint32, 0, Lanes*len(md5Consts))
	for _, k := range md5Consts {
		for range Lanes {
			c = append(c, k)
		}
	}
	return c
}()
