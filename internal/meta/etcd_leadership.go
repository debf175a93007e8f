package meta

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaseMarginFraction of the TTL is subtracted from every lease deadline: it
// covers the etcd leader's clock running faster than ours while it times the
// lease out. Lease expiry in etcd is only ever late (it is refreshed on an
// etcd leader change and revoked through raft), never early.
const leaseMarginFraction = 10

// keepalivesPerTTL is how many keepalives a leadership sends per lease TTL.
// The deadline counts from the last answered one, so more of them leave
// more of the TTL to ride out a meta service election (1 to 2 s) without
// the leadership lapsing.
const keepalivesPerTTL = 6

// Campaign implements Store with a lease and a transaction: grant a lease,
// then create /cairn/leader/<name> attached to it if the key does not exist;
// otherwise wait for the key to be deleted (its holder resigned or its lease
// expired) and try again. A background goroutine keeps the lease alive and
// watches the key until the leadership ends.
func (s *EtcdStore) Campaign(ctx context.Context, name string, ttl time.Duration) (Leadership, error) {
	secs := int64(math.Ceil(ttl.Seconds()))
	if secs < 1 {
		secs = 1
	}
	key := leaderKey(name)
	for {
		s.mu.Lock()
		closed := s.mu.closed
		s.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		sent := time.Now()
		// A grant or a transaction the meta service's raft dropped (a
		// leadership transfer) never reached its log: send it again.
		var grant *clientv3.LeaseGrantResponse
		err := s.unlessDropped(ctx, func() (err error) {
			grant, err = s.client.Grant(ctx, secs)
			return err
		})
		if err != nil {
			return nil, s.mapErr("campaign "+name+": grant lease", err)
		}
		var resp *clientv3.TxnResponse
		err = s.unlessDropped(ctx, func() (err error) {
			resp, err = s.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, s.name, clientv3.WithLease(grant.ID))).
				Else(clientv3.OpGet(key)).
				Commit()
			return err
		})
		if err != nil {
			s.revoke(grant.ID)
			return nil, s.mapErr("campaign "+name, err)
		}
		if resp.Succeeded {
			l := &etcdLeadership{
				store:     s,
				name:      name,
				key:       key,
				lease:     grant.ID,
				createRev: resp.Header.Revision,
				done:      make(chan struct{}),
			}
			runCtx, cancel := context.WithCancel(context.Background())
			l.cancel = cancel
			l.setValidUntil(sent, grant.TTL)
			s.mu.Lock()
			if s.mu.closed {
				s.mu.Unlock()
				cancel()
				s.revoke(grant.ID)
				return nil, ErrClosed
			}
			s.mu.leaders[l] = struct{}{}
			s.mu.Unlock()
			l.wg.Add(1)
			go l.run(runCtx, time.Duration(grant.TTL)*time.Second)
			return l, nil
		}
		s.revoke(grant.ID)
		// A key held under our own member name that no leadership of this
		// process owns was left by an earlier incarnation of this member
		// (killed before it could resign). Member names are unique and a
		// member's data directory is locked, so that holder is dead: take
		// its lease away now instead of waiting out the TTL. Timestamps stay
		// safe because a new term reloads the persisted high-water mark.
		if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) == 1 &&
			string(rr.Kvs[0].Value) == s.name && !s.holds(name) {
			s.revoke(clientv3.LeaseID(rr.Kvs[0].Lease))
			continue
		}
		// Someone else holds it: wait for the key to go.
		if err := s.waitDeleted(ctx, key, resp.Header.Revision); err != nil {
			return nil, err
		}
	}
}

// holds reports whether a leadership of this store currently holds name.
func (s *EtcdStore) holds(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.mu.leaders {
		if l.name == name {
			return true
		}
	}
	return false
}

// waitDeleted returns once key does not exist at a revision after rev.
func (s *EtcdStore) waitDeleted(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for ev := range s.client.Watch(wctx, key, clientv3.WithRev(rev+1)) {
		if err := ev.Err(); err != nil {
			return s.mapErr("campaign: watch "+key, err)
		}
		for _, e := range ev.Events {
			if e.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil // the watch ended (store closing): the caller re-checks
}

func (s *EtcdStore) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.client.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.log.Debug("meta: revoke lease", "lease", id, "err", err)
	}
}

