package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Key prefixes of the node's keyspace (see the package doc).
const (
	PrefixRangeLocal = "\x01r"
	PrefixChunkIndex = "\x02c"
	PrefixChunkWant  = "\x02w" // copies wanted of each chunk (segment.RaiseCopies)
	PrefixSegment    = "\x02s"
	PrefixNodeLocal  = "\x03"
)

// The memtables: many small synced commits from concurrent writers group
// into one WAL fsync; a large memtable keeps flushes rare.
const (
	memTableSize       = 64 << 20
	memTableStopWrites = 4
)

// The state store's table blocks (see open).
const (
	stateBlockSize      = 32 << 10
	stateIndexBlockSize = 256 << 10
)

// Options configures Open. The zero value of every field but Dir means its
// default.
type Options struct {
	// Dir is the directory of the pebble instance. Required.
	Dir string
	// FS is the disk seam. Default: vfs.Default (the real disk).
	FS vfs.FS
	// CacheSize is the block cache size in bytes: what the tables' blocks
	// may hold. Default: 256 MiB. (Pebble charges its memtables to the same
	// cache; Open adds their most, so that they never crowd the blocks out.)
	CacheSize int64
	// Logger receives pebble's informational messages at debug level.
	// Default: slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills in zero fields.
func (o *Options) EnsureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheSize == 0 {
		o.CacheSize = 256 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("storage: Dir is required"))
	}
	if o.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("storage: CacheSize %d is negative", o.CacheSize))
	}
	return errors.Join(errs...)
}

// Engine is a node's pebble instances together with the FS they live on:
// the state store, and the ranges' raft logs apart from it (LogDB).
// Other components (segment store, replicas) share the FS for their own files.
type Engine struct {
	db    *pebble.DB
	logDB *pebble.DB
	fs    vfs.FS
	dir   string
	opts  *pebble.Options // with defaults: what tables built outside need
}

// LogDir is the raft log's pebble directory, inside the state store's.
const LogDir = "raftlog"

// The raft log's instance: entries live in it from their append until
// they are applied and truncated, mostly within one memtable, and are
// read back only by the entry cache's misses.
const (
	logCacheSize         = 8 << 20
	logMemTableSize      = 64 << 20
	logMemTableStopWrite = 4
)

// Open opens (creating if needed) the pebble instances in opts.Dir: the
// state store there, and the raft log in its subdirectory LogDir.
func Open(opts Options) (*Engine, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	db, po, err := open(opts, false)
	if err != nil {
		return nil, err
	}
	lo := opts
	lo.Dir, lo.CacheSize = opts.FS.PathJoin(opts.Dir, LogDir), logCacheSize
	logDB, _, err := open(lo, true)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Engine{db: db, logDB: logDB, fs: opts.FS, dir: opts.Dir, opts: po}, nil
}

