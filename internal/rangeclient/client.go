package rangeclient

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/kv"
	"github.com/cairn-db/cairn/internal/mvcc"
	"github.com/cairn-db/cairn/internal/replica"
	"github.com/cairn-db/cairn/internal/transport"
)

// Service is the peer service the serving half answers.
const Service = "cairn.Range"

// CallTimeout bounds one call to a peer; Patience bounds the search for a
// leaseholder while leadership moves, and the retries of a request whose
// key moved to another range.
const (
	CallTimeout = 10 * time.Second
	Patience    = 10 * time.Second
)

// Config configures a Client. Every field is required unless it says.
type Config struct {
	// Self is this node's id.
	Self uint64
	// Replicas are the local replicas.
	Replicas *replica.Store
	// DB is the state the local replicas apply to.
	DB pebble.Reader
	// Cache holds the latest version record of hot keys (nil: none).
	Cache *kv.Cache
	// Call calls method of Service on node, bounded by timeout. An
	// error that wraps transport.ErrNotSent says the request never left.
	Call func(ctx context.Context, node uint64, method string, req []byte, timeout time.Duration) ([]byte, error)
	// Entry returns the table entry of range id, whose local replica is
	// rep, for a request from a peer (a fresh entry if no table lists it).
	Entry func(id uint64, rep *replica.Replica) *Range
	// Stale asks the owner of the tables to read them again now: a
	// request found the key's range gone from where its table said.
	Stale func()
	// Forwarded, if set, is told of each request passed to another node.
	Forwarded func(ctx context.Context)
	// Codes carries the failures of handlers registered with Method that
	// this package does not class (nil: they cross as internal).
	Codes Codes
	// Timestamps returns a fresh timestamp from the oracle, for the
	// leaseholder's timestamp guard (guard.go). Nil disables the guard
	// (tests of one writer).
	Timestamps func(ctx context.Context) (uint64, error)
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Metrics, each optional.
	Metrics Metrics
}

// Metrics are the counters the client keeps.
type Metrics struct {
	Forwards    prometheus.Counter // range operations passed to the leaseholder
	CacheHits   prometheus.Counter // reads of the latest version the cache answered
	CacheMisses prometheus.Counter
	Corrupt     prometheus.Counter // records that failed their checksum
}

// Client routes range operations to leaseholders and serves those of
// other nodes.
type Client struct {
	cfg    Config
	guards sync.Map // range id -> *tsGuard
}

// New returns a client.
func New(cfg Config) *Client {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	for _, c := range []*prometheus.Counter{&cfg.Metrics.Forwards, &cfg.Metrics.CacheHits, &cfg.Metrics.CacheMisses, &cfg.Metrics.Corrupt} {
		if *c == nil {
			*c = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
		}
	}
	return &Client{cfg: cfg}
}

// errLeaseHere is returned by forward when, while it looked for the
// leaseholder elsewhere, the local replica took the lease: the caller
// serves the request here.
var errLeaseHere = errors.New("the lease moved to this node")

