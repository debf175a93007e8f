//go:build !amd64

package md5lanes

const haveLanes = false

func block16(s *[4][16]uint32, p *[16]uint64, mask uint16, n int) {
	panic("md5lanes: no block16 on this architecture")
}
