package mvcc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-db/cairn/internal/keys"
)

// The transaction commands of the scripts (testdata/txn*.txt). Expiry
// and "now" are plain milliseconds. A mutation list is the command's
// input, one per line:
//
//	put KEY [inline=S] [expect=TS|none]
//	delete KEY [expect=...]
//	read KEY [expect=...]

func fmtTxnErr(err error) string {
	var le *LockedError
	var ce *ConflictError
	switch {
	case errors.As(err, &le):
		return fmt.Sprintf("error: %s locked by %s\n", fmtObj(le.Obj), fmtLock(le.Lock))
	case errors.As(err, &ce):
		return fmt.Sprintf("error: conflict on %s: version %s\n", fmtObj(ce.Obj), fmtTS(ce.Version))
	}
	return fmtErr(err)
}

func fmtLock(l *Lock) string {
	var b strings.Builder
	fmt.Fprintf(&b, "txn %s %s primary=%s expires=%d", fmtTS(l.StartTS), l.Kind, fmtObj(l.Primary), l.Expires)
	if l.Retention.Mode != KeepAll {
		fmt.Fprintf(&b, " retention=%s", l.Retention.Mode)
	}
	if l.Rec != nil {
		if l.Rec.DeleteMarker {
			b.WriteString(" delete")
		}
		if l.Rec.Inline != nil {
			fmt.Fprintf(&b, " inline=%q", l.Rec.Inline)
		}
	}
	return b.String()
}

func fmtStatus(st TxnStatus) string {
	switch st.State {
	case TxnCommitted:
		return fmt.Sprintf("committed at %s\n", fmtTS(st.CommitTS))
	case TxnPending:
		return fmt.Sprintf("pending until %d\n", st.Expires)
	}
	return st.State.String() + "\n"
}

// fmtLockKV formats a key of the 'l' keyspace and its value for dump.
func fmtLockKV(k, v []byte) string {
	obj, ts, record, err := keys.DecodeLock(k)
	if err != nil {
		return fmt.Sprintf("%x: %v\n", k, err)
	}
	if record {
		st, err := unmarshalTxnRecord(v)
		if err != nil {
			return fmt.Sprintf("record %s txn %s: %v\n", fmtObj(obj), fmtTS(ts), err)
		}
		return fmt.Sprintf("record %s txn %s: %s", fmtObj(obj), fmtTS(ts), fmtStatus(st))
	}
	l, err := UnmarshalLock(v)
	if err != nil {
		return fmt.Sprintf("lock %s: %v\n", fmtObj(obj), err)
	}
	return fmt.Sprintf("lock %s: %s\n", fmtObj(obj), fmtLock(l))
}

func (e *ddEnv) mutations(t *testing.T, d *datadriven.TestData) []Mutation {
	var muts []Mutation
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			d.Fatalf(t, "bad mutation %q", line)
		}
		m := Mutation{Obj: keys.Object(1, nil, []byte(f[1])), Retention: e.pol}
		switch f[0] {
		case "put":
			m.Kind, m.Rec = LockWrite, &Record{}
		case "delete":
			m.Kind, m.Rec = LockWrite, &Record{DeleteMarker: true}
		case "read":
			m.Kind = LockRead
		case "bogus":
			m.Kind = 9
		default:
			d.Fatalf(t, "bad mutation %q", line)
		}
		for _, a := range f[2:] {
			k, v, _ := strings.Cut(a, "=")
			switch k {
			case "inline":
				m.Rec.Inline, m.Rec.Size = []byte(v), int64(len(v))
			case "expect":
				m.HasExpect = true
				if v != "none" {
					m.Expect = parseTS(t, v)
				}
			default:
				d.Fatalf(t, "bad mutation argument %q", a)
			}
		}
		muts = append(muts, m)
	}
	return muts
}

