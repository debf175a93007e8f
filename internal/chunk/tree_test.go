package chunk

import (
	"math/rand/v2"
	"testing"
)

// TestTreeSumIsBLAKE3: the hash from the blocks' chaining values and the
// tail is the BLAKE3 hash of the content, at sizes around block, chunk
// and power-of-two boundaries.
func TestTreeSumIsBLAKE3(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	sizes := []int{TreeBlock + 1, TreeBlock + 1023, TreeBlock + 1024, TreeBlock + 1025, 2 * TreeBlock,
		2*TreeBlock + 1, 3 * TreeBlock, 3*TreeBlock + 5000, 4 * TreeBlock, 5*TreeBlock - 1, 64 * TreeBlock, 64*TreeBlock + 7, 257 * TreeBlock}
	for range 20 {
		sizes = append(sizes, TreeBlock+1+rng.IntN(40*TreeBlock))
	}
	for _, size := range sizes {
		b := pseudoRandom(rng.Uint64(), size)
		var cvs []CV
		n := size / TreeBlock
		for i := range n {
			cvs = append(cvs, BlockCV(int64(i), b[i*TreeBlock:(i+1)*TreeBlock]))
		}
		if got, want := TreeSum(int64(size), cvs, b[n*TreeBlock:]), Sum(b); got != want {
			t.Fatalf("size %d: TreeSum %s, BLAKE3 %s", size, got, want)
		}
	}
}

// TestWriteKeepsTreeTrue: after any byte-range write or append, every
// chaining value a manifest still holds is its block's; the ones of
// blocks a write changed are forgotten; and the encoding keeps them.
func TestWriteKeepsTreeTrue(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	s := newMemChunks()
	model := pseudoRandom(rng.Uint64(), 10*TreeBlock+300)
	m, err := Append(Manifest{}, model, 4096, s.load, s.store)
	if err != nil {
		t.Fatal(err)
	}
	fill := func() {
		m.Tree = make([]CV, len(model)/TreeBlock)
		for i := range m.Tree {
			m.Tree[i] = BlockCV(int64(i), model[i*TreeBlock:(i+1)*TreeBlock])
		}
	}
	fill()
	for step := range 300 {
		data := pseudoRandom(rng.Uint64(), 1+rng.IntN(3*TreeBlock))
		var off int
		if rng.IntN(5) == 0 {
			off = len(model)
			m, err = Append(m, data, 4096, s.load, s.store)
		} else {
			off = rng.IntN(len(model) + TreeBlock)
			m, err = WriteAt(m, int64(off), data, 4096, s.load, s.store)
		}
		if err != nil {
			t.Fatal(err)
		}
		if end := off + len(data); end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], data)
		rt, err := UnmarshalManifest(m.Marshal())
		if err != nil || len(rt.Tree) != len(m.Tree) {
			t.Fatalf("step %d: round trip of a manifest with a tree: %v", step, err)
		}
		known := 0
		for i, c := range rt.Tree {
			if c == (CV{}) {
				continue
			}
			known++
			if c != BlockCV(int64(i), model[i*TreeBlock:(i+1)*TreeBlock]) {
				t.Fatalf("step %d: block %d keeps a chaining value its content no longer has", step, i)
			}
			if i*TreeBlock < off+len(data) && (i+1)*TreeBlock > off {
				t.Fatalf("step %d: block %d was written but kept its chaining value", step, i)
			}
		}
		if known == 0 && len(model) > 20*TreeBlock {
			t.Fatalf("step %d: every chaining value forgotten", step)
		}
		if len(model) > 40*TreeBlock {
			return
		}
		if step%3 == 0 {
			fill()
		}
	}
}
