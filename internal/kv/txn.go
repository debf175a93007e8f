package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cairn-db/cairn/internal/codec"
	"github.com/cairn-db/cairn/internal/mvcc"
)

// The transaction commands: each applies one rule of mvcc's transaction
// protocol (mvcc/txn.go) to keys of one range.
const (
	opPrewrite  byte = 4
	opCommit    byte = 5
	opRollback  byte = 6
	opCheckTxn  byte = 7
	opHeartbeat byte = 8
	opOnePhase  byte = 9
	_           byte = 10 // was a lone record clear; ResolveCmd clears records
	opResolve   byte = 11
)

// MaxTxnKeys bounds the keys of one transaction command; a coordinator
// splits larger sets over several commands (and a one-phase commit over
// more keys becomes two-phase).
const MaxTxnKeys = 1024

// PrewriteCmd locks keys of one range for a transaction (mvcc.Prewrite).
type PrewriteCmd struct {
	StartTS uint64
	Primary []byte
	Expires int64 // Unix ms
	Muts    []mvcc.Mutation
}

// CommitCmd commits a transaction's locks on keys of one range
// (mvcc.Commit). With Record, Objs[0] is the primary of a transaction that
// has locks in other ranges, and its outcome is kept in a record.
type CommitCmd struct {
	StartTS, CommitTS uint64
	Objs              [][]byte
	Record            bool
}

// RollbackCmd removes a transaction's locks on keys of one range
// (mvcc.Rollback). With Primary, Objs[0] is the primary.
type RollbackCmd struct {
	StartTS uint64
	Objs    [][]byte
	Primary bool
}

// CheckTxnCmd asks a transaction's primary for its state, rolling it back
// as Policy allows (mvcc.CheckTxn). It is a command, not a read, because
// it may write the rollback.
type CheckTxnCmd struct {
	Primary []byte
	StartTS uint64
	Policy  mvcc.CheckPolicy
}

// HeartbeatCmd extends a transaction's primary lock (mvcc.Heartbeat).
type HeartbeatCmd struct {
	Primary []byte
	StartTS uint64
	Expires int64
}

// OnePhaseCmd commits a transaction whose keys are all in one range in
// one step (mvcc.CommitOnePhase).
type OnePhaseCmd struct {
	StartTS, CommitTS uint64
	Muts              []mvcc.Mutation
}

// ResolveCmd resolves, for many transactions at once, locks of theirs
// whose outcome is known to be a commit, and clears the records of those
// whose locks are all resolved: a coordinator's background work, batched
// per range. A lock already resolved is skipped.
type ResolveCmd struct {
	Commits []ResolveCommit
	Clears  []ResolveClear
}

// ResolveCommit commits one transaction's lock on Obj.
type ResolveCommit struct {
	Obj               []byte
	StartTS, CommitTS uint64
}

// ResolveClear clears one transaction's record on its primary.
type ResolveClear struct {
	Primary []byte
	StartTS uint64
}

// Encode returns the command's bytes.
func (c *ResolveCmd) Encode() []byte {
	b := append(make([]byte, 0, 64*(len(c.Commits)+len(c.Clears))), opResolve, cmdVersion)
	b = binary.AppendUvarint(b, uint64(len(c.Commits)))
	for _, r := range c.Commits {
		b = appendBytes(b, r.Obj)
		b = binary.AppendUvarint(b, r.StartTS)
		b = binary.AppendUvarint(b, r.CommitTS)
	}
	b = binary.AppendUvarint(b, uint64(len(c.Clears)))
	for _, r := range c.Clears {
		b = appendBytes(b, r.Primary)
		b = binary.AppendUvarint(b, r.StartTS)
	}
	return b
}

// Encode returns the command's bytes.
func (c *PrewriteCmd) Encode() []byte {
	b := append(make([]byte, 0, 64+len(c.Primary)+mutationsCap(c.Muts)), opPrewrite, cmdVersion)
	b = binary.AppendUvarint(b, c.StartTS)
	b = appendBytes(b, c.Primary)
	b = binary.AppendVarint(b, c.Expires)
	return appendMutations(b, c.Muts)
}

// Encode returns the command's bytes.
func (c *CommitCmd) Encode() []byte {
	b := append(make([]byte, 0, 64), opCommit, cmdVersion)
	b = binary.AppendUvarint(b, c.StartTS)
	b = binary.AppendUvarint(b, c.CommitTS)
	b = appendFlag(b, c.Record)
	return appendObjs(b, c.Objs)
}