func (e *ddEnv) runTxn(t *testing.T, d *datadriven.TestData) (string, bool) {
	key := func(arg string) []byte { return e.obj(t, d, arg) }
	switch d.Cmd {
	case "prewrite":
		// prewrite start=TS primary=KEY expires=MS + mutations
		var expires int64
		d.ScanArgs(t, "expires", &expires)
		if err := Prewrite(e.kv, e.ts(t, d, "start"), key("primary"), expires, e.mutations(t, d)); err != nil {
			return fmtTxnErr(err), true
		}
		return "ok\n", true

	case "one-phase":
		// one-phase start=TS commit=TS + mutations
		recs, pruned, err := CommitOnePhase(e.kv, e.ts(t, d, "start"), e.ts(t, d, "commit"), e.mutations(t, d))
		if err != nil {
			return fmtTxnErr(err), true
		}
		var b strings.Builder
		muts := e.mutations(t, d)
		for i, r := range recs {
			if r != nil {
				fmt.Fprintf(&b, "put %s\n", fmtRec(muts[i].Obj, r))
			}
		}
		for _, p := range pruned {
			fmt.Fprintf(&b, "pruned %s\n", fmtTS(p.Version))
		}
		if b.Len() == 0 {
			return "ok\n", true
		}
		return b.String(), true

	case "commit":
		// commit k=KEY start=TS commit=TS [record]
		obj := key("k")
		rec, pruned, err := Commit(e.kv, obj, e.ts(t, d, "start"), e.ts(t, d, "commit"), d.HasArg("record"))
		if err != nil {
			return fmtTxnErr(err), true
		}
		var b strings.Builder
		if rec == nil {
			b.WriteString("unlocked\n")
		} else {
			fmt.Fprintf(&b, "put %s\n", fmtRec(obj, rec))
		}
		for _, p := range pruned {
			fmt.Fprintf(&b, "pruned %s\n", fmtTS(p.Version))
		}
		return b.String(), true

	case "rollback":
		// rollback k=KEY start=TS [primary]
		st, err := Rollback(e.kv, key("k"), e.ts(t, d, "start"), d.HasArg("primary"))
		if err != nil {
			return fmtTxnErr(err), true
		}
		return fmtStatus(st), true

	case "check-txn":
		// check-txn primary=KEY start=TS [now=MS] [rollback-expired] [rollback-missing]
		p := CheckPolicy{RollbackExpired: d.HasArg("rollback-expired"), RollbackMissing: d.HasArg("rollback-missing")}
		d.MaybeScanArgs(t, "now", &p.Now)
		st, err := CheckTxn(e.kv, key("primary"), e.ts(t, d, "start"), p)
		if err != nil {
			return fmtTxnErr(err), true
		}
		return fmtStatus(st), true

	case "heartbeat":
		// heartbeat primary=KEY start=TS expires=MS
		var expires int64
		d.ScanArgs(t, "expires", &expires)
		st, err := Heartbeat(e.kv, key("primary"), e.ts(t, d, "start"), expires)
		if err != nil {
			return fmtTxnErr(err), true
		}
		return fmtStatus(st), true

	case "clear-txn":
		if err := ClearTxn(e.kv, key("primary"), e.ts(t, d, "start")); err != nil {
			return fmtTxnErr(err), true
		}
		return "ok\n", true

	case "read-lock":
		// read-lock k=KEY [at=TS]: the lock a read must resolve.
		var at uint64
		if d.HasArg("at") {
			at = e.ts(t, d, "at")
		}
		l, err := GetLock(e.kv, key("k"))
		if err != nil {
			return fmtTxnErr(err), true
		}
		if l == nil || !l.Blocks(at) {
			return "none\n", true
		}
		return fmtLock(l) + "\n", true

	case "locks":
		// locks [at=TS] [limit=N]: the locks a listing of space 1 must resolve.
		var at uint64
		if d.HasArg("at") {
			at = e.ts(t, d, "at")
		}
		var limit int
		d.MaybeScanArgs(t, "limit", &limit)
		ls, err := Locks(e.kv, keys.SpaceStart(1), keys.SpaceEnd(1), at, limit)
		if err != nil {
			return fmtTxnErr(err), true
		}
		var b strings.Builder
		for _, l := range ls {
			fmt.Fprintf(&b, "%s: %s\n", fmtObj(l.Obj), fmtLock(l.Lock))
		}
		if b.Len() == 0 {
			return "none\n", true
		}
		return b.String(), true

	case "check-unlocked":
		if err := CheckUnlocked(e.kv, key("k")); err != nil {
			return fmtTxnErr(err), true
		}
		return "ok\n", true
	}
	return "", false
}

// FuzzUnmarshalLock: a value that decodes as a lock is that lock's one
// encoding, and no input panics.
func FuzzUnmarshalLock(f *testing.F) {
	f.Add((&Lock{StartTS: 7, Primary: keys.Object(1, nil, []byte("p")), Expires: 99, Kind: LockWrite,
		Retention: Retention{Mode: KeepLast, KeepLast: 3}, Rec: &Record{Inline: []byte("x"), Size: 1}}).Marshal())
	f.Add((&Lock{StartTS: 9, Primary: []byte("q"), Kind: LockRead}).Marshal())
	f.Add(marshalTxnRecord(TxnStatus{State: TxnCommitted, CommitTS: 5}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if l, err := UnmarshalLock(b); err == nil {
			if got := l.Marshal(); string(got) != string(b) {
				t.Fatalf("lock % x re-encodes as % x", b, got)
			}
		}
		if st, err := unmarshalTxnRecord(b); err == nil {
			if got := marshalTxnRecord(st); string(got) != string(b) {
				t.Fatalf("record % x re-encodes as % x", b, got)
			}
		}
	})
}
