package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/transport"
)

// adminService is the peer gRPC service of control calls between nodes.
const adminService = "cairn.Admin"

// joinRequest is what a joining node sends to any node of the cluster.
type joinRequest struct {
	V           int    `json:"v"`
	MetaPeerURL string `json:"meta_peer_url"`
	Zone        string `json:"zone"`
}

// joinResponse tells a joining node who it is and how to reach the meta
// service. InitialCluster is empty when it gets no etcd member (the
// cluster already has five).
type joinResponse struct {
	V              int      `json:"v"`
	NodeID         uint64   `json:"node_id,string"`
	Cluster        string   `json:"cluster"`
	InitialCluster string   `json:"initial_cluster"`
	Endpoints      []string `json:"endpoints"`
}

// membership is what a meta.Store offers for changing the meta service's
// members (EtcdStore does; MemStore does not).
type membership interface {
	Members(ctx context.Context) ([]meta.Member, error)
	AddLearner(ctx context.Context, peerURL string) (uint64, []meta.Member, error)
	Promote(ctx context.Context, id uint64) error
	RemoveMember(ctx context.Context, id uint64) error
}

// handleJoin admits a new node: it allocates its id and, while the meta
// service has fewer than five members, adds the node's etcd member as a
// learner (promoted by reconcileMeta once it has caught up).
func (n *Node) handleJoin(ctx context.Context, b []byte) ([]byte, error) {
	var req joinRequest
	if err := json.Unmarshal(b, &req); err != nil || req.V != 1 || req.MetaPeerURL == "" {
		return nil, fmt.Errorf("malformed join request (%v)", err)
	}
	ms, ok := n.meta.(membership)
	if !ok {
		return nil, errors.New("this node's meta service cannot change membership")
	}
	// One admission at a time in the whole cluster: a joiner's initial
	// cluster must list every member there is when its member starts.
	release, err := n.admissionLock(ctx)
	if err != nil {
		return nil, fmt.Errorf("another node is being admitted: %w", transport.ErrBusy)
	}
	defer release()
	members, err := ms.Members(ctx)
	if err != nil {
		return nil, err
	}
	removed := false
	for _, m := range members {
		switch {
		case slices.Contains(m.PeerURLs, req.MetaPeerURL):
			// The same address joining again: a node whose earlier join
			// failed, or that lost its data. Its old member is gone.
			if err := ms.RemoveMember(ctx, m.ID); err != nil {
				return nil, fmt.Errorf("remove the earlier meta member at %s: %w", req.MetaPeerURL, err)
			}
			n.log.Info("removed the meta member of an earlier join from the same address", "peer_url", req.MetaPeerURL)
			removed = true
		case m.Name == "":
			// Another joiner's member has not started yet; until it has,
			// a new member's initial cluster cannot be right.
			return nil, fmt.Errorf("the meta member at %v has not started yet: %w", m.PeerURLs, transport.ErrBusy)
		}
	}
	if removed {
		if members, err = ms.Members(ctx); err != nil {
			return nil, err
		}
	}
	endpoints := meta.VoterEndpoints(members)
	member := len(members) < n.cfg.MetaMembers
	if member {
		if _, members, err = ms.AddLearner(ctx, req.MetaPeerURL); err != nil {
			if strings.Contains(err.Error(), "unhealthy cluster") {
				// etcd refuses a member change until the members have
				// been connected a few seconds after the last one.
				return nil, fmt.Errorf("%v: %w", err, transport.ErrBusy)
			}
			return nil, err
		}
	}
	// The id comes last, so a refused admission uses none up.
	id, err := n.catalog.AllocNodeID(ctx)
	if err != nil {
		return nil, err
	}
	resp := joinResponse{V: 1, NodeID: id, Cluster: n.id.Cluster, Endpoints: endpoints}
	if member {
		resp.InitialCluster = meta.InitialCluster(members, memberName(id))
	}
	n.log.Info("node joining", "node", id, "meta_member", resp.InitialCluster != "", "zone", req.Zone)
	return json.Marshal(resp)
}

// admissionLock takes the cluster-wide lock of meta membership changes
// (waiting up to 10s; held at most 30s) and returns its release.
func (n *Node) admissionLock(ctx context.Context) (release func(), err error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	lock, err := n.meta.Campaign(lctx, "join", 30*time.Second)
	cancel()
	if err != nil {
		return nil, err
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = lock.Resign(rctx)
	}, nil
}

