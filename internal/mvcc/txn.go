package mvcc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/cairn-db/cairn/internal/keys"
)

// Transactions, Percolator-style (see doc.go, "Transactions"): the rules a
// range applies to its keys' locks, versions and transaction records. Each
// function reads first and writes last, so an error leaves rw untouched;
// all are deterministic.

// LockKind says what a lock stands for.
type LockKind uint8

const (
	// LockWrite holds the version its transaction writes on commit.
	LockWrite LockKind = 1
	// LockRead is a serializable transaction's read: it writes nothing on
	// commit, but keeps writers off the key until it is resolved, so that
	// the value read is still the newest at the commit timestamp.
	LockRead LockKind = 2
)

func (k LockKind) String() string {
	switch k {
	case LockWrite:
		return "write"
	case LockRead:
		return "read"
	}
	return fmt.Sprintf("LockKind(%d)", uint8(k))
}

// Lock is a transaction's intent on one key: the value at keys.Lock(obj).
type Lock struct {
	// StartTS is the transaction's start timestamp, its identity.
	StartTS uint64
	// Primary is the object key of the transaction's primary lock, whose
	// state is the transaction's state.
	Primary []byte
	// Expires is when (Unix milliseconds) a reader that meets the lock may
	// roll its transaction back; the coordinator's heartbeat extends the
	// primary's.
	Expires int64
	// Kind is what the lock stands for.
	Kind LockKind
	// Retention is the key's history policy the committed version is
	// written under.
	Retention Retention
	// Rec is the version a LockWrite writes (Version is set on commit),
	// nil for a LockRead.
	Rec *Record
}

// IsPrimary reports whether this lock, on obj, is its transaction's
// primary.
func (l *Lock) IsPrimary(obj []byte) bool { return bytes.Equal(l.Primary, obj) }

// Mutation is one key of a transaction's commit.
type Mutation struct {
	Obj  []byte
	Kind LockKind
	// Rec is the version to write (LockWrite).
	Rec *Record
	// Retention is the policy the version is written under.
	Retention Retention
	// HasExpect requires that obj's newest committed version at the
	// transaction's start be Expect (0: none, or a delete marker): a
	// conditional write, or a serializable read's validation.
	HasExpect bool
	Expect    uint64
}

// TxnState is the state of a transaction as its primary records it.
type TxnState uint8

const (
	// TxnPending: the primary lock is in place; the transaction may still
	// commit.
	TxnPending TxnState = 1
	// TxnCommitted: the transaction committed at TxnStatus.CommitTS.
	TxnCommitted TxnState = 2
	// TxnRolledBack: the transaction was rolled back; it can never commit.
	TxnRolledBack TxnState = 3
	// TxnMissing: the primary holds no trace of the transaction (its
	// prewrite has not arrived, or never will).
	TxnMissing TxnState = 4
)

func (s TxnState) String() string {
	switch s {
	case TxnPending:
		return "pending"
	case TxnCommitted:
		return "committed"
	case TxnRolledBack:
		return "rolled-back"
	case TxnMissing:
		return "missing"
	}
	return fmt.Sprintf("TxnState(%d)", uint8(s))
}

// TxnStatus is what a transaction's primary says of it.
type TxnStatus struct {
	State TxnState
	// CommitTS is the commit timestamp when State is TxnCommitted.
	CommitTS uint64
	// Expires is the primary lock's expiry when State is TxnPending.
	Expires int64
}

// LockedError is returned when a key is locked by another transaction.
type LockedError struct {
	Obj  []byte
	Lock *Lock
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("mvcc: object %x is locked by the transaction started at %d", e.Obj, e.Lock.StartTS)
}

// ConflictError is returned when a key has a version committed after the
// transaction's start: a write-write conflict (or, for a serializable
// read, a read-write one). The transaction must start again.
type ConflictError struct {
	Obj     []byte
	Version uint64 // the newer version
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("mvcc: object %x has version %d, committed after the transaction started", e.Obj, e.Version)
}

