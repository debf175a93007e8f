package meta

import (
	"bytes"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
)

func TestZapSlog(t *testing.T) {
	var buf bytes.Buffer
	closing := new(atomic.Bool)
	lg := newZapSlog(slog.New(slog.NewTextHandler(&buf, nil)), closing)
	lg.Info("chatter")
	lg.Warn("more chatter")
	lg.With(zap.String("member", "m1")).Error("disk failed", zap.Int("code", 5))
	closing.Store(true)
	lg.Error("use of closed network connection")
	out := buf.String()
	if strings.Contains(out, "chatter") || strings.Contains(out, "closed network") {
		t.Fatalf("below-error or shutdown entries logged: %s", out)
	}
	for _, want := range []string{"level=ERROR", `msg="disk failed"`, "component=etcd", "code=5", "member=m1"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in %s", want, out)
		}
	}
}
