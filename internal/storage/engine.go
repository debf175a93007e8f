package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
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

// Options configures Open. The zero value of every field but Dir means its
// default.
type Options struct {
	// Dir is the directory of the pebble instance. Required.
	Dir string
	// FS is the disk seam. Default: vfs.Default (the real disk).
	FS vfs.FS
	// CacheSize is the block cache size in bytes. Default: 128 MiB.
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
		o.CacheSize = 128 << 20
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

// Engine is a node's pebble instance together with the FS it lives on.
// Other components (segment store, replicas) share the FS for their own files.
type Engine struct {
	db  *pebble.DB
	fs  vfs.FS
	dir string
}

// Open opens (creating if needed) the pebble instance in opts.Dir.
func Open(opts Options) (*Engine, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := MkdirAllSync(opts.FS, opts.Dir); err != nil {
		return nil, err
	}
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref()
	po := &pebble.Options{
		FS:                 opts.FS,
		Cache:              cache,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{opts.Logger},
		// Many small synced commits from concurrent writers group into one
		// WAL fsync; keep the memtable large enough that flushes are rare.
		MemTableSize:                64 << 20,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       1000,
	}
	// Bloom filters let a point read of a key that is in no table (a
	// transaction's lock check, mostly) skip the tables' blocks.
	po.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	db, err := pebble.Open(opts.Dir, po)
	if err != nil {
		return nil, fmt.Errorf("storage: open pebble in %s: %w", opts.Dir, err)
	}
	return &Engine{db: db, fs: opts.FS, dir: opts.Dir}, nil
}

// DB returns the pebble instance. It is owned by the Engine.
func (e *Engine) DB() *pebble.DB { return e.db }

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
	err := e.db.Close()
	e.db = nil
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
