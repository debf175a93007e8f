package meta

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/tstamp"
	"github.com/cockroachdb/datadriven"
)

// fmtTS prints a timestamp as ms.logical.
func fmtTS(ts uint64) string {
	return fmt.Sprintf("%d.%d", tstamp.Physical(ts), tstamp.Logical(ts))
}

func parseTS(t *testing.T, s string) uint64 {
	ms, logical, _ := strings.Cut(s, ".")
	m, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		t.Fatalf("bad timestamp %q", s)
	}
	var l uint64
	if logical != "" {
		if l, err = strconv.ParseUint(logical, 10, 32); err != nil {
			t.Fatalf("bad timestamp %q", s)
		}
	}
	return tstamp.Make(m, uint32(l))
}

// TestWindow drives the oracle's pure core through testdata/window.txt.
//
//	init span=<ms>              a fresh window
//	load high=<ms.logical>      start a term from a persisted H
//	renew now=<ms> [n=<n>]      persist the target limit (prints it)
//	alloc now=<ms> [n=<n>]      hand out n timestamps (prints first, last, renew?)
func TestWindow(t *testing.T) {
	var w window
	datadriven.RunTest(t, "testdata/window.txt", func(t *testing.T, d *datadriven.TestData) string {
		arg := func(key string, def int64) int64 {
			if !d.HasArg(key) {
				return def
			}
			var s string
			d.ScanArgs(t, key, &s)
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				d.Fatalf(t, "bad %s=%s", key, s)
			}
			return v
		}
		state := func() string {
			return fmt.Sprintf("last=%s limit=%s", fmtTS(w.last), fmtTS(w.limit))
		}
		switch d.Cmd {
		case "init":
			w = window{span: arg("span", 3000)}
			return state()
		case "load":
			var s string
			d.ScanArgs(t, "high", &s)
			w.load(parseTS(t, s))
			return state()
		case "renew":
			target := w.target(arg("now", 0), int(arg("n", 1)))
			w.persisted(target)
			return state()
		case "alloc":
			now := arg("now", 0)
			first, ok := w.alloc(now, int(arg("n", 1)))
			if !ok {
				return "exhausted; " + state()
			}
			return fmt.Sprintf("first=%s last=%s renew=%t", fmtTS(first), fmtTS(w.last), w.needRenew(now))
		default:
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		}
	})
}
