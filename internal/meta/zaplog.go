package meta

import (
	"context"
	"log/slog"
	"sort"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapSlog returns a zap logger for etcd that forwards error-level (and
// worse) entries to logger and drops the rest: etcd is chatty, and nothing of
// it goes to stdout.
//
// Once closing is set, errors are logged at debug level: stopping the member
// makes its listeners report "use of closed network connection" and the like.
func newZapSlog(logger *slog.Logger, closing *atomic.Bool) *zap.Logger {
	return zap.New(&slogCore{log: logger.With("component", "etcd"), closing: closing})
}

type slogCore struct {
	log     *slog.Logger
	closing *atomic.Bool
	fields  []zapcore.Field
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.ErrorLevel }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, closing: c.closing, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	level := slog.LevelError
	if c.closing.Load() {
		level = slog.LevelDebug
	}
	c.log.LogAttrs(context.Background(), level, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }
