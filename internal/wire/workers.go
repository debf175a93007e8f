package wire

import (
	"sync"
	"time"
)

// workers runs request handlers on goroutines that outlive one request, so
// a stack grown once is reused: with a fresh goroutine per request, a small
// GET spent a large share of its CPU growing (copying) its stack.
// A handler goes to an idle worker if one is waiting, else to a new one;
// a worker idle for longer than idle exits.
type workers struct {
	tasks chan func()
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	idle  time.Duration
}

func newWorkers(idle time.Duration) *workers {
	return &workers{tasks: make(chan func()), stop: make(chan struct{}), idle: idle}
}

// run runs f on a worker. It must not be called after close.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
		return
	default:
	}
	w.wg.Add(1)
	go w.loop(f)
}

func (w *workers) loop(f func()) {
	defer w.wg.Done()
	f()
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		select {
		case f := <-w.tasks:
			f()
			t.Reset(w.idle)
		case <-t.C:
			return
		case <-w.stop:
			return
		}
	}
}

// close stops idle workers and waits for every worker to exit. Handlers
// that are running finish first. It is idempotent.
func (w *workers) close() {
	w.once.Do(func() { close(w.stop) })
	w.wg.Wait()
}