// Encode returns the command's bytes.
func (c *RollbackCmd) Encode() []byte {
	b := append(make([]byte, 0, 64), opRollback, cmdVersion)
	b = binary.AppendUvarint(b, c.StartTS)
	b = appendFlag(b, c.Primary)
	return appendObjs(b, c.Objs)
}

// Encode returns the command's bytes.
func (c *CheckTxnCmd) Encode() []byte {
	b := append(make([]byte, 0, 64), opCheckTxn, cmdVersion)
	b = appendBytes(b, c.Primary)
	b = binary.AppendUvarint(b, c.StartTS)
	b = binary.AppendVarint(b, c.Policy.Now)
	var flags byte
	if c.Policy.RollbackExpired {
		flags |= 1
	}
	if c.Policy.RollbackMissing {
		flags |= 2
	}
	return append(b, flags)
}

// Encode returns the command's bytes.
func (c *HeartbeatCmd) Encode() []byte {
	b := append(make([]byte, 0, 64), opHeartbeat, cmdVersion)
	b = appendBytes(b, c.Primary)
	b = binary.AppendUvarint(b, c.StartTS)
	return binary.AppendVarint(b, c.Expires)
}

// Encode returns the command's bytes. The commit timestamp comes first
// after the header: Footprint reads it without decoding the rest.
func (c *OnePhaseCmd) Encode() []byte {
	b := append(make([]byte, 0, 64+mutationsCap(c.Muts)), opOnePhase, cmdVersion)
	b = binary.AppendUvarint(b, c.CommitTS)
	b = binary.AppendUvarint(b, c.StartTS)
	return appendMutations(b, c.Muts)
}

