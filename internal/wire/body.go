package wire

import (
	"io"
	"sync"
)

// bodyStream is the body of a streamed PUT as the Service sees it: an
// io.Reader fed by the connection's reader goroutine, one frame at a time,
// through a channel of a few frames. When the channel is full the reader
// goroutine waits, so a slow consumer holds back its whole connection (and
// memory stays bounded).
type bodyStream struct {
	ch      chan []byte   // DATA payloads; closed at END
	abort   chan struct{} // closed on CANCEL or connection loss
	done    chan struct{} // closed by the handler once it stops reading
	onceAb  sync.Once
	onceDn  sync.Once
	cur     []byte
	eof     bool
	n       int64           // bytes received so far
	limit   int64           // declared size, -1 if unknown
	onQueue func(depth int) // observes the queue depth after each push
}

func newBodyStream(first []byte, limit int64, frames int, onQueue func(int)) *bodyStream {
	return &bodyStream{
		limit:   limit,
		n:       int64(len(first)),
		ch:      make(chan []byte, frames),
		abort:   make(chan struct{}),
		done:    make(chan struct{}),
		cur:     first,
		onQueue: onQueue,
	}
}

// Read implements io.Reader. It returns io.EOF after the END frame and
// io.ErrUnexpectedEOF if the stream was canceled or the connection dropped
// before END.
func (b *bodyStream) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		if b.eof {
			return 0, io.EOF
		}
		select {
		case <-b.abort:
			return 0, io.ErrUnexpectedEOF
		default:
		}
		select {
		case q, ok := <-b.ch:
			if !ok {
				b.eof = true
				continue
			}
			b.cur = q
			b.n += int64(len(q))
			if b.limit >= 0 && b.n > b.limit {
				b.cur = nil
				return 0, Errorf(CodeInvalidArgument, "body longer than its declared %d bytes", b.limit)
			}
		case <-b.abort:
			return 0, io.ErrUnexpectedEOF
		}
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

// push hands one payload to the consumer; it waits for room unless the
// consumer is gone or stop is closed. Reader goroutine only.
func (b *bodyStream) push(p []byte, stop <-chan struct{}) {
	if len(p) == 0 {
		return
	}
	select {
	case b.ch <- p:
		if b.onQueue != nil {
			b.onQueue(len(b.ch))
		}
	case <-b.done:
	case <-stop:
	}
}

// end marks END. Reader goroutine only.
func (b *bodyStream) end() { close(b.ch) }

// cancel makes the body fail with io.ErrUnexpectedEOF.
func (b *bodyStream) cancel() { b.onceAb.Do(func() { close(b.abort) }) }

// finish says the handler no longer reads; later pushes are dropped.
func (b *bodyStream) finish() { b.onceDn.Do(func() { close(b.done) }) }