func memberName(id uint64) string { return fmt.Sprintf("node-%d", id) }

// join asks the node at cfg.Join to admit this one and saves the identity
// it is given.
func (n *Node) join(ctx context.Context) (*joinResponse, error) {
	urls, err := n.metaURLs()
	if err != nil {
		return nil, err
	}
	req, _ := json.Marshal(joinRequest{V: 1, MetaPeerURL: urls.peer, Zone: n.cfg.Zone})
	deadline := time.Now().Add(2 * time.Minute)
	var b []byte
	for backoff := 200 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		b, err = n.peers.caller.Call(cctx, n.cfg.Join, adminService, "Join", req)
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, transport.ErrBusy) || time.Now().After(deadline) {
			return nil, fmt.Errorf("join the cluster at %s: %w (is a cairn node listening there on its peer port?)", n.cfg.Join, err)
		}
		n.log.Info("another node is joining; waiting to join", "retry", backoff)
		if err := sleep(ctx, backoff); err != nil {
			return nil, err
		}
	}
	var resp joinResponse
	if err := json.Unmarshal(b, &resp); err != nil || resp.V != 1 || resp.NodeID == 0 || len(resp.Endpoints) == 0 {
		return nil, fmt.Errorf("join the cluster at %s: malformed answer (%v)", n.cfg.Join, err)
	}
	// The identity is saved once the meta member has started (see Open):
	// a node whose member fails to start joins again when restarted.
	n.id = identity{V: 1, NodeID: resp.NodeID, Cluster: resp.Cluster, Joined: true,
		Member: resp.InitialCluster != "", Endpoints: resp.Endpoints}
	n.log.Info("joined the cluster", "node", resp.NodeID, "cluster", resp.Cluster, "via", n.cfg.Join)
	return &resp, nil
}

type metaURLs struct{ peer, listenPeer, client, listenClient string }

// metaURLs picks the embedded etcd member's ports (once) and returns its
// advertised and listen URLs.
func (n *Node) metaURLs() (metaURLs, error) {
	var err error
	if n.cfg.MetaPort, err = pickPort(n.cfg.Listen, n.cfg.MetaPort); err != nil {
		return metaURLs{}, err
	}
	if n.cfg.MetaClientPort, err = pickPort(n.cfg.Listen, n.cfg.MetaClientPort); err != nil {
		return metaURLs{}, err
	}
	u := func(host string, port int) string { return "http://" + net.JoinHostPort(host, fmt.Sprint(port)) }
	return metaURLs{
		peer: u(n.advertiseHost(), n.cfg.MetaPort), listenPeer: u(n.cfg.Listen, n.cfg.MetaPort),
		client: u(n.advertiseHost(), n.cfg.MetaClientPort), listenClient: u(n.cfg.Listen, n.cfg.MetaClientPort),
	}, nil
}

// openMeta opens the meta service: the test's Store, this node's own
// single etcd member, or (a joined node) a client of the cluster's members
// plus, if it has one, its own member. joined is the answer of a join just
// made, nil otherwise.
func (n *Node) openMeta(joined *joinResponse) error {
	if n.cfg.Meta != nil {
		n.meta = n.cfg.Meta
		return nil
	}
	urls, err := n.metaURLs()
	if err != nil {
		return err
	}
	n.metaPeerURL = urls.peer
	opts := n.etcdOptions(urls)
	if !n.id.Joined {
		es, err := meta.OpenEtcd(opts)
		if err != nil {
			return fmt.Errorf("start meta service: %w", err)
		}
		n.meta, n.ownMeta = es, true
		return nil
	}
	// A client node with member data: topUpMeta started a member here and
	// the node stopped before it saved that. Start it again (etcd refuses
	// if it was removed meanwhile) and save it.
	unsaved := n.id.Joined && !n.id.Member && joined == nil && hasMemberData(opts.Dir)
	if n.id.Member || unsaved {
		if joined != nil {
			// A fresh member: whatever an earlier, failed join left in its
			// directory belongs to a member that no longer exists.
			opts.InitialCluster, opts.Join = joined.InitialCluster, true
		} else if !hasMemberData(opts.Dir) {
			// Never start an empty member on restart: etcd would found a
			// new cluster of one.
			return fmt.Errorf("this node's meta service member has no data in %s; remove %s and join the cluster again", opts.Dir, n.cfg.DataDir)
		}
		var es *meta.EtcdStore
		if joined != nil {
			es, err = n.startJoiningMember(opts)
		} else {
			es, err = meta.OpenEtcd(opts)
		}
		n.member.Store(es)
		if err != nil && unsaved {
			// Removed meanwhile (a member that had not started is removed
			// before this node tries again): go on as a client.
			n.log.Warn("the meta service member this node added itself as did not start; going on as a client", "err", err)
			if rerr := os.RemoveAll(opts.Dir); rerr != nil {
				return rerr
			}
			err, unsaved = nil, false
		}
		if err != nil && joined == nil {
			// etcd stops a member that was removed from the cluster.
			return fmt.Errorf("start this node's meta service member: %w (a node removed with cairn node remove cannot come back: remove %s and start it with --join)", err, n.cfg.DataDir)
		}
		if err != nil {
			return fmt.Errorf("start this node's meta service member: %w", err)
		}
		if unsaved {
			n.log.Info("started the meta service member this node added itself as before it stopped")
			n.id.Member = true
			if err := n.writeIdentity(n.id); err != nil {
				return err
			}
		}
	}
	eps := n.id.Endpoints
	if n.id.Member && joined == nil {
		// A restart: this node's own member (a voter by now, in all
		// likelihood) is reachable even when every saved endpoint is gone.
		eps = append([]string{urls.client}, eps...)
	}
	cli, err := meta.DialEtcd(meta.DialOptions{Endpoints: eps, Name: memberName(n.id.NodeID), Logger: n.log})
	if err != nil {
		return err
	}
	n.meta, n.ownMeta = cli, true
	return nil
}