func appendFlag(b []byte, f bool) []byte {
	if f {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendObjs(b []byte, objs [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(objs)))
	for _, o := range objs {
		b = appendBytes(b, o)
	}
	return b
}

func appendRetention(b []byte, r mvcc.Retention) []byte {
	b = append(b, byte(r.Mode))
	b = binary.AppendUvarint(b, uint64(r.KeepLast))
	return binary.AppendUvarint(b, uint64(r.KeepFor))
}

// A mutation: obj, kind, flags (bit 0: expect), expect, retention, and the
// record (empty for a read).
func appendMutations(b []byte, muts []mvcc.Mutation) []byte {
	b = binary.AppendUvarint(b, uint64(len(muts)))
	for i := range muts {
		m := &muts[i]
		b = appendBytes(b, m.Obj)
		b = append(b, byte(m.Kind))
		b = appendFlag(b, m.HasExpect)
		b = binary.AppendUvarint(b, m.Expect)
		b = appendRetention(b, m.Retention)
		b = appendRecord(b, m.Rec)
	}
	return b
}

// mutationsCap is an upper bound of the length of appendMutations' output.
func mutationsCap(muts []mvcc.Mutation) int {
	n := binary.MaxVarintLen64
	for i := range muts {
		n += len(muts[i].Obj) + 6*binary.MaxVarintLen64
		if muts[i].Rec != nil {
			n += muts[i].Rec.MarshalCap()
		}
	}
	return n
}

// appendRecord appends rec's encoding (none for nil) with its length
// before it, as appendBytes would, without a buffer of its own: the record
// is encoded in place and moved up to its length's end.
func appendRecord(b []byte, rec *mvcc.Record) []byte {
	if rec == nil {
		return append(b, 0)
	}
	at := len(b)
	b = append(b, make([]byte, binary.MaxVarintLen64)...)
	b = rec.AppendMarshal(b)
	n := len(b) - at - binary.MaxVarintLen64
	k := binary.PutUvarint(b[at:], uint64(n))
	copy(b[at+k:], b[at+binary.MaxVarintLen64:])
	return b[:at+k+n]
}

type cmdDecoder struct{ codec.Decoder }

func newCmdDecoder(b []byte) *cmdDecoder {
	return &cmdDecoder{codec.NewDecoder(b, func(msg string) error { return fmt.Errorf("%w: %s", ErrBadCommand, msg) })}
}

func (d *cmdDecoder) flag() bool {
	switch d.U8() {
	case 0:
		return false
	case 1:
		return true
	}
	d.Fail("bad flag")
	return false
}

func (d *cmdDecoder) retention() mvcc.Retention {
	return mvcc.Retention{Mode: mvcc.RetentionMode(d.U8()), KeepLast: int(d.Uvarint()), KeepFor: time.Duration(d.Uvarint())}
}

// objs reads a key list: 1 to MaxTxnKeys keys, none twice.
func (d *cmdDecoder) objs() [][]byte {
	n := d.Count(1)
	if d.Err() == nil && (n == 0 || n > MaxTxnKeys) {
		d.Fail("%d keys", n)
	}
	objs := make([][]byte, 0, n)
	seen := make(map[string]bool, n)
	for range n {
		o := d.Bytes()
		if seen[string(o)] {
			d.Fail("a key twice")
		}
		seen[string(o)] = true
		objs = append(objs, o)
	}
	return objs
}

func (d *cmdDecoder) mutations() []mvcc.Mutation {
	n := d.Count(6)
	if d.Err() == nil && (n == 0 || n > MaxTxnKeys) {
		d.Fail("%d mutations", n)
	}
	muts := make([]mvcc.Mutation, 0, n)
	seen := make(map[string]bool, n)
	for range n {
		m := mvcc.Mutation{Obj: d.Bytes(), Kind: mvcc.LockKind(d.U8())}
		m.HasExpect = d.flag()
		m.Expect = d.Uvarint()
		m.Retention = d.retention()
		recb := d.Bytes()
		if d.Err() != nil {
			return nil
		}
		if seen[string(m.Obj)] {
			d.Fail("a key twice")
			return nil
		}
		seen[string(m.Obj)] = true
		if len(recb) > 0 {
			rec, err := mvcc.Unmarshal(recb)
			if err != nil {
				d.FailWith(fmt.Errorf("%w: %v", ErrBadCommand, err))
				return nil
			}
			m.Rec = rec
		}
		muts = append(muts, m)
	}
	return muts
}

// decodeTxn decodes a transaction command (op is one of the txn ops).
func decodeTxn(op byte, body []byte) (any, error) {
	d := newCmdDecoder(body)
	var c any
	switch op {
	case opPrewrite:
		c = &PrewriteCmd{StartTS: d.Uvarint(), Primary: d.Bytes(), Expires: d.CanonicalVarint(), Muts: d.mutations()}
	case opCommit:
		c = &CommitCmd{StartTS: d.Uvarint(), CommitTS: d.Uvarint(), Record: d.flag(), Objs: d.objs()}
	case opRollback:
		c = &RollbackCmd{StartTS: d.Uvarint(), Primary: d.flag(), Objs: d.objs()}
	case opCheckTxn:
		ct := &CheckTxnCmd{Primary: d.Bytes(), StartTS: d.Uvarint()}
		ct.Policy.Now = d.CanonicalVarint()
		flags := d.U8()
		ct.Policy.RollbackExpired, ct.Policy.RollbackMissing = flags&1 != 0, flags&2 != 0
		c = ct
	case opHeartbeat:
		c = &HeartbeatCmd{Primary: d.Bytes(), StartTS: d.Uvarint(), Expires: d.CanonicalVarint()}
	case opOnePhase:
		c = &OnePhaseCmd{CommitTS: d.Uvarint(), StartTS: d.Uvarint(), Muts: d.mutations()}
	case opResolve:
		r := &ResolveCmd{}
		n := d.Count(3)
		for range n {
			r.Commits = append(r.Commits, ResolveCommit{Obj: d.Bytes(), StartTS: d.Uvarint(), CommitTS: d.Uvarint()})
		}
		n = d.Count(2)
		for range n {
			r.Clears = append(r.Clears, ResolveClear{Primary: d.Bytes(), StartTS: d.Uvarint()})
		}
		if d.Err() == nil && (len(r.Commits)+len(r.Clears) == 0 || len(r.Commits)+len(r.Clears) > 4*MaxTxnKeys) {
			d.Fail("%d resolutions", len(r.Commits)+len(r.Clears))
		}
		c = r
	default:
		return nil, ErrBadCommand
	}
	if err := d.Done(); err != nil {
		return nil, err
	}
	return c, nil
}

// Footprint returns the timestamp at which cmd writes new versions over
// keys it has not locked (a plain write, a one-phase commit), for the
// leaseholder's timestamp guard; ok is false for any other command. It
// reads only the command's head.
func Footprint(cmd []byte) (ts uint64, ok bool) {
	if len(cmd) < 2 || cmd[1] != cmdVersion {
		return 0, false
	}
	switch cmd[0] {
	case opPut:
		d := newCmdDecoder(cmd[2:])
		d.Bytes()
		ts = d.Uvarint()
		return ts, d.Err() == nil
	case opOnePhase:
		d := newCmdDecoder(cmd[2:])
		ts = d.Uvarint()
		return ts, d.Err() == nil
	}
	return 0, false
}

// deferredRW reads through to the apply batch and holds its writes until
// flush: a multi-key command that fails part-way writes nothing. The mvcc
// rules never read a key after writing it within one command, and a
// command names each key once, so the reads need not see the held writes.
//
// The command's reads share one pebble iterator, bounded anew for each
// (a pebble iterator costs far more to make than to re-bound; the batch
// does not change under it while the writes are held). A read that starts
// while another's iterator is open gets its own.
type deferredRW struct {
	BatchRW
	writes []deferredWrite
	arena  []byte // the held keys and values, back to back
	it     *pebble.Iterator
	itBusy bool
}

// NewIter implements mvcc.Reader.
func (d *deferredRW) NewIter(lower, upper []byte) (mvcc.Iterator, error) {
	if d.itBusy {
		return d.BatchRW.NewIter(lower, upper)
	}
	if d.it == nil {
		it, err := d.B.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper, UseL6Filters: true})
		if err != nil {
			return nil, err
		}
		d.it = it
	} else {
		d.it.SetBounds(lower, upper)
	}
	d.itBusy = true
	return sharedIter{d.it, d}, nil
}

