package mvcc

import (
	"bytes"
	"slices"
	"sync"

	"github.com/cairn-db/cairn/internal/keys"
)

// Iterator walks the keys of a Reader in ascending byte order within the
// bounds it was created with. It is shaped like *pebble.Iterator. An
// Iterator is used by one goroutine at a time.
type Iterator interface {
	// SeekGE positions at the first key >= key and reports Valid().
	SeekGE(key []byte) bool
	// Next moves to the following key and reports Valid().
	Next() bool
	// Valid reports whether the iterator is positioned at a key.
	Valid() bool
	// Key returns the current key; it is owned by the iterator and valid
	// until the next positioning call or Close.
	Key() []byte
	// Value returns the current value, with the same ownership as Key.
	Value() []byte
	// Error returns the error, if any, that stopped the iteration.
	Error() error
	// Close releases the iterator and returns its error, if any.
	Close() error
}

// Reader creates iterators over the half-open span [lower, upper). A nil
// bound means unbounded on that side.
type Reader interface {
	NewIter(lower, upper []byte) (Iterator, error)
}

// Writer buffers or applies writes. Implementations copy key and value.
type Writer interface {
	Set(key, value []byte) error
	Delete(key []byte) error
}

// RecordSetter is implemented by a Writer that can encode a record
// straight into its own buffer: SetRecord(k, rec) is Set(k, rec.Marshal())
// without the intermediate encoding.
type RecordSetter interface {
	SetRecord(key []byte, rec *Record) error
}

// Indexer is implemented by a Writer that keeps index entries of
// versions (package kv's tag and field indexes). mvcc calls IndexVersion
// in the same batch each time it writes a version: a new one (old nil), a
// rewrite (SetTags: both), a removal (rec nil). The records carry their
// Version.
type Indexer interface {
	IndexVersion(obj []byte, old, rec *Record) error
}

// writeVersion writes rec as version rec.Version of obj, and tells an
// Indexer (old is the record it replaces, nil if none).
func writeVersion(w Writer, obj []byte, old, rec *Record) error {
	if err := setRecord(w, keys.Version(obj, rec.Version), rec); err != nil {
		return err
	}
	if ix, ok := w.(Indexer); ok {
		return ix.IndexVersion(obj, old, rec)
	}
	return nil
}

// deleteVersion deletes version old.Version of obj, and tells an Indexer.
func deleteVersion(w Writer, obj []byte, old *Record) error {
	if err := w.Delete(keys.Version(obj, old.Version)); err != nil {
		return err
	}
	if ix, ok := w.(Indexer); ok {
		return ix.IndexVersion(obj, old, nil)
	}
	return nil
}

// setRecord writes rec's encoding at key.
func setRecord(w Writer, key []byte, rec *Record) error {
	if rs, ok := w.(RecordSetter); ok {
		return rs.SetRecord(key, rec)
	}
	return w.Set(key, rec.Marshal())
}

// PointReader is implemented by a Reader that can read one key without
// an iterator (pebble's Get: cheaper than an iterator's seek). Get returns
// a copy of the value, or ok false.
type PointReader interface {
	Get(key []byte) (value []byte, ok bool, err error)
}

// ReadWriter is a Reader whose reads see the earlier writes made through it
// (a pebble indexed batch, or MemKV).
type ReadWriter interface {
	Reader
	Writer
}

// MemKV is an in-memory, sorted ReadWriter. It is safe for concurrent use.
// Every positioning call of an iterator searches the current contents, so
// an open iterator sees later writes and callers may interleave iteration
// and writes.
type MemKV struct {
	mu struct {
		sync.RWMutex
		kvs []memEntry // sorted by key
	}
}

type memEntry struct{ key, value []byte }

// NewMemKV returns an empty MemKV.
func NewMemKV() *MemKV { return &MemKV{} }

func (m *MemKV) searchLocked(key []byte) (int, bool) {
	return slices.BinarySearchFunc(m.mu.kvs, key, func(e memEntry, k []byte) int {
		return bytes.Compare(e.key, k)
	})
}

// Set implements Writer.
func (m *MemKV) Set(key, value []byte) error {
	e := memEntry{key: bytes.Clone(key), value: bytes.Clone(value)}
	if e.value == nil {
		e.value = []byte{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i, found := m.searchLocked(key)
	if found {
		m.mu.kvs[i] = e
		return nil
	}
	m.mu.kvs = slices.Insert(m.mu.kvs, i, e)
	return nil
}

// Delete implements Writer. Deleting an absent key is not an error.
func (m *MemKV) Delete(key []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, found := m.searchLocked(key); found {
		m.mu.kvs = slices.Delete(m.mu.kvs, i, i+1)
	}
	return nil
}

// Len returns the number of keys.
func (m *MemKV) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.mu.kvs)
}

// NewIter implements Reader. The iterator is created unpositioned.
func (m *MemKV) NewIter(lower, upper []byte) (Iterator, error) {
	return &memIter{kv: m, lower: bytes.Clone(lower), upper: bytes.Clone(upper)}, nil
}

type memIter struct {
	kv           *MemKV
	lower, upper []byte
	cur          memEntry // current entry; key nil when not valid
	closed       bool
}

// seek positions at the first key >= key (or > key if strict) within
// the bounds.
func (it *memIter) seek(key []byte, strict bool) bool {
	if it.closed {
		it.cur = memEntry{}
		return false
	}
	if it.lower != nil && bytes.Compare(key, it.lower) < 0 {
		key, strict = it.lower, false
	}
	it.kv.mu.RLock()
	defer it.kv.mu.RUnlock()
	i, found := it.kv.searchLocked(key)
	if found && strict {
		i++
	}
	if i >= len(it.kv.mu.kvs) || (it.upper != nil && bytes.Compare(it.kv.mu.kvs[i].key, it.upper) >= 0) {
		it.cur = memEntry{}
		return false
	}
	// Entries are never mutated in place (Set replaces the whole entry), so
	// the slices stay valid after the lock is released.
	it.cur = it.kv.mu.kvs[i]
	return true
}

func (it *memIter) SeekGE(key []byte) bool { return it.seek(key, false) }

// Last positions at the last key within the bounds.
func (it *memIter) Last() bool {
	if it.closed {
		it.cur = memEntry{}
		return false
	}
	return it.before(it.upper)
}

// Prev moves to the preceding key within the bounds.
func (it *memIter) Prev() bool {
	if it.cur.key == nil || it.closed {
		return false
	}
	return it.before(it.cur.key)
}

// before positions at the last key below key (nil: the last key) and
// within the lower bound.
func (it *memIter) before(key []byte) bool {
	it.kv.mu.RLock()
	defer it.kv.mu.RUnlock()
	i := len(it.kv.mu.kvs)
	if key != nil {
		i, _ = it.kv.searchLocked(key)
	}
	i--
	if i < 0 || (it.lower != nil && bytes.Compare(it.kv.mu.kvs[i].key, it.lower) < 0) {
		it.cur = memEntry{}
		return false
	}
	it.cur = it.kv.mu.kvs[i]
	return true
}

func (it *memIter) Next() bool {
	if it.cur.key == nil {
		return false
	}
	return it.seek(it.cur.key, true)
}

func (it *memIter) Valid() bool   { return it.cur.key != nil }
func (it *memIter) Key() []byte   { return it.cur.key }
func (it *memIter) Value() []byte { return it.cur.value }
func (it *memIter) Error() error  { return nil }
func (it *memIter) Close() error {
	it.closed = true
	it.cur = memEntry{}
	return nil
}
