package meta

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MemStore is an in-memory Store for tests: a map, a revision counter and a
// mutex. Leadership is granted to one holder at a time (a second Campaign
// for the same name waits until the first resigns or ExpireLease is called);
// a held lease stays valid until then.
type MemStore struct {
	clock func() time.Time
	mu    struct {
		sync.Mutex
		rev     int64
		kv      map[string]KV
		leaders map[string]*memLeadership
		changed chan struct{} // closed and replaced when a leadership ends
		closed  bool
	}
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore whose leases are measured on clock
// (nil: time.Now).
func NewMemStore(clock func() time.Time) *MemStore {
	if clock == nil {
		clock = time.Now
	}
	m := &MemStore{clock: clock}
	m.mu.kv = make(map[string]KV)
	m.mu.leaders = make(map[string]*memLeadership)
	m.mu.changed = make(chan struct{})
	return m
}

// Get implements Store.
func (m *MemStore) Get(ctx context.Context, key string) (KV, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return KV{}, ErrClosed
	}
	kv, ok := m.mu.kv[key]
	if !ok {
		return KV{}, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	return cloneKV(kv), nil
}

// List implements Store.
func (m *MemStore) List(ctx context.Context, prefix string) ([]KV, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, ErrClosed
	}
	var out []KV
	for k, kv := range m.mu.kv {
		if strings.HasPrefix(k, prefix) {
			out = append(out, cloneKV(kv))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Put implements Store.
func (m *MemStore) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return 0, ErrClosed
	}
	if expect != AnyRev && m.mu.kv[key].Rev != expect {
		return 0, fmt.Errorf("put %s at revision %d: %w", key, expect, ErrConflict)
	}
	m.mu.rev++
	m.mu.kv[key] = KV{Key: key, Value: append([]byte(nil), value...), Rev: m.mu.rev}
	return m.mu.rev, nil
}

// Delete implements Store.
func (m *MemStore) Delete(ctx context.Context, key string, expect int64) error {
	if expect == 0 {
		return fmt.Errorf("meta: delete %s: expected revision 0 is invalid", key)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return ErrClosed
	}
	kv, ok := m.mu.kv[key]
	if !ok {
		return fmt.Errorf("delete %s: %w", key, ErrNotFound)
	}
	if expect != AnyRev && kv.Rev != expect {
		return fmt.Errorf("delete %s at revision %d: %w", key, expect, ErrConflict)
	}
	m.mu.rev++
	delete(m.mu.kv, key)
	return nil
}

// Campaign implements Store: it waits while another holder has name.
func (m *MemStore) Campaign(ctx context.Context, name string, ttl time.Duration) (Leadership, error) {
	for {
		m.mu.Lock()
		if m.mu.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		if m.mu.leaders[name] == nil {
			l := &memLeadership{store: m, name: name, ttl: ttl, done: make(chan struct{})}
			m.mu.leaders[name] = l
			// As in etcd, the holder is visible under the leader key.
			m.mu.rev++
			m.mu.kv[leaderKey(name)] = KV{Key: leaderKey(name), Value: []byte{}, Rev: m.mu.rev}
			m.mu.Unlock()
			return l, nil
		}
		changed := m.mu.changed
		m.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// ExpireLease simulates the loss of leadership name's lease (a partition or
// a missed keepalive): Done closes and ValidUntil drops to the zero time.
// It reports whether a holder existed.
func (m *MemStore) ExpireLease(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.mu.leaders[name]
	if l == nil {
		return false
	}
	m.endLocked(l)
	return true
}

// endLocked ends leadership l: it closes Done and lets waiters campaign.
func (m *MemStore) endLocked(l *memLeadership) {
	if l.ended.Load() {
		return
	}
	l.ended.Store(true)
	close(l.done)
	if m.mu.leaders[l.name] == l {
		delete(m.mu.leaders, l.name)
		delete(m.mu.kv, leaderKey(l.name))
		m.mu.rev++
	}
	close(m.mu.changed)
	m.mu.changed = make(chan struct{})
}

// Close implements Store: it ends every leadership. Idempotent.
func (m *MemStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.mu.leaders {
		m.endLocked(l)
	}
	m.mu.closed = true
	return nil
}

type memLeadership struct {
	store *MemStore
	name  string
	ttl   time.Duration
	done  chan struct{}
	ended atomic.Bool // written under store.mu
}

func (l *memLeadership) Done() <-chan struct{} { return l.done }

// ValidUntil is now + TTL while held: the in-memory lease is kept alive
// continuously.
func (l *memLeadership) ValidUntil() time.Time {
	if l.ended.Load() {
		return time.Time{}
	}
	return l.store.clock().Add(l.ttl)
}

func (l *memLeadership) Resign(ctx context.Context) error {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	l.store.endLocked(l)
	return nil
}

func cloneKV(kv KV) KV {
	kv.Value = append([]byte(nil), kv.Value...)
	return kv
}