// sharedIter is the command's iterator lent to one read; Close returns it.
type sharedIter struct {
	*pebble.Iterator
	d *deferredRW
}

func (s sharedIter) Close() error {
	s.d.itBusy = false
	return s.Iterator.Error()
}

// close closes the shared iterator, once the command is done.
func (d *deferredRW) close() error {
	if d.it == nil {
		return nil
	}
	err := d.it.Close()
	d.it = nil
	return err
}

// deferredWrite is a held write: its key and value are at
// arena[at:at+klen] and arena[at+klen:at+klen+vlen].
type deferredWrite struct {
	at, klen, vlen int
	del            bool
}

func (d *deferredRW) Set(k, v []byte) error {
	d.writes = append(d.writes, deferredWrite{at: len(d.arena), klen: len(k), vlen: len(v)})
	d.arena = append(append(d.arena, k...), v...)
	return nil
}

// SetRecord implements mvcc.RecordSetter.
func (d *deferredRW) SetRecord(k []byte, rec *mvcc.Record) error {
	at := len(d.arena)
	d.arena = rec.AppendMarshal(append(d.arena, k...))
	d.writes = append(d.writes, deferredWrite{at: at, klen: len(k), vlen: len(d.arena) - at - len(k)})
	return nil
}

func (d *deferredRW) Delete(k []byte) error {
	d.writes = append(d.writes, deferredWrite{at: len(d.arena), klen: len(k), del: true})
	d.arena = append(d.arena, k...)
	return nil
}

