package wire

import (
	"bufio"
	"errors"
	"io"
	"runtime"
	"sync"
)

// errWriterClosed is returned when a frame is queued after the writer stopped.
var errWriterClosed = errors.New("wire: connection writer closed")

// outFrame is a frame waiting to be written. Its body is a then b (two parts
// so a message header and a payload need not be copied together). done, if
// set, runs once the frame is written or dropped: it releases stream credit
// and recycles buffers.
type outFrame struct {
	op    Op
	flags uint16
	id    uint32
	a, b  []byte
	done  func()
	buf   *[]byte // returned to the writer's pool once written
}

func (w *frameWriter) release(f *outFrame) {
	if f.done != nil {
		f.done()
	}
	if f.buf != nil && w.pool != nil {
		w.pool.Put(f.buf)
	}
}

// frameWriter owns the write half of a connection. Frames are queued by any
// goroutine; one goroutine (run) writes them through a bufio.Writer and
// flushes only when the queue is empty, so many small frames that are ready
// together leave in one system call.
type frameWriter struct {
	bw *bufio.Writer
	mu struct {
		sync.Mutex
		q      []outFrame
		closed bool // no more frames accepted
		err    error
	}
	cond sync.Cond
	hdr  [HeaderLen]byte
	pool *sync.Pool // optional home of outFrame.buf
}

func newFrameWriter(w io.Writer, size int) *frameWriter {
	fw := &frameWriter{bw: bufio.NewWriterSize(w, size)}
	fw.cond.L = &fw.mu
	return fw
}

// send queues f. It fails (running f.done) once the writer has stopped.
func (w *frameWriter) send(f outFrame) error {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		w.release(&f)
		return errWriterClosed
	}
	w.mu.q = append(w.mu.q, f)
	if len(w.mu.q) == 1 {
		w.cond.Signal()
	}
	w.mu.Unlock()
	return nil
}

// close stops accepting frames; run writes what is queued, flushes and
// returns.
func (w *frameWriter) close() {
	w.mu.Lock()
	w.mu.closed = true
	w.cond.Signal()
	w.mu.Unlock()
}

// run writes queued frames until close, or until a write fails (then the
// remaining frames are dropped and their done functions run).
func (w *frameWriter) run() error {
	var batch []outFrame
	for {
		w.mu.Lock()
		yielded := false
		for len(w.mu.q) == 0 && !w.mu.closed {
			if w.bw.Buffered() > 0 {
				w.mu.Unlock()
				// Before paying a system call, let goroutines that are about
				// to queue a frame (handlers finishing their requests) run
				// once: under load their frames join this write.
				if !yielded {
					yielded = true
					runtime.Gosched()
					w.mu.Lock()
					continue
				}
				if err := w.bw.Flush(); err != nil {
					return w.fail(err, nil)
				}
				w.mu.Lock()
				continue
			}
			w.cond.Wait()
		}
		if len(w.mu.q) == 0 {
			w.mu.Unlock()
			if err := w.bw.Flush(); err != nil {
				return w.fail(err, nil)
			}
			return nil
		}
		batch, w.mu.q = w.mu.q, batch[:0]
		w.mu.Unlock()
		for i := range batch {
			if err := w.write(&batch[i]); err != nil {
				return w.fail(err, batch[i:])
			}
			w.release(&batch[i])
			batch[i] = outFrame{}
		}
	}
}

func (w *frameWriter) write(f *outFrame) error {
	PutHeader(w.hdr[:], Header{Version: Version, Op: f.op, Flags: f.flags, ID: f.id, Len: uint32(len(f.a) + len(f.b))})
	if _, err := w.bw.Write(w.hdr[:]); err != nil {
		return err
	}
	if _, err := w.bw.Write(f.a); err != nil {
		return err
	}
	_, err := w.bw.Write(f.b)
	return err
}

// fail stops the writer after a write error and drops every pending frame.
func (w *frameWriter) fail(err error, rest []outFrame) error {
	w.mu.Lock()
	w.mu.closed = true
	w.mu.err = err
	rest = append(rest, w.mu.q...)
	w.mu.q = nil
	w.mu.Unlock()
	for i := range rest {
		w.release(&rest[i])
	}
	return err
}
