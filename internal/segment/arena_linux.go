package segment

import (
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// mapArena maps size bytes of anonymous memory, to be touched as it is
// used, and asks for huge pages for it (a hint: refused, the arena works
// with small ones).
func mapArena(size int64) ([]byte, func() error, error) {
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, nil, err
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	return mem, func() error { return unix.Munmap(mem) }, nil
}

// populateStep is how much of the arena one call populates.
const populateStep = 8 << 20

// populate faults mem in, from its start (where the buddy allocator hands
// out blocks first), on a thread of its own at the lowest priority (nice
// 19), until it is all in or stop is set; it calls done when it returns. A page the kernel
// has never handed this guest before is dear to touch on a VM (a 16 MiB
// PUT whose record went into fresh memory cost twice the CPU of one into
// recycled memory, docs/benchmarks.md): faulted in while the machine has
// nothing else to do, the cache's memory is cheap by the time writes and
// reads want it. MADV_POPULATE_WRITE faults pages in without touching
// their bytes, so blocks already in use are left as they are; where the
// kernel lacks it (before 5.14), nothing is faulted in ahead.
func populate(mem []byte, stop *atomic.Bool, done func()) {
	defer done()
	// The thread is not unlocked: it ends with the goroutine rather than
	// go back to the scheduler at idle priority.
	// Nice 19 rather than SCHED_IDLE: the thread holds one of the Go
	// scheduler's slots between calls (a few instructions), and a
	// collection's stop-the-world waits for it there; SCHED_IDLE can
	// leave it without a core for long on a busy machine, nice 19 gets
	// its small share within a scheduling period.
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19); err != nil {
		return // (never at normal priority: it would compete with requests)
	}
	for off := 0; off < len(mem) && !stop.Load(); off += populateStep {
		if err := unix.Madvise(mem[off:min(off+populateStep, len(mem))], unix.MADV_POPULATE_WRITE); err != nil {
			return
		}
	}
}