func (d *deferredRW) flush() error {
	for _, w := range d.writes {
		k := d.arena[w.at : w.at+w.klen]
		var err error
		if w.del {
			err = d.BatchRW.Delete(k)
		} else {
			err = d.BatchRW.Set(k, d.arena[w.at+w.klen:w.at+w.klen+w.vlen])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// applyTxn applies a transaction command. On error it has written nothing.
func (m *StateMachine) applyTxn(rw BatchRW, c any) any {
	d := &deferredRW{BatchRW: rw, writes: m.held.writes[:0], arena: m.held.arena[:0]}
	defer func() {
		// The next command reuses the buffers (the batch copied the
		// writes), unless they grew large.
		if cap(d.arena) <= maxHeldArena {
			m.held.writes, m.held.arena = d.writes[:0], d.arena[:0]
		}
	}()
	defer d.close() // after a failure: the reads' error is the one returned
	return m.applyTxnRW(d, c)
}

// maxHeldArena bounds the buffer of held writes a StateMachine keeps
// between commands.
const maxHeldArena = 256 << 10

func (m *StateMachine) applyTxnRW(d *deferredRW, c any) any {
	res := &Result{}
	var changed []changedKey
	switch c := c.(type) {
	case *PrewriteCmd:
		if !m.containsMuts(c.Muts) {
			return ErrWrongRange
		}
		if err := mvcc.Prewrite(d, c.StartTS, c.Primary, c.Expires, c.Muts); err != nil {
			return err
		}
		for _, mu := range c.Muts {
			changed = append(changed, changedKey{mu.Obj, nil})
		}
	case *CommitCmd:
		if !m.containsAll(c.Objs) {
			return ErrWrongRange
		}
		res.Recs = make([]*mvcc.Record, len(c.Objs))
		for i, obj := range c.Objs {
			before := len(d.writes)
			rec, pruned, err := mvcc.Commit(d, obj, c.StartTS, c.CommitTS, c.Record && i == 0)
			if err != nil {
				return err
			}
			res.Recs[i] = rec
			res.Pruned = append(res.Pruned, pruned...)
			if len(d.writes) > before { // not a retry of a commit applied before
				changed = append(changed, changedKey{obj, rec})
			}
		}
		if c.Record && len(c.Objs) > 0 {
			res.Rec = res.Recs[0]
		}
	case *RollbackCmd:
		if !m.containsAll(c.Objs) {
			return ErrWrongRange
		}
		for i, obj := range c.Objs {
			st, err := mvcc.Rollback(d, obj, c.StartTS, c.Primary && i == 0)
			if err != nil {
				return err
			}
			if i == 0 {
				res.Status = st
			}
			changed = append(changed, changedKey{obj, nil})
		}
	case *CheckTxnCmd:
		if !m.bounds.ContainsKey(c.Primary) {
			return ErrWrongRange
		}
		st, err := mvcc.CheckTxn(d, c.Primary, c.StartTS, c.Policy)
		if err != nil {
			return err
		}
		res.Status = st
		if len(d.writes) > 0 {
			changed = append(changed, changedKey{c.Primary, nil})
		}
	case *HeartbeatCmd:
		if !m.bounds.ContainsKey(c.Primary) {
			return ErrWrongRange
		}
		st, err := mvcc.Heartbeat(d, c.Primary, c.StartTS, c.Expires)
		if err != nil {
			return err
		}
		res.Status = st
	case *OnePhaseCmd:
		if !m.containsMuts(c.Muts) {
			return ErrWrongRange
		}
		recs, pruned, err := mvcc.CommitOnePhase(d, c.StartTS, c.CommitTS, c.Muts)
		if err != nil {
			return err
		}
		res.Recs, res.Pruned = recs, pruned
		for i, mu := range c.Muts {
			changed = append(changed, changedKey{mu.Obj, recs[i]})
		}
	case *ResolveCmd:
		for _, r := range c.Commits {
			if !m.bounds.ContainsKey(r.Obj) {
				return ErrWrongRange
			}
		}
		for _, r := range c.Clears {
			if !m.bounds.ContainsKey(r.Primary) {
				return ErrWrongRange
			}
		}
		for _, r := range c.Commits {
			before := len(d.writes)
			rec, pruned, err := mvcc.Commit(d, r.Obj, r.StartTS, r.CommitTS, false)
			if errors.Is(err, mvcc.ErrTxnAborted) {
				continue // resolved already (by a reader), or never locked
			}
			if err != nil {
				return err
			}
			res.Pruned = append(res.Pruned, pruned...)
			if len(d.writes) > before {
				changed = append(changed, changedKey{r.Obj, rec})
			}
		}
		for _, r := range c.Clears {
			if err := mvcc.ClearTxn(d, r.Primary, r.StartTS); err != nil {
				return err
			}
		}
	}
	if err := d.close(); err != nil {
		return err
	}
	if err := d.flush(); err != nil {
		return err
	}
	for _, k := range changed {
		m.wrote(k.obj, k.latest)
	}
	return res
}

type changedKey struct {
	obj    []byte
	latest *mvcc.Record // the new latest version, nil if not known
}

func (m *StateMachine) containsMuts(muts []mvcc.Mutation) bool {
	for _, mu := range muts {
		if !m.bounds.ContainsKey(mu.Obj) {
			return false
		}
	}
	return true
}

func (m *StateMachine) containsAll(objs [][]byte) bool {
	for _, o := range objs {
		if !m.bounds.ContainsKey(o) {
			return false
		}
	}
	return true
}
