package bufpool

import "testing"

func TestClass(t *testing.T) {
	for _, c := range []struct{ n, class int }{
		{0, 0}, {1, 0}, {64 << 10, 0}, {64<<10 + 1, 1}, {1 << 20, 4}, {1<<20 + 1, 5},
		{1 << maxShift, classes - 1}, {1<<maxShift + 1, -1},
	} {
		if got := class(c.n); got != c.class {
			t.Errorf("class(%d) = %d, want %d", c.n, got, c.class)
		}
	}
}

func TestGetPut(t *testing.T) {
	var p Pool
	for _, n := range []int{0, 5, 300 << 10, 4 << 20, 1<<maxShift + 1} {
		bp := p.Get(n)
		if len(*bp) != n {
			t.Fatalf("Get(%d) has len %d", n, len(*bp))
		}
		if c := class(n); c >= 0 && cap(*bp) != 1<<(c+minShift) {
			t.Fatalf("Get(%d) has cap %d", n, cap(*bp))
		}
		p.Put(bp)
	}
	p.Put(nil)
	// A buffer of a foreign capacity is dropped, not pooled.
	b := make([]byte, 100, 100<<10)
	p.Put(&b)
	if bp := p.Get(100 << 10); cap(*bp) == 100<<10 {
		t.Fatal("a buffer of a foreign capacity came back from the pool")
	}
}
