package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/raft/v3"

	"github.com/cairn-db/cairn/internal/testenv"
)

// freePeerURL returns an http URL on a loopback port that was free a moment
// ago, so the tests can run beside a server on the default ports: one
// below the kernel's ephemeral range and reserved against other test
// processes (testenv.FreePort), since a member restarted on it must find
// it again.
func freePeerURL(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testLogWriter{t}, nil))
}

func openTestEtcd(t *testing.T, dir string, quota int64) *EtcdStore {
	t.Helper()
	s, err := OpenEtcd(EtcdOptions{Dir: dir, PeerURL: freePeerURL(t), QuotaBytes: quota, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("OpenEtcd: %v", err)
	}
	return s
}

// TestEtcdStore runs the Store contract, the catalog and the oracle on a real
// embedded etcd, then reopens the same directory: data and the oracle's
// high-water mark survive, and timestamps keep increasing although the
// oracle's clock was moved an hour back.
func TestEtcdStore(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openTestEtcd(t, dir, 0)
	testStoreContract(t, s, "/cairn/test/")
	testCatalog(t, s)

	or := NewOracle(s, OracleOptions{Logger: testLogger(t), Window: 50 * time.Millisecond})
	if err := or.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 200 {
		ts, err := or.NextN(ctx, 1+i%4)
		if err != nil {
			t.Fatal(err)
		}
		if ts <= last {
			t.Fatalf("%s after %s", fmtTS(ts), fmtTS(last))
		}
		last = ts + uint64(i%4)
	}
	// The lease vanishes (as when etcd expires it): the leadership ends and
	// the oracle refuses; a new Start re-campaigns and serves above H.
	lead := or.term.(*etcdLeadership)
	if _, err := s.Client().Revoke(ctx, lead.lease); err != nil {
		t.Fatal(err)
	}
	<-lead.Done()
	if _, err := or.Next(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Next after the lease was revoked: %v, want ErrNotLeader", err)
	}
	if err := or.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if ts, err := or.Next(ctx); err != nil || ts <= last {
		t.Fatalf("Next after re-campaign: %s, %v; want above %s", fmtTS(ts), err, fmtTS(last))
	}
	high := storedHigh(t, s)
	if last >= high {
		t.Fatalf("handed out %s, not below the stored H %s", fmtTS(last), fmtTS(high))
	}
	term := or.term
	if err := or.Close(); err != nil {
		t.Fatal(err)
	}
	<-term.Done()
	if _, err := s.Get(ctx, leaderKey("tso")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("leader key after Close: %v", err)
	}
	// Keepalives push the lease deadline forward (etcd's shortest lease is
	// 2s here, renewed every 2s/3).
	ka, err := s.Campaign(ctx, "keepalive", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v0 := ka.ValidUntil()
	for i := 0; !ka.ValidUntil().After(v0); i++ {
		if i == 2000 {
			t.Fatal("lease deadline did not move in 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ka.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	spaces, _ := NewCatalog(s).ListSpaces(ctx)
	// A leadership still held at Close is resigned by the store.
	held, err := s.Campaign(ctx, "other", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-held.Done()
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s = openTestEtcd(t, dir, 0)
	defer s.Close()
	if h := storedHigh(t, s); h != high {
		t.Fatalf("high-water mark after reopen: %s, want %s", fmtTS(h), fmtTS(high))
	}
	again, err := NewCatalog(s).ListSpaces(ctx)
	if err != nil || fmt.Sprint(again) != fmt.Sprint(spaces) || len(again) == 0 {
		t.Fatalf("spaces after reopen = %v, %v; want %v", again, err, spaces)
	}
	if _, err := s.Get(ctx, leaderKey("other")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("leader key of a leadership resigned at Close: %v", err)
	}
	back := func() time.Time { return time.Now().Add(-time.Hour) }
	or = NewOracle(s, OracleOptions{Clock: back, Logger: testLogger(t)})
	if err := or.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer or.Close()
	ts, err := or.Next(ctx)
	if err != nil || ts < high {
		t.Fatalf("first timestamp after reopen with the clock an hour back: %s, %v; want >= %s", fmtTS(ts), err, fmtTS(high))
	}
	if h := storedHigh(t, s); h <= ts {
		t.Fatalf("window not persisted before use: H %s, served %s", fmtTS(h), fmtTS(ts))
	}
}

// TestEtcdQuota fills a tiny backend quota: writes fail with ErrQuota, reads
// still work.
func TestEtcdQuota(t *testing.T) {
	s := openTestEtcd(t, t.TempDir(), 1<<20)
	defer s.Close()
	ctx := context.Background()
	val := bytes.Repeat([]byte("x"), 64<<10)
	var err error
	i := 0
	for ; i < 2000 && err == nil; i++ {
		_, err = s.Put(ctx, fmt.Sprintf("/cairn/fill/%03d", i), val, AnyRev)
	}
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("filling the quota ended with %v after %d writes, want ErrQuota", err, i)
	}
	t.Logf("quota hit after %d writes: %v", i, err)
	if _, err := s.Put(ctx, "/cairn/small", []byte("1"), 0); !errors.Is(err, ErrQuota) {
		t.Fatalf("conditional Put under the alarm: %v, want ErrQuota", err)
	}
	if _, err := s.Get(ctx, "/cairn/fill/000"); err != nil {
		t.Fatalf("Get under the alarm: %v", err)
	}
}

// TestDialEtcd runs the Store contract, the catalog and an oracle through a
// client of a member that runs elsewhere (here: another EtcdStore in the
// process, reached over its TCP client URL), as a node without its own
// voting member does.
func TestDialEtcd(t *testing.T) {
	clientURL := freePeerURL(t)
	member, err := OpenEtcd(EtcdOptions{Dir: t.TempDir(), PeerURL: freePeerURL(t), ClientURL: clientURL, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	remote, err := DialEtcd(DialOptions{Endpoints: []string{clientURL}, Name: "node-2", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	testStoreContract(t, remote, "/cairn/remote-test/")
	testCatalog(t, remote)

	// The member's oracle leads; the remote one campaigns once it resigns.
	ctx := context.Background()
	lead := NewOracle(member, OracleOptions{Logger: testLogger(t), Window: 50 * time.Millisecond})
	if err := lead.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ts1, err := lead.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lead.Close()
	follower := NewOracle(remote, OracleOptions{Logger: testLogger(t), Window: 50 * time.Millisecond})
	defer follower.Close()
	if err := follower.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ts2, err := follower.Next(ctx)
	if err != nil || ts2 <= ts1 {
		t.Fatalf("timestamp from the remote oracle %d (%v), after %d", ts2, err, ts1)
	}

	if _, err := DialEtcd(DialOptions{Endpoints: []string{freePeerURL(t)}, Name: "x", DialTimeout: 300 * time.Millisecond, Logger: testLogger(t)}); err == nil {
		t.Fatal("dialing a meta service that is not there succeeded")
	}
}

// TestMembershipGrows adds a second member as a learner, starts it with the
// initial cluster the first one reports, promotes it once it has caught up,
// and reads through it what was written through the first.
func TestMembershipGrows(t *testing.T) {
	ctx := context.Background()
	aClient := freePeerURL(t)
	a, err := OpenEtcd(EtcdOptions{Dir: t.TempDir(), Name: "node-1", PeerURL: freePeerURL(t), ClientURL: aClient, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Put(ctx, "/cairn/test/k", []byte("v"), AnyRev); err != nil {
		t.Fatal(err)
	}
	bPeer, bClient := freePeerURL(t), freePeerURL(t)
	id, members, err := a.AddLearner(ctx, bPeer)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 || TargetVoters(2) != 1 || len(VoterEndpoints(members)) != 1 {
		t.Fatalf("members after adding a learner: %+v", members)
	}
	b, err := OpenEtcd(EtcdOptions{Dir: t.TempDir(), Name: "node-2", PeerURL: bPeer, ClientURL: bClient,
		InitialCluster: InitialCluster(members, "node-2"), Join: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := a.Promote(ctx, id)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("promote: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	members, err = a.Members(ctx)
	if err != nil || len(members) != 2 || members[0].Learner || members[1].Learner {
		t.Fatalf("members after promotion: %+v, %v", members, err)
	}
	// The new member serves clients once it has applied its own
	// promotion, which the leader (a) committed first.
	for {
		remote, err := DialEtcd(DialOptions{Endpoints: []string{bClient}, Name: "node-3", Logger: testLogger(t)})
		if err == nil {
			kv, gerr := remote.Get(ctx, "/cairn/test/k")
			remote.Close()
			if gerr == nil && string(kv.Value) == "v" {
				return
			}
			err = fmt.Errorf("read %q: %v", kv.Value, gerr)
		}
		if !strings.Contains(err.Error(), "learner") || time.Now().After(deadline) {
			t.Fatalf("read through the new member: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLeaderChanging: the errors of a meta service between leaders are
// recognized (reads retry them), and others are not.
func TestLeaderChanging(t *testing.T) {
	for _, err := range []error{rpctypes.ErrGRPCLeaderChanged, rpctypes.ErrLeaderChanged, rpctypes.ErrGRPCNoLeader, rpctypes.ErrNoLeader} {
		if !leaderChanging(err) {
			t.Errorf("%v: not recognized", err)
		}
	}
	for _, err := range []error{rpctypes.ErrGRPCNoSpace, context.DeadlineExceeded, ErrNotFound} {
		if leaderChanging(err) {
			t.Errorf("%v: taken for a leader change", err)
		}
	}
}

// TestProposalDropped: a write dropped by the meta service's raft (as the
// etcd client reports it) is recognized, and is retried; others are not.
func TestProposalDropped(t *testing.T) {
	dropped := fmt.Errorf("rpc error: code = Unknown desc = %v", raft.ErrProposalDropped)
	if !proposalDropped(dropped) || proposalDropped(rpctypes.ErrLeaderChanged) || proposalDropped(nil) {
		t.Fatal("proposalDropped misclassifies")
	}
	s := &EtcdStore{}
	calls := 0
	err := s.unlessDropped(context.Background(), func() error {
		if calls++; calls < 3 {
			return dropped
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("retried %d times: %v", calls, err)
	}
	calls = 0
	err = s.unlessDropped(context.Background(), func() error { calls++; return rpctypes.ErrLeaderChanged })
	if !errors.Is(err, rpctypes.ErrLeaderChanged) || calls != 1 {
		t.Fatalf("a write whose outcome is unknown was retried (%d calls): %v", calls, err)
	}
}

// openEtcdCluster starts n members of one meta service, each joined as a
// learner and promoted, as nodes join a cluster. It returns the members and
// the options that reopen each (with its data).
func openEtcdCluster(t *testing.T, n int) ([]*EtcdStore, []EtcdOptions) {
	t.Helper()
	ctx := context.Background()
	opts := []EtcdOptions{{Dir: t.TempDir(), Name: "node-1", PeerURL: freePeerURL(t), ClientURL: freePeerURL(t), Logger: testLogger(t)}}
	first, err := OpenEtcd(opts[0])
	if err != nil {
		t.Fatal(err)
	}
	stores := []*EtcdStore{first}
	t.Cleanup(func() {
		for _, s := range stores {
			s.Close()
		}
	})
	for i := 2; i <= n; i++ {
		peer := freePeerURL(t)
		// The meta service refuses members until the last one is healthy.
		id, members, err := first.AddLearner(ctx, peer)
		for deadline := time.Now().Add(30 * time.Second); err != nil && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			id, members, err = first.AddLearner(ctx, peer)
		}
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("node-%d", i)
		o := EtcdOptions{Dir: t.TempDir(), Name: name, PeerURL: peer, ClientURL: freePeerURL(t),
			InitialCluster: InitialCluster(members, name), Join: true, Logger: testLogger(t)}
		s, err := OpenEtcd(o)
		if err != nil {
			t.Fatal(err)
		}
		stores, opts = append(stores, s), append(opts, o)
		deadline := time.Now().Add(30 * time.Second)
		for err := first.Promote(ctx, id); err != nil; err = first.Promote(ctx, id) {
			if time.Now().After(deadline) {
				t.Fatalf("promote %s: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return stores, opts
}

// TestLeadershipSurvivesMetaElection: a leadership held through a member
// that does not lead the meta service's raft outlives that raft leader's
// crash. Here the third member stops too, so no election can happen until
// it is back: the holder's keepalives fail past its deadline and the
// leadership is not valid (ValidUntil in the past), but it does not end.
// Once the two members elect a leader, the lease (which etcd's new leader
// extended) is kept alive again and the same leadership is valid again;
// nobody else could win it meanwhile.
func TestLeadershipSurvivesMetaElection(t *testing.T) {
	stores, opts := openEtcdCluster(t, 3)
	lead, hold, other := -1, -1, -1
	for i, s := range stores {
		switch {
		case s.LeadsRaft():
			lead = i
		case hold < 0:
			hold = i
		default:
			other = i
		}
	}
	if lead < 0 || hold < 0 || other < 0 {
		t.Fatal("no raft leader among the members")
	}
	ctx := context.Background()
	l, err := stores[hold].Campaign(ctx, "survivor", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Resign(ctx)
	stores[lead].etcd.Server.HardStop() // a crash: no leadership transfer
	stores[other].Close()
	killed := time.Now()
	for !time.Now().After(l.ValidUntil()) {
		if time.Since(killed) > 10*time.Second {
			t.Fatal("leadership still valid 10s after the meta service lost its quorum")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("not valid %v after the quorum was lost", time.Since(killed).Round(time.Millisecond))
	time.Sleep(time.Second)
	back, err := OpenEtcd(opts[other])
	if err != nil {
		t.Fatal(err)
	}
	stores[other] = back
	reopened := time.Now()
	for deadline := reopened.Add(15 * time.Second); !time.Now().Before(l.ValidUntil()); time.Sleep(20 * time.Millisecond) {
		select {
		case <-l.Done():
			t.Fatal("leadership ended while the meta service had no leader")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("leadership never valid again after the meta service elected a leader")
		}
	}
	t.Logf("valid again %v after the third member restarted", time.Since(reopened).Round(time.Millisecond))
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := back.Campaign(cctx, "survivor", time.Second); err == nil {
		t.Fatal("a second campaign won a leadership that is still held")
	}
	select {
	case <-l.Done():
		t.Fatal("leadership ended")
	default:
	}
}

// TestUnsettled: the errors after which a read may be retried and a write
// may or may not have applied are recognized, wrapped as the store returns
// them; others are not.
func TestUnsettled(t *testing.T) {
	for _, err := range []error{rpctypes.ErrGRPCTimeout, rpctypes.ErrTimeout, rpctypes.ErrLeaderChanged,
		fmt.Errorf("meta: put /cairn/counters/space: %w", rpctypes.ErrGRPCTimeout)} {
		if !unsettled(err) {
			t.Errorf("%v: not recognized", err)
		}
	}
	for _, err := range []error{nil, ErrConflict, rpctypes.ErrGRPCNoSpace, context.Canceled} {
		if unsettled(err) {
			t.Errorf("%v: taken for an unknown outcome", err)
		}
	}
}

// TestMembersDuringLeaderChange: listing the members (what a join does
// first) succeeds while the meta service's leadership moves back and
// forth: the list is a read, tried again while no leader answers.
func TestMembersDuringLeaderChange(t *testing.T) {
	stores, opts := openEtcdCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	var moves int // written by the mover, read once it is done
	go func() {
		defer close(done)
		for range 6 {
			for i, s := range stores {
				if !s.LeadsRaft() {
					continue
				}
				// A transfer to a member still catching up waits for it;
				// try another later.
				mctx, mcancel := context.WithTimeout(ctx, 2*time.Second)
				if err := s.MoveLeader(mctx, opts[(i+1)%len(stores)].Name); err == nil {
					moves++
				}
				mcancel()
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	lists := 0
	for {
		select {
		case <-done:
			if moves == 0 {
				t.Fatal("the leadership never moved")
			}
			t.Logf("%d member lists across %d leadership moves", lists, moves)
			return
		default:
		}
		for i, s := range stores {
			began := time.Now()
			ms, err := s.Members(ctx)
			if err != nil {
				var leads []bool
				for _, s := range stores {
					leads = append(leads, s.LeadsRaft())
				}
				t.Fatalf("member list on member %d during leadership moves (leaders %v, began %v ago): %v", i, leads, time.Since(began).Round(time.Millisecond), err)
			}
			if len(ms) != 3 {
				t.Fatalf("%d members, want 3", len(ms))
			}
			lists++
		}
	}
}
