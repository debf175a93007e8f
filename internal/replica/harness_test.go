package replica

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/internal/rangedesc"
	"github.com/cairn-db/cairn/internal/storage"
)

// harness drives Stores by hand, as etcd raft's interaction tests drive
// RawNodes: the script ticks loops, delivers or drops the messages they
// sent, and moves the clock; after each step every loop settles (nothing
// queued, no log write in flight, no Ready), so a script's output is a
// function of the script alone. The scripts are in testdata/harness.
type harness struct {
	t     *testing.T
	start time.Time
	nodes map[uint64]*hnode

	mu    sync.Mutex
	now   time.Time // the clock every Store reads
	sent  []Message // sent, not yet delivered or dropped
	props []*hprop  // proposals in the order the script made them
}

type hnode struct {
	id    uint64
	eng   *storage.Engine
	s     *Store
	ticks chan time.Time
}

// hprop is an operation on a replica running in the background (a
// proposal, a split, a merge step): they block until applied.
type hprop struct {
	node uint64
	what string
	done chan struct{}
	res  any
	err  error
}

func newHarness(t *testing.T) *harness {
	start := time.Unix(1_000_000, 0)
	h := &harness{t: t, start: start, now: start, nodes: map[uint64]*hnode{}}
	t.Cleanup(h.close)
	return h
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// Send implements Transport: messages wait for the script.
func (h *harness) Send(msgs []Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range msgs {
		h.sent = append(h.sent, Message{RangeID: m.RangeID, Msg: proto.CloneOf(m.Msg)})
	}
}

func (h *harness) close() {
	for _, id := range h.ids() {
		n := h.nodes[id]
		_ = n.s.Close()
		_ = n.eng.Close()
	}
}

func (h *harness) ids() []uint64 {
	var ids []uint64
	for id := range h.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// settle waits until every loop has nothing left to do. A loop is
// settled when, seen from an op on it, it has no queued message,
// proposal or op but this one, no log write queued or in flight, and no
// replica with a Ready; twice in a row, since the op runs at the start of
// a cycle.
func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range h.ids() {
		s := h.nodes[id].s
		for quiet := 0; quiet < 2; {
			why := unsettled(s)
			if why == "" {
				quiet++
			} else {
				quiet = 0
				time.Sleep(100 * time.Microsecond)
			}
			if time.Now().After(deadline) {
				h.t.Fatalf("node %d did not settle: %s", id, why)
			}
		}
	}
}

// unsettled says what s's loop has left to do ("": nothing).
func unsettled(s *Store) string {
	ch := make(chan string, 1)
	s.do(func() {
		s.mu.Lock()
		queued := len(s.mu.msgs) + len(s.mu.props) + len(s.mu.ops)
		order := s.mu.order
		s.mu.Unlock()
		var why []string
		if queued > 0 {
			why = append(why, fmt.Sprintf("%d queued", queued))
		}
		for _, r := range order {
			if r.rn != nil && r.rn.HasReady() {
				why = append(why, fmt.Sprintf("range %d has a Ready", r.rangeID))
			}
		}
		if s.p.inflight != nil || len(s.p.pending) > 0 {
			why = append(why, "a log write")
		}
		ch <- strings.Join(why, ", ")
	})
	select {
	case why := <-ch:
		return why
	case <-s.done:
		return ""
	}
}

// settleAll settles the loops until every background proposal that can
// finish has (a proposer learns its result just after its loop applied).
func (h *harness) settleAll() {
	h.settle()
	for _, p := range h.props {
		select {
		case <-p.done:
		case <-time.After(5 * time.Millisecond):
		}
	}
	h.settle()
}

// take removes and returns the sent messages that pass keep, ordered by
// sender then receiver (each sender's own order kept): loops run
// concurrently, so arrival order across senders is not the script's.
func (h *harness) take(keep func(Message) bool) []Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out, rest []Message
	for _, m := range h.sent {
		if keep(m) {
			out = append(out, m)
		} else {
			rest = append(rest, m)
		}
	}
	h.sent = rest
	sortMessages(out)
	return out
}

// sortMessages orders msgs by sender, receiver and range, keeping the
// order of each (sender, receiver, range)'s own messages.
func sortMessages(out []Message) {
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Msg, out[j].Msg
		if a.GetFrom() != b.GetFrom() {
			return a.GetFrom() < b.GetFrom()
		}
		if a.GetTo() != b.GetTo() {
			return a.GetTo() < b.GetTo()
		}
		return out[i].RangeID < out[j].RangeID
	})
}