// forward runs method for range r on its leaseholder elsewhere. It returns
// errLeaseHere if the local replica takes the lease meanwhile.
func (c *Client) forward(ctx context.Context, r *Range, method string, req []byte) ([]byte, error) {
	if c.cfg.Forwarded != nil {
		c.cfg.Forwarded(ctx)
	}
	c.cfg.Metrics.Forwards.Inc()
	msg := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(req)), r.Desc().ID)
	msg = append(msg, req...)
	deadline := c.cfg.Clock().Add(Patience)
	var last error
	for round := 0; ; round++ {
		if r.Gone() {
			return nil, errMoved(r.Desc().ID) // merged away: route again
		}
		if rep := r.Replica(); round > 0 && rep != nil && rep.Status().IsLeader {
			// The others name this node: a new leader whose lease is
			// not valid yet (or a split's new range). Wait for it here.
			if rep.AwaitRead(ctx) == nil {
				return nil, errLeaseHere
			}
			if c.cfg.Clock().After(deadline) {
				return nil, errorf(CodeUnavailable, "range %d: this node leads it but has no lease yet", r.Desc().ID)
			}
			if err := clock.Sleep(ctx, 20*time.Millisecond); err != nil {
				return nil, err
			}
			continue
		}
		tried := map[uint64]bool{c.cfg.Self: true}
		queue := []uint64{}
		// The local replica's raft knows the current leader best (a
		// frozen old leader stays the hint until a call to it fails).
		if rep := r.Replica(); rep != nil {
			if lead := rep.Status().Leader; lead != 0 {
				queue = append(queue, lead)
			}
		}
		if h := r.hint.Load(); h != 0 {
			queue = append(queue, h)
		}
		queue = append(queue, r.Desc().Replicas...)
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			if tried[id] {
				continue
			}
			tried[id] = true
			b, err := c.cfg.Call(ctx, id, method, msg, CallTimeout)
			if err != nil {
				// Even when our caller gave up first: a frozen node would
				// otherwise stay the first one tried by every request.
				r.hint.CompareAndSwap(id, 0)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if method == "Propose" && !errors.Is(err, transport.ErrNotSent) {
					// The command may have reached the leaseholder and
					// applied: do not send it again, and do not claim it
					// had no effect.
					return nil, errorf(CodeOutcomeUnknown, "range %d: node %d: %v", r.Desc().ID, id, err)
				}
				last = fmt.Errorf("node %d: %w", id, err)
				continue
			}
			payload, lead, err := c.DecodeReply(b)
			if errors.Is(err, ErrNotLeader) {
				last = err
				if lead != 0 && !tried[lead] {
					queue = append([]uint64{lead}, queue...)
				}
				continue
			}
			r.hint.Store(id)
			return payload, err
		}
		if c.cfg.Clock().After(deadline) {
			return nil, errorf(CodeUnavailable, "range %d: no replica of %v holds its lease: %v", r.Desc().ID, r.Desc().Replicas, last)
		}
		// Leadership is moving: wait a little and ask again.
		if err := clock.Sleep(ctx, time.Duration(min(round+1, 10))*50*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// OnRange runs op on the range of t that holds obj, and again whenever the
// key turns out to have moved to another range (a split: op did nothing),
// until Patience runs out.
func (c *Client) OnRange(ctx context.Context, t *Table, obj []byte, op func(r *Range) error) error {
	var r *Range
	return c.RetryMoved(ctx, func() error {
		r = t.Route(obj)
		return op(r)
	}, func() bool { return t.Route(obj) == r })
}

// RetryMoved runs op again while it fails with ErrRangeMoved, until
// Patience runs out; when stale says the table has not caught up with the
// split yet, it asks for the table (Config.Stale) and waits a little
// first.
func (c *Client) RetryMoved(ctx context.Context, op func() error, stale func() bool) error {
	deadline := c.cfg.Clock().Add(Patience)
	for attempt := 0; ; attempt++ {
		err := op()
		if !errors.Is(err, ErrRangeMoved) || c.cfg.Clock().After(deadline) {
			return err
		}
		if stale() {
			c.cfg.Stale()
			if err := clock.Sleep(ctx, time.Duration(min(attempt+1, 10))*20*time.Millisecond); err != nil {
				return err
			}
		}
	}
}

// Propose runs cmd, a command on object key obj, on the leaseholder of the
// range of t holding obj: here if this node leads it, else on the node
// that does.
func (c *Client) Propose(ctx context.Context, t *Table, obj, cmd []byte) (res *kv.Result, err error) {
	err = c.OnRange(ctx, t, obj, func(r *Range) error {
		res, err = c.proposeOn(ctx, r, obj, cmd)
		return err
	})
	return res, err
}

// proposeOn runs cmd on range r's leaseholder (here, or forwarded), on
// object key obj if known (nil: the command's own span is checked at
// apply).
func (c *Client) proposeOn(ctx context.Context, r *Range, obj, cmd []byte) (*kv.Result, error) {
	for {
		if rep := r.Replica(); rep != nil {
			res, err := c.proposeLocal(ctx, r, rep, obj, cmd)
			if !errors.Is(err, ErrNotLeader) {
				return res, err
			}
		}
		b, err := c.forward(ctx, r, "Propose", cmd)
		if errors.Is(err, errLeaseHere) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return decodeResult(b)
	}
}

// proposeLocal proposes cmd, on object key obj if known, to rep, the
// local replica of r.
func (c *Client) proposeLocal(ctx context.Context, r *Range, rep *replica.Replica, obj, cmd []byte) (*kv.Result, error) {
	id := r.Desc().ID
	if obj != nil && !rep.Contains(obj) {
		return nil, errMoved(id)
	}
	var v any
	var err error
	if ts, ok := kv.Footprint(cmd); ok && c.cfg.Timestamps != nil {
		g := c.guard(id)
		if err := g.admit(ctx, rep.Status().Term, ts, c.cfg.Timestamps); err != nil {
			return nil, err
		}
		v, err = rep.ProposeTracked(ctx, cmd, func() { g.settle(ts) })
	} else {
		v, err = rep.Propose(ctx, cmd)
	}
	if err == nil && obj != nil {
		r.Load.Note(obj)
	}
	if err != nil {
		if errors.Is(err, replica.ErrNotLeader) || errors.Is(err, replica.ErrRangeNotFound) {
			// Not applied: raft never took it (or the replica is gone).
			return nil, errorf(CodeNotLeader, "range %d: %v", id, err)
		}
		if errors.Is(err, replica.ErrRangeFrozen) {
			return nil, errMoved(id) // not applied: the range is merging
		}
		return nil, err
	}
	switch v := v.(type) {
	case *kv.Result:
		return v, nil
	case error:
		if errors.Is(v, replica.ErrRangeFrozen) {
			return nil, errMoved(id)
		}
		return nil, applyErr(id, v)
	}
	return nil, fmt.Errorf("range %d: unexpected apply result %T", id, v)
}

// Read reads the selected version of obj (see readLocal) from the
// leaseholder of its range in t: here if this node holds the lease, else
// where it is.
func (c *Client) Read(ctx context.Context, t *Table, obj []byte, version, asOf uint64) (rec *mvcc.Record, err error) {
	err = c.OnRange(ctx, t, obj, func(r *Range) error {
		rec, err = c.readRange(ctx, r, obj, version, asOf)
		return err
	})
	return rec, err
}

func (c *Client) readRange(ctx context.Context, r *Range, obj []byte, version, asOf uint64) (*mvcc.Record, error) {
	if r.LeaseHere(ctx) {
		return c.readOwned(ctx, r, obj, version, asOf)
	}
	req := binary.BigEndian.AppendUint64(nil, version)
	req = binary.BigEndian.AppendUint64(req, asOf)
	req = append(req, obj...)
	b, err := c.forward(ctx, r, "Read", req)
	if errors.Is(err, errLeaseHere) {
		return c.readOwned(ctx, r, obj, version, asOf)
	}
	var rec *mvcc.Record
	if len(b) > 0 {
		d := NewDecoder(b)
		rec = d.Record()
		if d.Err() != nil {
			return nil, d.Err()
		}
	}
	return rec, err
}

// listFlags are a forwarded listing's options past its span.
func listFlags(o mvcc.ListOptions) byte {
	var f byte
	if o.AllVersions {
		f |= 1
	}
	if o.Markers {
		f |= 2
	}
	if o.Since != 0 {
		f |= 4 // the timestamp follows the version to resume after
	}
	if o.Snapshot {
		f |= 8
	}
	return f
}

// List lists r's part of a listing on its leaseholder.
func (c *Client) List(ctx context.Context, r *Range, o mvcc.ListOptions) ([]mvcc.Entry, bool, error) {
	if r.LeaseHere(ctx) {
		return c.listOwned(ctx, r, o)
	}
	req := binary.BigEndian.AppendUint64(nil, o.AsOf)
	req = binary.BigEndian.AppendUint32(req, uint32(max(o.Limit, 0)))
	req = AppendOptBytes(req, o.Lower)
	req = AppendOptBytes(req, o.Upper)
	req = AppendOptBytes(req, o.StartAfter)
	if listFlags(o) != 0 {
		req = binary.BigEndian.AppendUint64(append(req, listFlags(o)), o.AfterVersion)
		if o.Since != 0 {
			req = binary.BigEndian.AppendUint64(req, o.Since)
		}
	}
	b, err := c.forward(ctx, r, "List", req)
	if errors.Is(err, errLeaseHere) {
		return c.listOwned(ctx, r, o)
	}
	if err != nil {
		return nil, false, err
	}
	d := NewDecoder(b)
	more := d.U8() == 1
	ents := make([]mvcc.Entry, d.Count32(12))
	for i := range ents {
		ents[i].Obj = d.Bytes()
		ents[i].Rec = d.Record()
	}
	return ents, more, d.Done()
}

// Versions lists obj's versions before version before (0: from the
// latest), newest first, at most limit, on the leaseholder of its range in
// t; more says whether older ones remain.
func (c *Client) Versions(ctx context.Context, t *Table, obj []byte, before uint64, limit int) (recs []*mvcc.Record, more bool, err error) {
	err = c.OnRange(ctx, t, obj, func(r *Range) error {
		if r.LeaseHere(ctx) {
			recs, more, err = c.versionsOwned(r, obj, before, limit)
			return err
		}
		req := binary.BigEndian.AppendUint64(nil, before)
		req = binary.BigEndian.AppendUint32(req, uint32(limit))
		req = append(req, obj...)
		b, err := c.forward(ctx, r, "Versions", req)
		if errors.Is(err, errLeaseHere) {
			recs, more, err = c.versionsOwned(r, obj, before, limit)
			return err
		}
		if err != nil {
			return err
		}
		d := NewDecoder(b)
		more = d.U8() == 1
		recs = make([]*mvcc.Record, d.Count32(12))
		for i := range recs {
			recs[i] = d.Record()
		}
		return d.Done()
	})
	return recs, more, err
}