type etcdLeadership struct {
	store     *EtcdStore
	name, key string
	lease     clientv3.LeaseID
	createRev int64

	validUntil atomic.Pointer[time.Time]
	done       chan struct{}      // closed by run when it exits
	cancel     context.CancelFunc // stops run; called by Resign
	wg         sync.WaitGroup
	resignOnce sync.Once
	resignErr  error
	stalled    bool // keepalives failing past the deadline; only run uses it
}

func (l *etcdLeadership) Done() <-chan struct{} { return l.done }

func (l *etcdLeadership) ValidUntil() time.Time {
	select {
	case <-l.done:
		return time.Time{}
	default:
	}
	return *l.validUntil.Load()
}

// setValidUntil records a lease deadline measured from sent, the local time
// the grant or keepalive request was sent (time.Now keeps a monotonic reading,
// so wall-clock steps do not move the deadline).
func (l *etcdLeadership) setValidUntil(sent time.Time, ttlSecs int64) {
	ttl := time.Duration(ttlSecs) * time.Second
	v := sent.Add(ttl - ttl/leaseMarginFraction)
	l.validUntil.Store(&v)
}

// run keeps the lease alive every ttl/keepalivesPerTTL and watches the
// leader key; it ends (closing done) on Resign, on a lost lease, or when the
// key goes away.
func (l *etcdLeadership) run(ctx context.Context, ttl time.Duration) {
	defer l.wg.Done()
	defer close(l.done)
	s := l.store
	watch := s.client.Watch(ctx, l.key, clientv3.WithRev(l.createRev+1))
	interval := ttl / keepalivesPerTTL
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-watch:
			if !ok || ev.Err() != nil {
				if ctx.Err() != nil {
					return
				}
				// The watch broke (compaction, cancel): check the key directly
				// and watch again from now.
				resp, err := s.client.Get(ctx, l.key)
				if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.createRev {
					s.log.Warn("meta: leadership lost: leader key changed", "leadership", l.name)
					return
				}
				watch = s.client.Watch(ctx, l.key, clientv3.WithRev(resp.Header.Revision+1))
				continue
			}
			for _, e := range ev.Events {
				if e.Type == mvccpb.DELETE || e.Kv.CreateRevision != l.createRev {
					s.log.Warn("meta: leadership lost: leader key removed", "leadership", l.name)
					return
				}
			}
		case <-timer.C:
			sent := time.Now()
			kctx, kcancel := context.WithTimeout(ctx, interval)
			resp, err := s.client.KeepAliveOnce(kctx, l.lease)
			kcancel()
			switch {
			case err == nil:
				l.setValidUntil(sent, resp.TTL)
				if l.stalled {
					l.stalled = false
					s.log.Info("meta: leadership resumed: keepalive answered", "leadership", l.name)
				}
				timer.Reset(interval)
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				s.log.Warn("meta: leadership lost: lease expired", "leadership", l.name)
				return
			case ctx.Err() != nil:
				return
			default:
				// The meta service may be between leaders (etcd's new
				// leader extends every lease, so ours survives an
				// election). Past the local deadline the leadership is not
				// valid (ValidUntil says so and holders stop serving) but
				// not lost either: a later keepalive that succeeds proves
				// the lease, and with it the key, still ours. Only
				// ErrLeaseNotFound or the key's removal end it.
				if !time.Now().Before(*l.validUntil.Load()) && !l.stalled {
					l.stalled = true
					s.log.Warn("meta: leadership suspended: keepalive failing past the lease", "leadership", l.name, "err", err)
				}
				timer.Reset(interval / 4)
			}
		}
	}
}

// Resign stops the keepalive, deletes the leader key if it is still ours and
// revokes the lease. Idempotent.
func (l *etcdLeadership) Resign(ctx context.Context) error {
	l.resignOnce.Do(func() {
		l.cancel()
		l.wg.Wait()
		s := l.store
		_, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.createRev)).
			Then(clientv3.OpDelete(l.key)).
			Commit()
		if err != nil {
			l.resignErr = s.mapErr("resign "+l.name, err)
		}
		if _, err := s.client.Revoke(ctx, l.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) && l.resignErr == nil {
			l.resignErr = fmt.Errorf("meta: resign %s: revoke lease: %w", l.name, err)
		}
		s.mu.Lock()
		delete(s.mu.leaders, l)
		s.mu.Unlock()
	})
	return l.resignErr
}