func (n *Node) etcdOptions(urls metaURLs) meta.EtcdOptions {
	return meta.EtcdOptions{
		Dir:  filepath.Join(n.cfg.DataDir, "meta"),
		Name: memberName(n.id.NodeID), PeerURL: urls.peer, ListenPeerURL: urls.listenPeer,
		ClientURL: urls.client, ListenClientURL: urls.listenClient,
		Logger: n.log,
	}
}

func hasMemberData(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "member"))
	return err == nil
}

// startJoiningMember starts a new member of the meta service (opts.Join
// set) in an emptied directory.
func (n *Node) startJoiningMember(opts meta.EtcdOptions) (*meta.EtcdStore, error) {
	if err := os.RemoveAll(opts.Dir); err != nil {
		return nil, err
	}
	es, err := meta.OpenEtcd(opts)
	for try := 0; err != nil && strings.Contains(err.Error(), "member count is unequal") && try < 20; try++ {
		// A member that has not applied this node's admission yet
		// answered etcd's cluster check; it catches up shortly.
		n.log.Info("a meta member has not seen this node's admission yet; starting again", "err", err)
		time.Sleep(250 * time.Millisecond)
		if err = os.RemoveAll(opts.Dir); err == nil {
			es, err = meta.OpenEtcd(opts)
		}
	}
	return es, err
}

// followMembers keeps a joined node's meta client pointed at the current
// voters (so that it survives the loss of the members it joined through)
// and remembers them for its next start.
func (n *Node) followMembers(members []meta.Member) {
	es, ok := n.meta.(*meta.EtcdStore)
	eps := meta.VoterEndpoints(members)
	if !ok || !n.id.Joined || len(eps) == 0 {
		return
	}
	es.SetEndpoints(eps)
	if n.savedEndpoints == nil {
		n.savedEndpoints = n.id.Endpoints
	}
	if !slices.Equal(eps, n.savedEndpoints) {
		id := n.savedIdentity()
		id.Endpoints = eps
		if err := n.writeIdentity(id); err != nil {
			n.log.Warn("could not save the meta service endpoints", "err", err)
			return
		}
		n.savedEndpoints = eps
	}
}

// savedIdentity is the identity as last saved while running: n.id as
// opened, with the endpoints followMembers saved since and the member
// topUpMeta started. reconcileMeta's goroutine only.
func (n *Node) savedIdentity() identity {
	id := n.id
	if n.savedEndpoints != nil {
		id.Endpoints = n.savedEndpoints
	}
	id.Member = id.Member || n.member.Load() != nil
	return id
}

