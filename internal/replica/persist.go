package replica

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Asynchronous log writes (raft's AsyncStorageWrites).
//
// Raft hands each replica's log entries and hard state to be written as a
// MsgStorageAppend, with the messages that may only go once they are
// durable (append and vote responses, and the replica's own
// acknowledgement) attached as its responses. The loop does not wait for
// the write: it queues the append and goes on stepping messages, taking
// proposals and applying committed entries while a writer goroutine
// commits the previous batch. One batch is in flight at a time; when it is
// durable the loop delivers its responses and starts the next batch with
// every append queued meanwhile (of every replica), so the disk sees one
// synced write per round trip of the writer and each write carries all
// the work that came during the last one: group commit without a stall.
//
// The order raft needs holds: a replica's appends are written in the order
// raft emitted them (one queue, one batch at a time, in queue order), and
// their responses are delivered in that order. Raft hands out committed
// entries to apply only once they are durable here, so an apply never
// runs ahead of the log.
//
// Anything else that writes or deletes a range's raft state (installing a
// snapshot, a split over an uninitialized replica, a merge, removing a
// replica) first drains the queue (flush): all that raft handed over is
// then on disk, and no write in flight lands after the change.

// appendReq is one replica's MsgStorageAppend.
type appendReq struct {
	r     *Replica
	rn    *raft.RawNode     // the RawNode that asked (a split may replace r's)
	ents  []*raftpb.Entry   // to append; an earlier tail they conflict with goes
	hs    *raftpb.HardState // nil if unchanged
	sync  bool              // raft's MustSync: entries, term or vote changed
	resps []*raftpb.Message // to deliver once written
}

// persistJob is one batch of appends handed to the writer: the entries
// in a batch of the raft log's instance, the hard states in one of the
// state store's. The writer commits the entries first, so a hard state
// never commits an entry that is not on disk.
type persistJob struct {
	reqs   []appendReq
	b      *pebble.Batch // entries (Store.logDB)
	hb     *pebble.Batch // hard states (Store.db)
	sync   bool          // b must sync
	hsSync bool          // hb must sync: a term or vote changed
	err    error
}

// persister is the loop's side of the writer (loop-owned).
type persister struct {
	pending  []appendReq      // queued, not written yet
	inflight *persistJob      // handed to the writer; nil if none
	jobs     chan *persistJob // to the writer
	done     chan *persistJob // back from it
	err      error            // a failed write: the loop stops with it
	acks     map[peerKey]int  // finishPersist's scratch: the last ack per range and leader in out
}

func newPersister() persister {
	return persister{
		jobs: make(chan *persistJob, 1), done: make(chan *persistJob, 1),
		acks: map[peerKey]int{},
	}
}

// writer commits the batches the loop hands it, one at a time, until jobs
// is closed.
func (s *Store) writer() {
	opt := func(sync bool) *pebble.WriteOptions {
		if sync {
			return pebble.Sync
		}
		return pebble.NoSync
	}
	for j := range s.p.jobs {
		t := startWatch()
		if !j.b.Empty() {
			j.err = j.b.Commit(opt(j.sync))
			if j.sync && j.err == nil {
				s.stats.syncs.Add(1)
			}
		}
		if j.err == nil && !j.hb.Empty() {
			j.err = j.hb.Commit(opt(j.hsSync))
		}
		s.stats.persistNs.Add(t.ns())
		s.p.done <- j
	}
}

// queueAppend queues r's MsgStorageAppend m from the Ready rd.
func (s *Store) queueAppend(r *Replica, rn *raft.RawNode, rd *raft.Ready, m *raftpb.Message) {
	q := appendReq{r: r, rn: rn, ents: m.GetEntries(), sync: rd.MustSync, resps: m.GetResponses()}
	if !raft.IsEmptyHardState(rd.HardState) {
		q.hs = rd.HardState
	}
	r.unstable++
	s.p.pending = append(s.p.pending, q)
}

// startPersist hands the queued appends to the writer as one batch, if
// none is in flight. Loop-owned.
func (s *Store) startPersist() error {
	if s.p.inflight != nil || len(s.p.pending) == 0 {
		return nil
	}
	j := &persistJob{reqs: s.p.pending, b: s.logDB.NewBatch(), hb: s.db.NewBatch()}
	s.p.pending = nil
	appended := 0
	for _, q := range j.reqs {
		if q.r.removed || q.r.rn != q.rn {
			continue // its state is gone or replaced: see flush
		}
		if err := q.r.st.append(j.b, q.ents); err != nil {
			j.close()
			return err
		}
		if q.hs != nil {
			old := q.r.st.hs
			if q.sync && (q.hs.GetTerm() != old.GetTerm() || q.hs.GetVote() != old.GetVote()) {
				j.hsSync = true
			}
			if err := q.r.st.setHardState(j.hb, q.hs); err != nil {
				j.close()
				return err
			}
		}
		j.sync = j.sync || q.sync && len(q.ents) > 0
		appended += len(q.ents)
	}
	s.stats.appended.Add(uint64(appended))
	if j.b.Empty() && j.hb.Empty() {
		// Only responses that wait for earlier writes, all done.
		if err := s.finishPersist(j); err != nil {
			return err
		}
		s.signal() // the responses stepped leave raft work
		return nil
	}
	s.p.inflight = j
	s.p.jobs <- j
	return nil
}

// finishPersist takes a written batch back: the entries are now part of
// each replica's storage, and the responses go out (to this node's raft
// groups by Step, to others by the Transport). The raft work the stepped
// responses leave is for the caller to run: the loop runs a cycle next,
// flush's callers are inside one (and signal). Loop-owned.
func (s *Store) finishPersist(j *persistJob) error {
	if s.p.inflight == j {
		s.p.inflight = nil
	}
	j.close()
	if j.err != nil {
		return fmt.Errorf("replica: persist raft state: %w", j.err)
	}
	var out []Message
	acks := s.p.acks
	clear(acks)
	for _, q := range j.reqs {
		r := q.r
		if r.removed || r.rn != q.rn {
			continue
		}
		r.unstable--
		r.st.appended(q.ents)
		for _, m := range q.resps {
			switch {
			case m.GetTo() == s.opts.NodeID:
				r.step(m)
			case isAck(m):
				// The batch holds the appends of many MsgApps of one
				// leader: one acknowledgement, the highest, says what
				// all of them say (the leader reads an ack as "my log
				// matches yours up to Index").
				k := peerKey{r.rangeID, m.GetTo()}
				if i, ok := acks[k]; ok && out[i].Msg.GetTerm() == m.GetTerm() {
					if out[i].Msg.GetIndex() >= m.GetIndex() {
						continue // an earlier ack already covers this one
					}
					out[i].Msg = nil // covered by this one
				}
				acks[k] = len(out)
				out = append(out, Message{RangeID: r.rangeID, Msg: m})
			default:
				out = append(out, Message{RangeID: r.rangeID, Msg: m})
			}
		}
	}
	if len(acks) > 0 {
		out = slices.DeleteFunc(out, func(m Message) bool { return m.Msg == nil })
	}
	if len(out) > 0 {
		s.opts.Transport.Send(out)
		s.stats.sent.Add(uint64(len(out)))
	}
	return nil
}

func (j *persistJob) close() {
	_ = j.b.Close()
	_ = j.hb.Close()
}

// peerKey names one range's raft messages to one node.
type peerKey struct{ rangeID, to uint64 }

// isAck reports whether m acknowledges appended entries (a MsgAppResp
// that does not reject).
func isAck(m *raftpb.Message) bool {
	return m.GetType() == raftpb.MsgAppResp && !m.GetReject()
}

// flush writes everything queued and waits for it. An error stops the
// loop. Loop-owned.
func (s *Store) flush() error {
	for s.p.err == nil && (s.p.inflight != nil || len(s.p.pending) > 0) {
		if s.p.inflight == nil {
			s.p.err = s.startPersist()
		} else {
			s.p.err = s.finishPersist(<-s.p.done)
			s.signal() // for replicas this cycle does not look at again
		}
	}
	return s.p.err
}

// stopWriter waits for the batch in flight, if any, and stops the writer.
// Queued appends are dropped: nothing was acknowledged for them. Loop-owned,
// as the loop exits.
func (s *Store) stopWriter() {
	if j := s.p.inflight; j != nil {
		<-s.p.done
		j.close()
		s.p.inflight = nil
	}
	s.p.pending = nil
	close(s.p.jobs)
}
