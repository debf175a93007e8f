package mvcc

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/keys"
	"github.com/cairn-db/cairn/internal/tstamp"
	"github.com/cockroachdb/datadriven"
)

// In the scripts, timestamps are written as milliseconds ("10") or
// milliseconds and a logical counter ("10.2"); keys are user keys of the
// ordered space 1 unless space= says otherwise.

func parseTS(t testing.TB, s string) uint64 {
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

func fmtTS(ts uint64) string {
	if l := tstamp.Logical(ts); l != 0 {
		return fmt.Sprintf("%d.%d", tstamp.Physical(ts), l)
	}
	return strconv.FormatInt(tstamp.Physical(ts), 10)
}

func fmtObj(obj []byte) string {
	s, p, k, err := keys.DecodeObject(obj)
	if err != nil {
		return fmt.Sprintf("<bad %x>", obj)
	}
	var b strings.Builder
	if s != 1 {
		fmt.Fprintf(&b, "%d/", s)
	}
	if len(p) > 0 {
		fmt.Fprintf(&b, "%x/", p)
	}
	b.WriteString(string(k))
	return b.String()
}

func fmtMap(m map[string]string) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for i, k := range ks {
		ks[i] = k + "=" + m[k]
	}
	return "{" + strings.Join(ks, ",") + "}"
}

func fmtRec(obj []byte, r *Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s", fmtObj(obj), fmtTS(r.Version))
	if r.DeleteMarker {
		b.WriteString(" delete-marker")
	}
	fmt.Fprintf(&b, " parent=%s", fmtTS(r.Parent))
	if r.StartTS != r.Version {
		fmt.Fprintf(&b, " start=%s", fmtTS(r.StartTS))
	}
	if r.Size != 0 {
		fmt.Fprintf(&b, " size=%d", r.Size)
	}
	if r.ETag != "" {
		fmt.Fprintf(&b, " etag=%s", r.ETag)
	}
	if r.ContentType != "" {
		fmt.Fprintf(&b, " type=%s", r.ContentType)
	}
	if len(r.Meta) > 0 {
		fmt.Fprintf(&b, " meta=%s", fmtMap(r.Meta))
	}
	if len(r.Tags) > 0 {
		fmt.Fprintf(&b, " tags=%s", fmtMap(r.Tags))
	}
	if r.Inline != nil {
		fmt.Fprintf(&b, " inline=%q", r.Inline)
	}
	if r.Manifest != nil {
		fmt.Fprintf(&b, " manifest=%x", r.Manifest)
	}
	return b.String()
}

func fmtErr(err error) string {
	for _, s := range []error{ErrNotFound, ErrCorrupt, ErrVersionExists, ErrInvalidVersion, ErrPrecondition, ErrTxnAborted, ErrBadTxn, ErrHistoryPruned} {
		if errors.Is(err, s) {
			return fmt.Sprintf("error: %v\n", s)
		}
	}
	return fmt.Sprintf("error: %v\n", err)
}

type ddEnv struct {
	kv  *MemKV
	pol Retention
}

func (e *ddEnv) obj(t testing.TB, d *datadriven.TestData, arg string) []byte {
	var k string
	d.ScanArgs(t, arg, &k)
	space := 1
	if arg == "k" && d.HasArg("space") {
		d.ScanArgs(t, "space", &space)
	}
	return keys.Object(uint32(space), nil, []byte(k))
}

func (e *ddEnv) ts(t testing.TB, d *datadriven.TestData, arg string) uint64 {
	var s string
	d.ScanArgs(t, arg, &s)
	return parseTS(t, s)
}