// deliver steps msgs into their Stores, all of one Store's while its loop
// is held, so that it takes them in one cycle whatever the scheduling. A
// message the Store refuses (for a range it has no replica of yet, as
// for a split not applied there yet) is dropped, as a transport drops
// it; the returned note says so.
func (h *harness) deliver(msgs []Message) string {
	var note strings.Builder
	by := map[uint64][]Message{}
	for _, m := range msgs {
		by[m.Msg.GetTo()] = append(by[m.Msg.GetTo()], m)
	}
	for _, id := range h.ids() {
		if len(by[id]) == 0 {
			continue
		}
		s := h.nodes[id].s
		release := holdLoop(s)
		for _, m := range by[id] {
			if err := s.Step(context.Background(), m); err != nil {
				fmt.Fprintf(&note, "dropped r%d %d->%d %v: %v\n", m.RangeID, m.Msg.GetFrom(), id, m.Msg.GetType(), err)
			}
		}
		release()
	}
	h.settleAll()
	return note.String()
}

// holdLoop parks s's loop in an op until release is called.
func holdLoop(s *Store) (release func()) {
	held, resume := make(chan struct{}), make(chan struct{})
	s.do(func() {
		close(held)
		<-resume
	})
	select {
	case <-held:
	case <-s.done:
	}
	return func() { close(resume) }
}

func describe(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "r%d %s\n", m.RangeID, raft.DescribeMessage(m.Msg, formatEntry))
	}
	return b.String()
}

// formatEntry names a raft entry's command (without its proposal id,
// which is random).
func formatEntry(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	kind, _, cmd, err := decodeKind(data)
	if err != nil {
		return fmt.Sprintf("%q", data)
	}
	switch kind {
	case cmdSplit:
		return "split"
	case cmdMerge:
		return "merge"
	}
	if len(cmd) == 8 {
		return fmt.Sprintf("seq:%d", binary.BigEndian.Uint64(cmd))
	}
	return fmt.Sprintf("%q", cmd)
}

