package replica

import (
	"fmt"
	"log/slog"
)

// raftLogger adapts slog to raft.Logger. raft's Info is chatty (every
// election step), so it goes to debug; Warning and above keep their level.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                  { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)  { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Fatal(v ...any)                 { r.Panic(v...) }
func (r raftLogger) Fatalf(format string, v ...any) { r.Panicf(format, v...) }
func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.l.Error(s)
	panic(s)
}
func (r raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	r.l.Error(s)
	panic(s)
}