func (e *ddEnv) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "retention":
		// retention [keep-all | keep-last=N | keep-for=DURATION]
		e.pol = Retention{}
		if d.HasArg("keep-last") {
			e.pol.Mode = KeepLast
			d.ScanArgs(t, "keep-last", &e.pol.KeepLast)
		}
		if d.HasArg("keep-for") {
			var s string
			d.ScanArgs(t, "keep-for", &s)
			dur, err := time.ParseDuration(s)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			e.pol.Mode = KeepFor
			e.pol.KeepFor = dur
		}
		if err := e.pol.Validate(); err != nil {
			return fmtErr(err)
		}
		return e.pol.Mode.String() + "\n"

	case "put":
		// put k=KEY ts=TS [now=TS] [delete] [start=TS] [size=N] [etag=S]
		//     [type=S] [inline=S] [manifest=S] [tags=(a=1,...)] [meta=(...)]
		obj := e.obj(t, d, "k")
		rec := &Record{Version: e.ts(t, d, "ts"), DeleteMarker: d.HasArg("delete")}
		now := rec.Version
		if d.HasArg("now") {
			now = e.ts(t, d, "now")
		}
		if d.HasArg("start") {
			rec.StartTS = e.ts(t, d, "start")
		}
		d.MaybeScanArgs(t, "size", &rec.Size)
		d.MaybeScanArgs(t, "etag", &rec.ETag)
		d.MaybeScanArgs(t, "type", &rec.ContentType)
		var s string
		if d.MaybeScanArgs(t, "inline", &s) {
			rec.Inline = []byte(s)
			rec.Size = int64(len(s))
		}
		if d.MaybeScanArgs(t, "manifest", &s) {
			rec.Manifest = []byte(s)
		}
		for _, m := range []struct {
			arg string
			dst *map[string]string
		}{{"tags", &rec.Tags}, {"meta", &rec.Meta}} {
			if a, ok := d.Arg(m.arg); ok {
				*m.dst = map[string]string{}
				for _, kv := range a.Vals {
					k, v, _ := strings.Cut(kv, "=")
					(*m.dst)[k] = v
				}
			}
		}
		pruned, err := Put(e.kv, obj, rec, e.pol, now)
		if err != nil {
			return fmtErr(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "put %s\n", fmtRec(obj, rec))
		for _, p := range pruned {
			fmt.Fprintf(&b, "pruned %s\n", fmtRec(obj, p))
		}
		return b.String()

	case "prune":
		// prune k=KEY now=TS: the collector's pruning at safe point now.
		obj := e.obj(t, d, "k")
		pruned, err := Prune(e.kv, obj, e.pol, e.ts(t, d, "now"), true)
		if err != nil {
			return fmtErr(err)
		}
		var b strings.Builder
		for _, r := range pruned {
			b.WriteString("pruned " + fmtRec(obj, r) + "\n")
		}
		if b.Len() == 0 {
			return "nothing\n"
		}
		return b.String()

	case "delete-version":
		obj := e.obj(t, d, "k")
		rec, err := DeleteVersion(e.kv, obj, e.ts(t, d, "ts"))
		if err != nil {
			return fmtErr(err)
		}
		return "deleted " + fmtRec(obj, rec) + "\n"

	case "latest", "at", "at-snapshot", "exact":
		obj := e.obj(t, d, "k")
		var rec *Record
		var err error
		switch d.Cmd {
		case "latest":
			rec, err = Latest(e.kv, obj)
		case "at":
			rec, err = At(e.kv, obj, e.ts(t, d, "ts"))
		case "at-snapshot":
			rec, err = AtSnapshot(e.kv, obj, e.ts(t, d, "ts"))
		case "exact":
			rec, err = Exact(e.kv, obj, e.ts(t, d, "ts"))
		}
		if err != nil {
			return fmtErr(err)
		}
		return fmtRec(obj, rec) + "\n"

	case "versions":
		// versions k=KEY [before=TS] [limit=N]
		obj := e.obj(t, d, "k")
		var before uint64
		if d.HasArg("before") {
			before = e.ts(t, d, "before")
		}
		var limit int
		d.MaybeScanArgs(t, "limit", &limit)
		recs, more, err := Versions(e.kv, obj, before, limit)
		if err != nil {
			return fmtErr(err)
		}
		var b strings.Builder
		for _, r := range recs {
			fmt.Fprintf(&b, "%s\n", fmtRec(obj, r))
		}
		fmt.Fprintf(&b, "more=%t\n", more)
		return b.String()

	case "list":
		// list [space=N] [prefix=P | lower=K upper=K] [start-after=K] [limit=N] [as-of=TS]
		//      [versions [after-version=TS]] [markers] [since=TS] [snapshot]
		space := 1
		d.MaybeScanArgs(t, "space", &space)
		var o ListOptions
		var s string
		if d.MaybeScanArgs(t, "prefix", &s) {
			o.Lower = keys.ObjectPrefix(uint32(space), nil, []byte(s))
			o.Upper = keys.PrefixEnd(o.Lower)
		} else {
			o.Lower, o.Upper = keys.SpaceStart(uint32(space)), keys.SpaceEnd(uint32(space))
		}
		if d.HasArg("lower") {
			o.Lower = e.obj(t, d, "lower")
		}
		if d.HasArg("upper") {
			o.Upper = e.obj(t, d, "upper")
		}
		if d.HasArg("start-after") {
			o.StartAfter = e.obj(t, d, "start-after")
		}
		d.MaybeScanArgs(t, "limit", &o.Limit)
		if d.HasArg("as-of") {
			o.AsOf = e.ts(t, d, "as-of")
		}
		o.AllVersions = d.HasArg("versions")
		o.Markers = d.HasArg("markers")
		o.Snapshot = d.HasArg("snapshot")
		if d.HasArg("since") {
			o.Since = e.ts(t, d, "since")
		}
		if d.HasArg("after-version") {
			o.AfterVersion = e.ts(t, d, "after-version")
		}
		ents, more, err := List(e.kv, o)
		if err != nil {
			return fmtErr(err)
		}
		var b strings.Builder
		for _, en := range ents {
			fmt.Fprintf(&b, "%s\n", fmtRec(en.Obj, en.Rec))
		}
		fmt.Fprintf(&b, "more=%t\n", more)
		return b.String()

	case "corrupt":
		// corrupt k=KEY ts=TS: flip a byte of the stored record.
		key := keys.Version(e.obj(t, d, "k"), e.ts(t, d, "ts"))
		it, _ := e.kv.NewIter(key, nil)
		if !it.SeekGE(key) || string(it.Key()) != string(key) {
			d.Fatalf(t, "no such version")
		}
		v := slices.Clone(it.Value())
		_ = it.Close()
		v[len(v)/2] ^= 0x40
		_ = e.kv.Set(key, v)
		return "ok\n"

	case "dump":
		// dump: every key of the store, decoded.
		var b strings.Builder
		it, _ := e.kv.NewIter(nil, nil)
		for ok := it.SeekGE(nil); ok; ok = it.Next() {
			if it.Key()[0] == keys.PrefixLock {
				b.WriteString(fmtLockKV(it.Key(), it.Value()))
				continue
			}
			obj, ts, err := keys.DecodeVersion(it.Key())
			if err != nil {
				fmt.Fprintf(&b, "%x: %v\n", it.Key(), err)
				continue
			}
			rec, err := decodeRecord(it.Value(), ts, obj)
			if err != nil {
				fmt.Fprintf(&b, "%s@%s: %s", fmtObj(obj), fmtTS(ts), fmtErr(err))
				continue
			}
			fmt.Fprintf(&b, "%s\n", fmtRec(obj, rec))
		}
		_ = it.Close()
		if b.Len() == 0 {
			return "empty\n"
		}
		return b.String()
	}
	if out, ok := e.runTxn(t, d); ok {
		return out
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := &ddEnv{kv: NewMemKV()}
		datadriven.RunTest(t, path, e.run)
	})
}
