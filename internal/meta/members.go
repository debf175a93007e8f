package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// memberListTimeout bounds one attempt to list the members.
const memberListTimeout = 2 * time.Second

// Member is one member of the meta service's etcd cluster.
type Member struct {
	ID         uint64
	Name       string // "" until the member has started
	PeerURLs   []string
	ClientURLs []string
	Learner    bool
}

// Members lists the meta service's members in id order. The list is a
// linearizable read, so it is tried again while the meta service is
// between leaders (a join often lands right after a membership change);
// a read index lost in a leadership transfer leaves the call waiting, so
// each attempt gets memberListTimeout.
func (s *EtcdStore) Members(ctx context.Context) ([]Member, error) {
	var resp *clientv3.MemberListResponse
	err := retryWhile(ctx, func(err error) bool {
		return unsettled(err) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
	}, func() error {
		actx, cancel := context.WithTimeout(ctx, memberListTimeout)
		defer cancel()
		var err error
		resp, err = s.client.MemberList(actx)
		return err
	})
	if err != nil {
		return nil, s.mapErr("member list", err)
	}
	out := make([]Member, 0, len(resp.Members))
	for _, m := range resp.Members {
		out = append(out, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// AddLearner adds a non-voting member that will start at peerURL, and
// returns its id and the members after the change.
func (s *EtcdStore) AddLearner(ctx context.Context, peerURL string) (uint64, []Member, error) {
	resp, err := s.client.MemberAddAsLearner(ctx, []string{peerURL})
	if err != nil {
		return 0, nil, s.mapErr("add learner "+peerURL, err)
	}
	// The id comes back with an error too: the member was added, and a
	// caller that gives up removes it.
	ms, err := s.Members(ctx)
	return resp.Member.ID, ms, err
}

// Promote makes a learner a voter. etcd refuses while the learner has not
// caught up with the leader's log; the caller retries later.
func (s *EtcdStore) Promote(ctx context.Context, id uint64) error {
	if _, err := s.client.MemberPromote(ctx, id); err != nil {
		return s.mapErr(fmt.Sprintf("promote member %x", id), err)
	}
	return nil
}

// UpdatePeerURLs changes the peer URLs of member id (a member whose
// scheme moved from http to https).
func (s *EtcdStore) UpdatePeerURLs(ctx context.Context, id uint64, urls []string) error {
	if _, err := s.client.MemberUpdate(ctx, id, urls); err != nil {
		return s.mapErr(fmt.Sprintf("update member %x", id), err)
	}
	return nil
}

// RemoveMember removes a member (voter or learner).
func (s *EtcdStore) RemoveMember(ctx context.Context, id uint64) error {
	if _, err := s.client.MemberRemove(ctx, id); err != nil {
		return s.mapErr(fmt.Sprintf("remove member %x", id), err)
	}
	return nil
}

// InitialCluster renders members as etcd's initial-cluster flag
// ("name=peerURL,..."); the member without a name yet is named newName.
func InitialCluster(members []Member, newName string) string {
	var parts []string
	for _, m := range members {
		name := m.Name
		if name == "" {
			name = newName
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	return strings.Join(parts, ",")
}

// VoterEndpoints returns the client URLs of the voting members.
func VoterEndpoints(members []Member) []string {
	var eps []string
	for _, m := range members {
		if !m.Learner {
			eps = append(eps, m.ClientURLs...)
		}
	}
	return eps
}

// TargetVoters is how many voting members the meta service should have with
// n nodes: 1 below 3 nodes, 3 below 5, then 5.
func TargetVoters(n int) int {
	switch {
	case n >= 5:
		return 5
	case n >= 3:
		return 3
	}
	return 1
}

// SetEndpoints points a store made by DialEtcd at eps (the voters' client
// URLs as the member list now has them); it does nothing to a store on an
// embedded member, which talks to its own server.
func (s *EtcdStore) SetEndpoints(eps []string) {
	if s.etcd != nil || len(eps) == 0 {
		return
	}
	cur := s.client.Endpoints()
	if slices.Equal(sortedCopy(cur), sortedCopy(eps)) {
		return
	}
	s.client.SetEndpoints(eps...)
}

// Endpoints returns the client URLs the store's client uses; Embedded
// reports whether it is the store of an embedded member (which talks to
// its own server).
func (s *EtcdStore) Endpoints() []string { return s.client.Endpoints() }

// Embedded: see Endpoints.
func (s *EtcdStore) Embedded() bool { return s.etcd != nil }

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// LeadsRaft reports whether this store's embedded member leads the meta
// service's raft group (false for a client of members run elsewhere).
func (s *EtcdStore) LeadsRaft() bool {
	return s.etcd != nil && s.etcd.Server.Leader() == s.etcd.Server.MemberID()
}

// MoveLeader hands the meta service's raft leadership from this store's
// embedded member, which must lead, to the voting member named to, and
// waits until it moved or ctx ends. While the transfer runs the group
// takes no writes, so to must be up and caught up.
func (s *EtcdStore) MoveLeader(ctx context.Context, to string) error {
	if s.etcd == nil {
		return errors.New("meta: MoveLeader: no embedded member")
	}
	srv := s.etcd.Server
	for _, m := range srv.Cluster().Members() {
		if m.Name == to && !m.IsLearner && m.ID != srv.MemberID() {
			if err := srv.MoveLeader(ctx, uint64(srv.Leader()), uint64(m.ID)); err != nil {
				return fmt.Errorf("meta: move the meta service's leadership to %s: %w", to, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNotVoter, to)
}

// ErrNotVoter is returned by MoveLeader for a member that is not another
// voting member of the meta service (a learner, or unknown).
var ErrNotVoter = errors.New("meta: not another voting member of the meta service")