var (
	// ErrPrecondition is returned when a mutation's Expect does not hold.
	ErrPrecondition = errors.New("mvcc: the object's current version does not match the condition")
	// ErrTxnAborted is returned when the transaction was rolled back (or
	// its lock is gone without a commit): it can no longer commit.
	ErrTxnAborted = errors.New("mvcc: the transaction was rolled back")
	// ErrBadTxn is returned for arguments no coordinator sends: a commit
	// timestamp not after the start, a mutation of an unknown kind.
	ErrBadTxn = errors.New("mvcc: invalid transaction request")
)

// GetLock returns obj's lock, or nil if it has none.
func GetLock(r Reader, obj []byte) (_ *Lock, err error) {
	v, err := getValue(r, keys.Lock(obj))
	if err != nil || v == nil {
		return nil, err
	}
	return UnmarshalLock(v)
}

// Blocks reports whether a read at readTS (0: the latest) must resolve
// the lock before it may trust what it reads: a write lock whose
// transaction started at or before readTS. A read lock changes nothing,
// and a transaction that started after readTS commits after it.
func (l *Lock) Blocks(readTS uint64) bool {
	return l.Kind == LockWrite && (readTS == 0 || l.StartTS <= readTS)
}

// LockEntry is a lock and its key, as Locks returns them.
type LockEntry struct {
	Obj  []byte
	Lock *Lock
}