// status prints each replica of rangeID as raft and its lease see it.
func (h *harness) status(rangeID uint64) string {
	var b strings.Builder
	for _, id := range h.ids() {
		r := h.nodes[id].s.Replica(rangeID)
		if r == nil {
			continue
		}
		st := r.Status()
		role := "follower"
		if st.IsLeader {
			role = "leader"
		}
		fmt.Fprintf(&b, "node %d: %s term %d leader %d commit %d applied %d voters %v", id, role, st.Term, st.Leader, st.Commit, st.Applied, st.Voters)
		if desc := r.Descriptor(); desc.Start != nil || desc.End != nil {
			fmt.Fprintf(&b, " keys [%s, %s)", desc.Start, desc.End)
		}
		if ms := r.MergeState(); ms.FrozenToken != 0 {
			fmt.Fprintf(&b, " frozen for r%d (token %d)", ms.FrozenFor, ms.FrozenToken)
		}
		if ms := r.MergeState(); ms.Phase != MergeNone {
			fmt.Fprintf(&b, " merge of r%d %s (token %d)", ms.Right, [...]string{"", "pending", "aborted", "done"}[ms.Phase], ms.Token)
		}
		if ms := r.MergeState(); ms.Thawed != 0 {
			fmt.Fprintf(&b, " thawed (token %d)", ms.Thawed)
		}
		if len(st.Learners) > 0 {
			fmt.Fprintf(&b, " learners %v", st.Learners)
		}
		if st.Quiesced {
			b.WriteString(" quiesced")
		}
		if !st.LeaseExpiration.IsZero() {
			fmt.Fprintf(&b, " lease until +%v", st.LeaseExpiration.Sub(h.start))
		}
		if st.IsLeader {
			if err := r.ReadReady(); err != nil {
				b.WriteString(" (cannot serve reads)")
			} else {
				b.WriteString(" (serves reads)")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The commands. Arguments are key=value; lists are (a,b,c).

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "add-nodes":
		// add-nodes ids=(1,2,3) [quiesce-ticks=N] [commit-delay=D]: with
		// a commit delay, commit-only appends are held until release
		// (the delay itself never runs out in a script).
		quiesce := 0
		if d.HasArg("quiesce-ticks") {
			d.ScanArgs(t, "quiesce-ticks", &quiesce)
		}
		delay := time.Duration(-1)
		if d.HasArg("commit-delay") {
			delay = time.Hour
		}
		for _, id := range uints(t, d, "ids") {
			e, err := storage.Open(storage.Options{Dir: "db", FS: vfs.NewMem(), CacheSize: 8 << 20, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			ticks := make(chan time.Time)
			o := Options{NodeID: id, Engine: e, Transport: h, Clock: h.clock, Logger: quietLogger(),
				TickInterval: 100 * time.Millisecond, CommitDelay: delay, QuiesceTicks: quiesce, ticks: ticks,
				NewStateMachine: func(rangedesc.Range) StateMachine { return &keySM{} }}
			s, err := NewStore(o)
			if err != nil {
				t.Fatal(err)
			}
			h.nodes[id] = &hnode{id: id, eng: e, s: s, ticks: ticks}
		}
		return ""
	case "add-range":
		// add-range id=1 peers=(1,2,3) [keys=(a,z)]: a fresh group of
		// those voters; with keys, over [a, z) with a counter per key
		// (keySM: propose key=K), else a sequence counter (propose seq=N).
		var id uint64
		d.ScanArgs(t, "id", &id)
		peers := uints(t, d, "peers")
		for _, n := range peers {
			desc := rangedesc.Range{ID: id, Replicas: peers}
			var sm StateMachine = &counterSM{rangeID: id}
			if d.HasArg("keys") {
				var lo, hi string
				d.ScanArgs(t, "keys", &lo, &hi)
				desc.Start, desc.End, sm = []byte(lo), []byte(hi), &keySM{}
			}
			if _, err := h.nodes[n].s.AddReplica(desc, sm); err != nil {
				t.Fatal(err)
			}
		}
		h.settle()
		return ""
	case "release":
		// release node=N: sends the commit-only appends it holds.
		var node uint64
		d.ScanArgs(t, "node", &node)
		s := h.nodes[node].s
		s.do(s.releaseHeld)
		h.settle()
		return ""
	case "tick":
		// tick [nodes=(1,2)] [n=1]: each listed node (default: all) ticks n
		// times, every loop settling after each tick.
		count := 1
		if d.HasArg("n") {
			d.ScanArgs(t, "n", &count)
		}
		ids := h.ids()
		if d.HasArg("nodes") {
			ids = uints(t, d, "nodes")
		}
		for range count {
			for _, id := range ids {
				h.nodes[id].ticks <- h.clock()
			}
			h.settle()
		}
		return ""
	case "advance":
		// advance d=300ms: moves the clock.
		var s string
		d.ScanArgs(t, "d", &s)
		dur, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		h.mu.Lock()
		h.now = h.now.Add(dur)
		h.mu.Unlock()
		return fmt.Sprintf("now +%v\n", h.clock().Sub(h.start))
	case "deliver", "drop":
		// deliver|drop [from=N] [to=N] [range=N]: the matching sent
		// messages; prints them.
		keep := matcher(t, d)
		msgs := h.take(keep)
		out := describe(msgs)
		if d.Cmd == "deliver" {
			out += h.deliver(msgs)
		}
		return out
	case "stabilize":
		// stabilize: delivers until no message is left, printing each
		// round.
		var b strings.Builder
		for round := 0; ; round++ {
			msgs := h.take(func(Message) bool { return true })
			if len(msgs) == 0 {
				break
			}
			if round > 100 {
				t.Fatal("messages still flowing after 100 rounds")
			}
			b.WriteString(describe(msgs))
			b.WriteString(h.deliver(msgs))
		}
		return b.String()
	case "pending":
		h.mu.Lock()
		msgs := slices.Clone(h.sent)
		h.mu.Unlock()
		sortMessages(msgs)
		return describe(msgs)
	case "propose", "split", "merge":
		// propose node=N range=N seq=N|key=K
		// split node=N range=N key=K right=N
		// merge node=N range=N step=begin|freeze|commit|abort|thaw|clear token=N [right=N] [left=N]
		// In the background: see results.
		var node, rangeID uint64
		d.ScanArgs(t, "node", &node)
		d.ScanArgs(t, "range", &rangeID)
		r := h.nodes[node].s.Replica(rangeID)
		if r == nil {
			return fmt.Sprintf("node %d has no replica of range %d\n", node, rangeID)
		}
		op, what := h.op(t, d, node, r)
		p := &hprop{node: node, what: fmt.Sprintf("r%d %s", rangeID, what), done: make(chan struct{})}
		h.props = append(h.props, p)
		go func() {
			defer close(p.done)
			p.res, p.err = op(context.Background())
		}()
		h.settleAll()
		return ""
	case "results":
		// results: the proposals that finished since the last call, in
		// the order they were made.
		var b strings.Builder
		var left []*hprop
		for _, p := range h.props {
			select {
			case <-p.done:
				switch res := p.res.(type) {
				case nil:
					fmt.Fprintf(&b, "node %d %s: %v\n", p.node, p.what, orDone(p.err))
				case error: // the state machine's answer
					fmt.Fprintf(&b, "node %d %s: refused: %v\n", p.node, p.what, res)
				case rangedesc.Range:
					fmt.Fprintf(&b, "node %d %s: r%d [%s, %s) voters %v\n", p.node, p.what, res.ID, res.Start, res.End, res.Replicas)
				default:
					fmt.Fprintf(&b, "node %d %s: count %v\n", p.node, p.what, res)
				}
			default:
				left = append(left, p)
			}
		}
		h.props = left
		if b.Len() == 0 {
			return "none\n"
		}
		return b.String()
	case "status":
		// status range=N
		var rangeID uint64
		d.ScanArgs(t, "range", &rangeID)
		return h.status(rangeID)
	case "read":
		// read node=N range=N: whether the replica may serve a read now.
		var node, rangeID uint64
		d.ScanArgs(t, "node", &node)
		d.ScanArgs(t, "range", &rangeID)
		if err := h.nodes[node].s.Replica(rangeID).ReadReady(); err != nil {
			return fmt.Sprintf("no: %v\n", err)
		}
		return "yes\n"
	case "transfer":
		// transfer node=N range=N to=M
		var node, rangeID, to uint64
		d.ScanArgs(t, "node", &node)
		d.ScanArgs(t, "range", &rangeID)
		d.ScanArgs(t, "to", &to)
		h.nodes[node].s.Replica(rangeID).TransferLeadership(to)
		h.settle()
		return ""
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

// op reads a propose, split or merge command into the call it makes.
func (h *harness) op(t *testing.T, d *datadriven.TestData, node uint64, r *Replica) (func(context.Context) (any, error), string) {
	arg := func(k string) uint64 {
		var v uint64
		d.ScanArgs(t, k, &v)
		return v
	}
	switch d.Cmd {
	case "propose":
		if d.HasArg("key") {
			var k string
			d.ScanArgs(t, "key", &k)
			return func(ctx context.Context) (any, error) { return r.Propose(ctx, []byte(k)) }, "key " + k
		}
		seq := arg("seq")
		return func(ctx context.Context) (any, error) { return r.Propose(ctx, seqCmd(seq)) }, fmt.Sprintf("seq:%d", seq)
	case "split":
		var k string
		d.ScanArgs(t, "key", &k)
		right := arg("right")
		return func(ctx context.Context) (any, error) {
			d, err := r.Split(ctx, []byte(k), right)
			if err != nil {
				return nil, err
			}
			return d, nil
		}, fmt.Sprintf("split at %s", k)
	}
	var step string
	d.ScanArgs(t, "step", &step)
	token := arg("token")
	none := func(err error) (any, error) { return nil, err }
	switch step {
	case "begin":
		right := arg("right")
		return func(ctx context.Context) (any, error) { return none(r.BeginMerge(ctx, right, token)) }, fmt.Sprintf("begin merge of r%d", right)
	case "freeze":
		left := arg("left")
		return func(ctx context.Context) (any, error) { return none(r.Freeze(ctx, left, token)) }, fmt.Sprintf("freeze for r%d", left)
	case "commit":
		right := h.nodes[node].s.Replica(arg("right"))
		rd := right.Descriptor()
		return func(ctx context.Context) (any, error) {
			d, err := r.CommitMerge(ctx, token, rd)
			if err != nil {
				return nil, err
			}
			return d, nil
		}, fmt.Sprintf("commit merge of r%d", rd.ID)
	case "abort":
		return func(ctx context.Context) (any, error) { return none(r.AbortMerge(ctx, token)) }, "abort merge"
	case "thaw":
		return func(ctx context.Context) (any, error) { return none(r.Thaw(ctx, token)) }, "thaw"
	case "clear":
		return func(ctx context.Context) (any, error) { return none(r.ClearMerge(ctx, token)) }, "clear merge"
	}
	t.Fatalf("unknown merge step %q", step)
	return nil, ""
}

func orDone(err error) any {
	if err == nil {
		return "done"
	}
	return err
}

// matcher reads deliver's filters.
func matcher(t *testing.T, d *datadriven.TestData) func(Message) bool {
	var from, to, rangeID uint64
	has := func(k string, v *uint64) bool {
		if d.HasArg(k) {
			d.ScanArgs(t, k, v)
			return true
		}
		return false
	}
	hf, ht, hr := has("from", &from), has("to", &to), has("range", &rangeID)
	return func(m Message) bool {
		return (!hf || m.Msg.GetFrom() == from) && (!ht || m.Msg.GetTo() == to) && (!hr || m.RangeID == rangeID)
	}
}

// uints reads a list argument: ids=(1,2,3) or ids=1.
func uints(t *testing.T, d *datadriven.TestData, key string) []uint64 {
	for _, a := range d.CmdArgs {
		if a.Key != key {
			continue
		}
		var out []uint64
		for _, v := range a.Vals {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			out = append(out, n)
		}
		return out
	}
	t.Fatalf("missing argument %s", key)
	return nil
}

// TestHarness runs the scripts in testdata/harness: the Ready loop,
// leases, quiescence, held commits, splits and merges, driven by hand.
func TestHarness(t *testing.T) {
	datadriven.Walk(t, "testdata/harness", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

var _ raftpb.MessageType // the scripts print raft's message types
