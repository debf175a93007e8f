package md5lanes

import "golang.org/x/sys/cpu"

// haveLanes reports whether block16 can run: it needs AVX-512's
// foundation (and cpu checks that the OS saves the registers).
var haveLanes = cpu.X86.HasAVX512F

// block16 hashes n blocks of every lane: lane i's state is s[0..3][i]
// and its blocks start at p[i]. Only the lanes in mask have their state
// stored; every lane's blocks are read.
//
//go:noescape
func block16(s *[4][16]uint32, p *[16]uint64, mask uint16, n int)