// Locks returns, in key order, the locks on objects in [lower, upper) (nil
// bounds are open) that a read at readTS must resolve (see ReadLock), at
// most limit of them when limit > 0.
func Locks(r Reader, lower, upper []byte, readTS uint64, limit int) (_ []LockEntry, err error) {
	lo, hi := keys.LockSpan(lower, upper)
	if lower == nil {
		lo = []byte{keys.PrefixLock}
	}
	it, err := r.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	var out []LockEntry
	for ok := it.SeekGE(lo); ok; ok = it.Next() {
		obj, _, record, err := keys.DecodeLock(it.Key())
		if err != nil {
			return nil, fmt.Errorf("%w: lock key %x: %v", ErrCorrupt, it.Key(), err)
		}
		if record {
			continue
		}
		l, err := UnmarshalLock(it.Value())
		if err != nil {
			return nil, fmt.Errorf("object %x: %w", obj, err)
		}
		if !l.Blocks(readTS) {
			continue
		}
		out = append(out, LockEntry{Obj: slices.Clone(obj), Lock: l})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, it.Error()
}

// CheckUnlocked returns a *LockedError if obj holds any lock: a write
// outside a transaction must wait for it to be resolved.
func CheckUnlocked(r Reader, obj []byte) error {
	l, err := GetLock(r, obj)
	if err != nil {
		return err
	}
	if l != nil {
		return &LockedError{Obj: obj, Lock: l}
	}
	return nil
}

// Prewrite locks every key of muts for the transaction that started at
// startTS, whose primary lock is on primary, until expires (Unix ms). It
// writes all the locks or, on the first failure, none:
//
//   - a key locked by another transaction: *LockedError;
//   - a key with a version newer than startTS: *ConflictError;
//   - a mutation whose Expect does not hold: ErrPrecondition;
//   - the transaction already rolled back (its record on primary):
//     ErrTxnAborted.
//
// A key already locked by this transaction is left as it is (a retried
// prewrite).
func Prewrite(rw ReadWriter, startTS uint64, primary []byte, expires int64, muts []Mutation) error {
	if startTS == 0 {
		return fmt.Errorf("%w: start timestamp 0", ErrBadTxn)
	}
	type pending struct {
		key, value []byte
	}
	var writes []pending
	for i := range muts {
		m := &muts[i]
		if bytes.Equal(m.Obj, primary) {
			st, ok, err := txnRecord(rw, primary, startTS)
			if err != nil {
				return err
			}
			if ok && st.State == TxnRolledBack {
				return fmt.Errorf("%w: object %x, start %d", ErrTxnAborted, primary, startTS)
			}
		}
		mine, newest, err := checkMutation(rw, m, startTS)
		if err != nil {
			return err
		}
		if mine {
			continue
		}
		rec := m.Rec
		if rec != nil {
			// The lock keeps writers off the key until it is resolved, so
			// the newest version now is the committed version's parent.
			c := *rec
			c.Parent = 0
			if newest != nil {
				c.Parent = newest.Version
			}
			rec = &c
		}
		l := &Lock{StartTS: startTS, Primary: primary, Expires: expires, Kind: m.Kind, Retention: m.Retention, Rec: rec}
		writes = append(writes, pending{keys.Lock(m.Obj), l.Marshal()})
	}
	for _, w := range writes {
		if err := rw.Set(w.key, w.value); err != nil {
			return err
		}
	}
	return nil
}

// checkMutation checks one key of a prewrite or one-phase commit: mine
// reports that the transaction already holds its lock; newest is the
// key's newest version (nil: none).
func checkMutation(r Reader, m *Mutation, startTS uint64) (mine bool, newest *Record, err error) {
	if m.Kind != LockWrite && m.Kind != LockRead {
		return false, nil, fmt.Errorf("%w: mutation kind %d", ErrBadTxn, m.Kind)
	}
	if (m.Kind == LockWrite) != (m.Rec != nil) {
		return false, nil, fmt.Errorf("%w: %v of object %x with record %v", ErrBadTxn, m.Kind, m.Obj, m.Rec != nil)
	}
	if err := m.Retention.Validate(); err != nil {
		return false, nil, err
	}
	l, err := GetLock(r, m.Obj)
	if err != nil {
		return false, nil, err
	}
	if l != nil {
		if l.StartTS == startTS {
			return true, nil, nil
		}
		return false, nil, &LockedError{Obj: m.Obj, Lock: l}
	}
	newest, err = latestHead(r, m.Obj)
	if err != nil {
		return false, nil, err
	}
	if newest != nil && newest.Version > startTS {
		return false, nil, &ConflictError{Obj: m.Obj, Version: newest.Version}
	}
	if m.HasExpect {
		live := uint64(0)
		if newest != nil && !newest.DeleteMarker {
			live = newest.Version
		}
		if live != m.Expect {
			return false, nil, fmt.Errorf("%w: object %x", ErrPrecondition, m.Obj)
		}
	}
	return false, newest, nil
}

// latestHead is Latest, nil for none, decoding the record without its
// content (the checks need its version and whether it is a delete marker).
func latestHead(r Reader, obj []byte) (_ *Record, err error) {
	v, err := newVersionIter(r, obj)
	if err != nil {
		return nil, err
	}
	defer v.close(&err)
	if !v.seek(^uint64(0)) {
		return nil, v.done(nil)
	}
	ts, err := v.ts()
	if err != nil {
		return nil, err
	}
	rec := &Record{}
	if err := decodeListed(rec, v.it.Value(), ts, obj); err != nil {
		return nil, err
	}
	return rec, nil
}

// Commit resolves obj's lock of the transaction that started at startTS
// as committed at commitTS: a write lock becomes version commitTS (under
// the lock's retention, now = commitTS), a read lock goes. With record,
// obj is the primary of a transaction with locks in other ranges, and the
// transaction's record keeps its outcome for their readers until
// ClearTxn. It returns the version written (nil for a read lock) and the
// versions retention pruned.
//
// A commit already applied returns its version again. A lock that is gone
// without a commit (rolled back) is ErrTxnAborted.
func Commit(rw ReadWriter, obj []byte, startTS, commitTS uint64, record bool) (*Record, []*Record, error) {
	if commitTS <= startTS {
		return nil, nil, fmt.Errorf("%w: commit timestamp %d is not after the start %d", ErrBadTxn, commitTS, startTS)
	}
	l, err := GetLock(rw, obj)
	if err != nil {
		return nil, nil, err
	}
	if l == nil || l.StartTS != startTS {
		// Applied before (a retry), or rolled back.
		rec, err := committedVersion(rw, obj, startTS)
		if err != nil {
			return nil, nil, err
		}
		if rec != nil {
			return rec, nil, nil
		}
		if st, ok, err := txnRecord(rw, obj, startTS); err != nil || ok && st.State == TxnCommitted {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: object %x holds no lock of the transaction started at %d", ErrTxnAborted, obj, startTS)
	}
	var rec *Record
	var pruned []*Record
	if l.Kind == LockWrite {
		rec = l.Rec
		rec.Version, rec.StartTS = commitTS, startTS
		// The lock kept every other writer off the key since the prewrite
		// checked for newer versions: commitTS is the newest, and the
		// parent the prewrite recorded is still the one before it.
		if l.Retention.Mode == KeepAll {
			err = writeVersion(rw, obj, nil, rec)
		} else {
			pruned, err = PutNewest(rw, obj, rec, l.Retention, commitTS)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if err := rw.Delete(keys.Lock(obj)); err != nil {
		return nil, nil, err
	}
	if record {
		if err := setTxnRecord(rw, obj, startTS, TxnStatus{State: TxnCommitted, CommitTS: commitTS}); err != nil {
			return nil, nil, err
		}
	}
	return rec, pruned, nil
}

// Rollback removes obj's lock of the transaction that started at startTS.
// With primary, obj is the transaction's primary and a record that it
// rolled back is written, even if the lock never arrived, so that a late
// prewrite of the primary fails. A transaction that committed is not
// touched: the status says so.
func Rollback(rw ReadWriter, obj []byte, startTS uint64, primary bool) (TxnStatus, error) {
	if st, ok, err := txnRecord(rw, obj, startTS); err != nil || ok {
		return st, err
	}
	rec, err := committedVersion(rw, obj, startTS)
	if err != nil {
		return TxnStatus{}, err
	}
	if rec != nil {
		return TxnStatus{State: TxnCommitted, CommitTS: rec.Version}, nil
	}
	l, err := GetLock(rw, obj)
	if err != nil {
		return TxnStatus{}, err
	}
	if l != nil && l.StartTS == startTS {
		if err := rw.Delete(keys.Lock(obj)); err != nil {
			return TxnStatus{}, err
		}
	}
	st := TxnStatus{State: TxnRolledBack}
	if primary {
		if err := setTxnRecord(rw, obj, startTS, st); err != nil {
			return TxnStatus{}, err
		}
	}
	return st, nil
}

// CheckPolicy says what CheckTxn may do to a transaction it finds stuck.
type CheckPolicy struct {
	// Now is the checker's clock (Unix ms), compared with lock expiry.
	Now int64
	// RollbackExpired rolls back a transaction whose primary lock expired.
	RollbackExpired bool
	// RollbackMissing rolls back a transaction the primary has no trace
	// of (the caller saw one of its secondary locks expire).
	RollbackMissing bool
}

// CheckTxn returns the state of the transaction that started at startTS
// with its primary lock on primary, rolling it back as p allows.
func CheckTxn(rw ReadWriter, primary []byte, startTS uint64, p CheckPolicy) (TxnStatus, error) {
	if st, ok, err := txnRecord(rw, primary, startTS); err != nil || ok {
		return st, err
	}
	l, err := GetLock(rw, primary)
	if err != nil {
		return TxnStatus{}, err
	}
	if l != nil && l.StartTS == startTS {
		if p.RollbackExpired && p.Now >= l.Expires {
			return Rollback(rw, primary, startTS, true)
		}
		return TxnStatus{State: TxnPending, Expires: l.Expires}, nil
	}
	rec, err := committedVersion(rw, primary, startTS)
	if err != nil {
		return TxnStatus{}, err
	}
	if rec != nil {
		return TxnStatus{State: TxnCommitted, CommitTS: rec.Version}, nil
	}
	if p.RollbackMissing {
		return Rollback(rw, primary, startTS, true)
	}
	return TxnStatus{State: TxnMissing}, nil
}

// Heartbeat extends the expiry of the transaction's primary lock to
// expires (never shortening it) and returns the transaction's status: a
// coordinator whose transaction was rolled back learns it here.
func Heartbeat(rw ReadWriter, primary []byte, startTS uint64, expires int64) (TxnStatus, error) {
	l, err := GetLock(rw, primary)
	if err != nil {
		return TxnStatus{}, err
	}
	if l == nil || l.StartTS != startTS {
		return CheckTxn(rw, primary, startTS, CheckPolicy{})
	}
	if expires > l.Expires {
		l.Expires = expires
		if err := rw.Set(keys.Lock(primary), l.Marshal()); err != nil {
			return TxnStatus{}, err
		}
	}
	return TxnStatus{State: TxnPending, Expires: l.Expires}, nil
}

// ClearTxn removes the transaction's record from its primary once no lock
// of it remains anywhere.
func ClearTxn(rw ReadWriter, primary []byte, startTS uint64) error {
	return rw.Delete(keys.TxnRecord(primary, startTS))
}

// CommitOnePhase commits a transaction whose keys all live in one range in
// one step: the checks of Prewrite (any lock on a key is a *LockedError),
// then every write at commitTS. It returns the versions written, in the
// order of muts (nil for reads), and those retention pruned.
func CommitOnePhase(rw ReadWriter, startTS, commitTS uint64, muts []Mutation) (recs, pruned []*Record, err error) {
	if startTS == 0 || commitTS < startTS {
		return nil, nil, fmt.Errorf("%w: start %d, commit %d", ErrBadTxn, startTS, commitTS)
	}
	newest := make([]*Record, len(muts))
	for i := range muts {
		mine, n, err := checkMutation(rw, &muts[i], startTS)
		if err != nil {
			return nil, nil, err
		}
		if mine {
			return nil, nil, fmt.Errorf("%w: object %x is locked by the transaction itself", ErrBadTxn, muts[i].Obj)
		}
		newest[i] = n
	}
	recs = make([]*Record, len(muts))
	for i := range muts {
		m := &muts[i]
		if m.Kind != LockWrite {
			continue
		}
		rec := m.Rec
		rec.Version, rec.StartTS = commitTS, startTS
		var p []*Record
		var err error
		if m.Retention.Mode == KeepAll {
			// The check read the newest version: nothing more to read.
			rec.Parent = 0
			if newest[i] != nil {
				rec.Parent = newest[i].Version
			}
			err = writeVersion(rw, m.Obj, nil, rec)
		} else {
			p, err = PutNewest(rw, m.Obj, rec, m.Retention, commitTS)
		}
		if err != nil {
			return nil, nil, err
		}
		recs[i] = rec
		pruned = append(pruned, p...)
	}
	return recs, pruned, nil
}

// committedVersion returns obj's version written by the transaction that
// started at startTS, or nil: it is newer than startTS, and versions are
// newest first, so the search stops at the first version not after it.
func committedVersion(r Reader, obj []byte, startTS uint64) (_ *Record, err error) {
	v, err := newVersionIter(r, obj)
	if err != nil {
		return nil, err
	}
	defer v.close(&err)
	for ok := v.seek(^uint64(0)); ok; ok = v.it.Next() {
		ts, err := v.ts()
		if err != nil {
			return nil, err
		}
		if ts <= startTS {
			break
		}
		rec, err := v.record()
		if err != nil {
			return nil, err
		}
		if rec.StartTS == startTS {
			return rec, nil
		}
	}
	return nil, v.done(nil)
}

// getValue returns a copy of the value at key, or nil if there is none.
func getValue(r Reader, key []byte) (_ []byte, err error) {
	if pr, ok := r.(PointReader); ok {
		v, found, err := pr.Get(key)
		if err != nil || !found {
			return nil, err
		}
		if v == nil {
			v = []byte{}
		}
		return v, nil
	}
	it, err := r.NewIter(key, append(slices.Clip(key), 0))
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	if !it.SeekGE(key) {
		return nil, it.Error()
	}
	return slices.Clone(it.Value()), nil
}

func txnRecord(r Reader, primary []byte, startTS uint64) (TxnStatus, bool, error) {
	v, err := getValue(r, keys.TxnRecord(primary, startTS))
	if err != nil || v == nil {
		return TxnStatus{}, false, err
	}
	st, err := unmarshalTxnRecord(v)
	if err != nil {
		return TxnStatus{}, false, fmt.Errorf("transaction record of object %x, start %d: %w", primary, startTS, err)
	}
	return st, true, nil
}

func setTxnRecord(w Writer, primary []byte, startTS uint64, st TxnStatus) error {
	return w.Set(keys.TxnRecord(primary, startTS), marshalTxnRecord(st))
}

// Lock and transaction record encodings, format version 1 (see doc.go).
const (
	lockMagic1      = 0x4C // 'L'
	txnRecordMagic1 = 0x58 // 'X'
	lockFormat1     = 1
)

// Marshal encodes l.
func (l *Lock) Marshal() []byte {
	var rec []byte
	if l.Rec != nil {
		rec = l.Rec.Marshal()
	}
	b := make([]byte, 0, headerLen+1+4*binary.MaxVarintLen64+len(l.Primary)+len(rec)+12+trailerLen)
	b = append(b, recordMagic0, lockMagic1, lockFormat1, byte(l.Kind))
	b = binary.AppendUvarint(b, l.StartTS)
	b = binary.AppendVarint(b, l.Expires)
	b = appendBytes(b, l.Primary)
	b = append(b, byte(l.Retention.Mode))
	b = binary.AppendUvarint(b, uint64(l.Retention.KeepLast))
	b = binary.AppendUvarint(b, uint64(l.Retention.KeepFor))
	b = appendBytes(b, rec)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// UnmarshalLock decodes a lock written by Marshal; any damage is
// ErrCorrupt.
func UnmarshalLock(b []byte) (*Lock, error) {
	body, err := checkFramed(b, lockMagic1, "lock")
	if err != nil {
		return nil, err
	}
	d := newDecoder(body)
	l := &Lock{Kind: LockKind(d.byte())}
	l.StartTS = d.uvarint()
	l.Expires = d.varint()
	l.Primary = d.clonedBytes()
	l.Retention.Mode = RetentionMode(d.byte())
	l.Retention.KeepLast = int(d.uvarint())
	l.Retention.KeepFor = time.Duration(d.uvarint())
	rec := d.bytes(d.length())
	if err := d.Done(); err != nil {
		return nil, err
	}
	switch {
	case l.Kind != LockWrite && l.Kind != LockRead:
		return nil, fmt.Errorf("%w: lock of kind %d", ErrCorrupt, l.Kind)
	case l.Kind == LockWrite && len(rec) == 0, l.Kind == LockRead && len(rec) != 0:
		return nil, fmt.Errorf("%w: %v lock with %d record bytes", ErrCorrupt, l.Kind, len(rec))
	case len(l.Primary) == 0 || l.StartTS == 0:
		return nil, fmt.Errorf("%w: lock without its transaction", ErrCorrupt)
	}
	if len(rec) > 0 {
		if l.Rec, err = Unmarshal(rec); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func marshalTxnRecord(st TxnStatus) []byte {
	b := []byte{recordMagic0, txnRecordMagic1, lockFormat1, byte(st.State)}
	b = binary.AppendUvarint(b, st.CommitTS)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func unmarshalTxnRecord(b []byte) (TxnStatus, error) {
	body, err := checkFramed(b, txnRecordMagic1, "transaction record")
	if err != nil {
		return TxnStatus{}, err
	}
	d := newDecoder(body)
	st := TxnStatus{State: TxnState(d.byte()), CommitTS: d.uvarint()}
	if err := d.Done(); err != nil {
		return TxnStatus{}, err
	}
	if st.State != TxnCommitted && st.State != TxnRolledBack || (st.State == TxnCommitted) != (st.CommitTS != 0) {
		return TxnStatus{}, fmt.Errorf("%w: transaction record %v at %d", ErrCorrupt, st.State, st.CommitTS)
	}
	return st, nil
}

// checkFramed checks magic, format and checksum and returns the body
// between them.
func checkFramed(b []byte, magic1 byte, what string) ([]byte, error) {
	if len(b) < headerLen+trailerLen {
		return nil, fmt.Errorf("%w: %s of %d bytes is too short", ErrCorrupt, what, len(b))
	}
	if b[0] != recordMagic0 || b[1] != magic1 {
		return nil, fmt.Errorf("%w: bad %s magic %#x %#x", ErrCorrupt, what, b[0], b[1])
	}
	if b[2] != lockFormat1 {
		return nil, fmt.Errorf("%w: unknown %s format version %d", ErrCorrupt, what, b[2])
	}
	body, sum := b[:len(b)-trailerLen], binary.BigEndian.Uint32(b[len(b)-trailerLen:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("%w: %s checksum %08x, want %08x", ErrCorrupt, what, got, sum)
	}
	return body[headerLen:], nil
}
