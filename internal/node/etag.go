package node

import (
	"crypto/md5"
	"hash"
	"sync"

	"github.com/cairn-db/cairn/internal/md5lanes"
)

// simdMD5Min is how many other uploads must be hashing when one starts for
// it to get a multi-buffer hasher. md5lanes' BenchmarkStreams on an
// AVX-512 machine, CPU per 16 MiB stream against crypto/md5's 33 ms: 46 ms
// alone, 26 ms with one other, 16 ms with three, 9.5 ms with seven, 7 ms
// with fifteen (docs/benchmarks.md).
const simdMD5Min = 2

// md5Hashers hands out the MD5 hashers that compute the S3 ETag of chunked
// uploads. While several uploads run at once it hands out streams of one
// md5lanes.Hasher, whose goroutine hashes up to 16 streams together in the
// lanes of AVX-512 registers (crypto/md5 without AVX-512): MD5 is a
// serial chain within a stream, so this is how concurrent streams get
// cheaper. A stream alone is dearer that way (a copy of each block and a
// whole pass of the kernel for one lane), so an upload that starts with
// fewer than simdMD5Min others in flight gets crypto/md5.
//
// The server starts on first use and stops once close has been called and
// every hasher of it has been released, so that no upload still running
// at shutdown is left writing to a stopped server. The zero value is ready
// to use.
type md5Hashers struct {
	mu struct {
		sync.Mutex
		srv    *md5lanes.Hasher // nil until first needed, and after it is stopped
		users  int              // hashers of srv not yet released
		active int              // hashers of either kind not yet released
		closed bool
	}
}

// get returns a fresh MD5 hasher and the function that releases it, to be
// called once the hasher is no longer used (its Sum taken, or abandoned).
func (m *md5Hashers) get() (hash.Hash, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	others := m.mu.active
	m.mu.active++
	if m.mu.closed || others < simdMD5Min {
		return md5.New(), m.releasePlain
	}
	if m.mu.srv == nil {
		m.mu.srv = md5lanes.New()
	}
	m.mu.users++
	h := m.mu.srv.NewStream()
	return h, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.mu.active--
		m.mu.users--
		m.stopIdleLocked()
	}
}

func (m *md5Hashers) releasePlain() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.active--
}

// close stops the server as soon as no hasher of it is in use; later
// hashers are crypto/md5's. It is idempotent and does not block.
func (m *md5Hashers) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.closed = true
	m.stopIdleLocked()
}

func (m *md5Hashers) stopIdleLocked() {
	if m.mu.closed && m.mu.users == 0 && m.mu.srv != nil {
		m.mu.srv.Close()
		m.mu.srv = nil
	}
}