// open opens one pebble instance: the state store, or with raftLog the
// raft log's (no filters or version times: its keys are read by range and
// index only).
func open(opts Options, raftLog bool) (*pebble.DB, *pebble.Options, error) {
	if err := MkdirAllSync(opts.FS, opts.Dir); err != nil {
		return nil, nil, err
	}
	// Pebble reserves the memory of every memtable (the mutable one and
	// those waiting to be flushed) in the block cache: a cache no larger
	// than the memtables holds no block at all once two of them exist.
	memSize, memStop := memTableSize, memTableStopWrites
	if raftLog {
		memSize, memStop = logMemTableSize, logMemTableStopWrite
	}
	cache := pebble.NewCache(opts.CacheSize + int64(memSize*memStop))
	defer cache.Unref()
	po := &pebble.Options{
		FS:                          opts.FS,
		Cache:                       cache,
		Comparer:                    Comparer,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      pebbleLogger{opts.Logger},
		MemTableSize:                uint64(memSize),
		MemTableStopWritesThreshold: memStop,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       1000,
	}
	// Bloom filters let a point read of a key that is in no table (a
	// transaction's lock check, mostly) skip the tables' blocks, and,
	// built over the object of each version key (Comparer), a seek to the
	// versions of an object that has none in a table (an insert's check for
	// a newer version) skip the table.
	if !raftLog {
		// 32 KiB blocks (256 KiB index blocks), pebble's default being 4
		// KiB: under KeepAll every PUT adds a version, and the older ones
		// are written to value blocks, each compressed into a 32 KiB
		// buffer that is held until its table is finished; at 4 KiB a
		// block, flushes and compactions allocated 4-12 KB of those
		// buffers per 1 KiB PUT, up to half the server's allocation. A
		// 1 KiB PUT and a GET each cost about 6% less server CPU
		// (docs/benchmarks.md, "Larger blocks in the state store"). A
		// compressed 32 KiB block can outgrow its buffer (snappy then
		// allocates), but 24 KiB blocks, whose bound fits, measured no
		// less allocation per PUT.
		for i := range po.Levels {
			po.Levels[i].BlockSize = stateBlockSize
			po.Levels[i].IndexBlockSize = stateIndexBlockSize
		}
		po.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
		po.BlockPropertyCollectors = []func() pebble.BlockPropertyCollector{versionTimesCollector}
	}
	po.EnsureDefaults()
	db, err := pebble.Open(opts.Dir, po)
	if err != nil && strings.Contains(err.Error(), "comparer name from file") {
		return nil, nil, fmt.Errorf("storage: %s holds a store of an earlier development format (its keys are ordered under another comparer; this build reads %q): start with an empty data directory, or copy the objects out with the build that wrote it: %w", opts.Dir, ComparerName, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("storage: open pebble in %s: %w", opts.Dir, err)
	}
	return db, po, nil
}

// WriterOptions returns the options of a table built outside pebble for
// ingestion (a snapshot's): the store's comparer, key schema and filters,
// in the newest table format the store reads.
func (e *Engine) WriterOptions() sstable.WriterOptions {
	return e.opts.MakeWriterOptions(len(e.opts.Levels)-1, e.db.FormatMajorVersion().MaxTableFormat())
}

// ReaderOptions returns the options to read such a table.
func (e *Engine) ReaderOptions() sstable.ReaderOptions { return e.opts.MakeReaderOptions() }

// Metrics returns the pebble instance's metrics (for the node's
// /metrics: memtables, levels, block cache, compactions, WAL).
func (e *Engine) Metrics() *pebble.Metrics { return e.db.Metrics() }

// LogMetrics returns the raft log instance's metrics.
func (e *Engine) LogMetrics() *pebble.Metrics { return e.logDB.Metrics() }

// DB returns the state store's pebble instance. It is owned by the Engine.
func (e *Engine) DB() *pebble.DB { return e.db }

// LogDB returns the raft log's pebble instance (package replica's alone).
// It is owned by the Engine.
func (e *Engine) LogDB() *pebble.DB { return e.logDB }

// FS returns the disk seam.
func (e *Engine) FS() vfs.FS { return e.fs }

// Dir returns the pebble directory.
func (e *Engine) Dir() string { return e.dir }

// Close flushes nothing extra (every acknowledged write was synced already)
// and closes pebble.
func (e *Engine) Close() error {
	if e.db == nil {
		return nil
	}
	err := errors.Join(e.logDB.Close(), e.db.Close())
	e.db, e.logDB = nil, nil
	return err
}

type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...interface{}) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...interface{}) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...interface{}) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	panic(fmt.Sprintf(format, args...))
}

// MkdirAllSync creates dir and any missing parents, and fsyncs each parent
// of what it created, so that the new directories survive a crash.
func MkdirAllSync(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(dir); err == nil {
		return nil
	}
	parent := fs.PathDir(dir)
	if parent != dir && parent != "" {
		if err := MkdirAllSync(fs, parent); err != nil {
			return err
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("storage: create %s: %w", dir, err)
	}
	d, err := fs.OpenDir(parent)
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", parent, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("storage: sync %s: %w", parent, err)
	}
	return nil
}

// WriteFileSync replaces the file at path with data durably: it writes a
// temporary file beside it, fsyncs it, renames it over path and fsyncs the
// directory. With private set, on the real disk the file is readable by
// its owner alone (mode 0600) before any byte is written.
func WriteFileSync(fs vfs.FS, path string, data []byte, private bool) error {
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("storage: create %s: %w", tmp, err)
	}
	if private && fs == vfs.Default {
		if err := os.Chmod(tmp, 0o600); err != nil {
			f.Close()
			return fmt.Errorf("storage: chmod %s: %w", tmp, err)
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("storage: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("storage: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("storage: rename %s: %w", tmp, err)
	}
	d, err := fs.OpenDir(fs.PathDir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ReadFile reads a whole file.
func ReadFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