// reconcileMeta moves the meta service's voters toward the target for the
// number of nodes: it promotes learners that have caught up, and points a
// joined node's meta client at the voters. Every node runs it every 500ms;
// a promotion another node already made just fails.
func (n *Node) reconcileMeta(ctx context.Context) {
	ms, ok := n.meta.(membership)
	if !ok {
		return
	}
	nodes, err := n.catalog.Nodes(ctx)
	if err != nil {
		return
	}
	members, err := ms.Members(ctx)
	if err != nil {
		return
	}
	n.followMembers(members)
	nodes = slices.DeleteFunc(nodes, func(nd meta.NodeInfo) bool { return nd.State == meta.NodeRemoved })
	voters := 0
	for _, m := range members {
		if !m.Learner {
			voters++
		}
	}
	target := n.targetVoters(len(nodes))
	for _, m := range members {
		if voters >= target {
			break
		}
		if m.Learner && m.Name != "" { // started and known by name
			if err := ms.Promote(ctx, m.ID); err == nil {
				n.log.Info("meta service member promoted to voter", "member", m.Name)
				voters++
			}
		}
	}
	if voters < target && n.topUpCandidate(nodes, members) {
		if err := n.topUpMeta(ctx, ms); err != nil {
			n.log.Warn("could not become a meta service member", "err", err)
		}
	}
}

// targetVoters is how many voters the meta service should have with k
// nodes in the cluster.
func (n *Node) targetVoters(k int) int {
	return min(meta.TargetVoters(k), n.cfg.MetaMembers)
}

// topUpCandidate reports whether this node is the one to become a meta
// service member now: the meta service has room, no learner that could be
// promoted instead, and of the up nodes without a member this one has the
// lowest id. That happens when a removal took a voter from a cluster whose
// other nodes joined beyond Config.MetaMembers, as clients. A member at
// this node's own address is one it added and did not start (see
// topUpMeta); it does not count.
func (n *Node) topUpCandidate(nodes []meta.NodeInfo, members []meta.Member) bool {
	if !n.id.Joined || n.member.Load() != nil || n.metaPeerURL == "" {
		return false
	}
	others := 0
	for _, m := range members {
		if slices.Contains(m.PeerURLs, n.metaPeerURL) {
			continue
		}
		if m.Learner {
			return false // promoted once it has started
		}
		others++
	}
	if others >= n.cfg.MetaMembers {
		return false
	}
	hasMember := func(nd meta.NodeInfo) bool {
		return slices.ContainsFunc(members, func(m meta.Member) bool { return slices.Contains(m.PeerURLs, nd.MetaPeerURL) })
	}
	for _, nd := range nodes {
		if nd.ID < n.id.NodeID && nd.State == meta.NodeUp && nd.MetaPeerURL != "" && !hasMember(nd) {
			return false // that node goes first
		}
	}
	return true
}

// topUpMeta makes this client node a member of the meta service: under
// the admission lock (a joiner's initial cluster must list every member),
// it adds itself as a learner, starts its embedded etcd member joined to
// the others, and saves that in its identity; reconcileMeta promotes it
// once it has started. A member left at its address by an earlier try
// that did not start is removed first. reconcileMeta's goroutine only.
func (n *Node) topUpMeta(ctx context.Context, ms membership) error {
	release, err := n.admissionLock(ctx)
	if err != nil {
		return fmt.Errorf("take the admission lock: %w", err)
	}
	defer release()
	members, err := ms.Members(ctx)
	if err != nil {
		return err
	}
	for _, m := range members {
		if slices.Contains(m.PeerURLs, n.metaPeerURL) {
			if err := ms.RemoveMember(ctx, m.ID); err != nil {
				return fmt.Errorf("remove the member an earlier try left: %w", err)
			}
			continue
		}
		if m.Learner || m.Name == "" {
			return nil // another member is being added: look again later
		}
	}
	urls, err := n.metaURLs()
	if err != nil {
		return err
	}
	learner, members, err := ms.AddLearner(ctx, n.metaPeerURL)
	if err != nil {
		return err
	}
	undo := func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ms.RemoveMember(rctx, learner)
	}
	opts := n.etcdOptions(urls)
	opts.InitialCluster, opts.Join = meta.InitialCluster(members, memberName(n.id.NodeID)), true
	es, err := n.startJoiningMember(opts)
	if err != nil {
		undo()
		_ = os.RemoveAll(opts.Dir)
		return fmt.Errorf("start a meta service member: %w", err)
	}
	id := n.savedIdentity()
	id.Member = true
	if err := n.writeIdentity(id); err != nil {
		_ = es.Close()
		undo()
		return err
	}
	n.member.Store(es)
	n.log.Info("this node is now a meta service member (a learner until promoted)", "member", memberName(n.id.NodeID))
	return nil
}
