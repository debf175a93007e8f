package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/clock"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/transport"
)

// adminService is the peer gRPC service of control calls between nodes.
const adminService = "cairn.Admin"

// Joining is by invitation (docs/security.md). The joining node reaches a
// member's peer port over TLS without a certificate of its own, and the
// two prove to each other that they hold the join token's secret, both
// proofs covering the member's certificate (package auth, token.go):
//
//	joiner -> JoinChallenge {token id, joiner's nonce}
//	       <- {member's nonce, member's proof}     joiner checks the proof
//	joiner -> Join {token id, member's nonce, joiner's proof, public key, ...}
//	       <- {node id, meta service endpoints, CA, node certificate, cluster keys}
//
// The member takes a use of the token only once the proof checks, under
// the admission lock, and gives it back if the admission then fails.

// joinChallenge is JoinChallenge's request and answer.
type joinChallenge struct {
	V       int    `json:"v"`
	TokenID string `json:"token_id"`
	Nonce   []byte `json:"nonce"`
	Proof   []byte `json:"proof,omitempty"` // the answer's
}

// joinRequest is what a joining node sends to any node of the cluster.
type joinRequest struct {
	V           int      `json:"v"`
	TokenID     string   `json:"token_id"`
	Nonce       []byte   `json:"nonce"` // the member's, from JoinChallenge
	Proof       []byte   `json:"proof"`
	PublicKey   []byte   `json:"public_key"` // PKIX DER of the node's ECDSA key
	Hosts       []string `json:"hosts"`      // the names its certificate is for
	MetaPeerURL string   `json:"meta_peer_url"`
	Zone        string   `json:"zone"`
}

// joinResponse tells a joining node who it is, how to reach the meta
// service and the cluster's secrets. InitialCluster is empty when it gets
// no etcd member (the cluster already has five).
type joinResponse struct {
	V              int      `json:"v"`
	NodeID         uint64   `json:"node_id,string"`
	Cluster        string   `json:"cluster"`
	InitialCluster string   `json:"initial_cluster"`
	Endpoints      []string `json:"endpoints"`
	CACert         []byte   `json:"ca_cert"`
	CAKey          []byte   `json:"ca_key"`
	NodeCert       []byte   `json:"node_cert"`
	ClusterKeys    []byte   `json:"cluster_keys"`
}

// hash is the SHA-256 of what the request asks for (the joiner's proof
// covers it, so nothing between can change it).
func (r *joinRequest) hash() [32]byte {
	h := sha256.New()
	field := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field(r.PublicKey)
	for _, host := range r.Hosts {
		field([]byte(host))
	}
	field(nil)
	field([]byte(r.MetaPeerURL))
	field([]byte(r.Zone))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// membership is what a meta.Store offers for changing the meta service's
// members (EtcdStore does; MemStore does not).
type membership interface {
	Members(ctx context.Context) ([]meta.Member, error)
	AddLearner(ctx context.Context, peerURL string) (uint64, []meta.Member, error)
	Promote(ctx context.Context, id uint64) error
	RemoveMember(ctx context.Context, id uint64) error
}

// challenges are the JoinChallenges this node answered and whose Join has
// not come yet, by the member's nonce; each answers one Join within
// challengeTTL.
type challenges struct {
	mu sync.Mutex
	m  map[auth.Nonce]challenge
}

type challenge struct {
	tokenID string
	joiner  auth.Nonce
	expires time.Time
}

const challengeTTL = time.Minute

// put keeps a challenge; it reports false when too many are pending.
func (c *challenges) put(nonce auth.Nonce, ch challenge, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[auth.Nonce]challenge{}
	}
	for k, v := range c.m {
		if now.After(v.expires) {
			delete(c.m, k)
		}
	}
	if len(c.m) >= maxChallenges {
		return false
	}
	c.m[nonce] = ch
	return true
}

// maxChallenges bounds the join challenges pending on a node.
const maxChallenges = 1024

func (c *challenges) take(nonce auth.Nonce, now time.Time) (challenge, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.m[nonce]
	delete(c.m, nonce)
	return ch, ok && !now.After(ch.expires)
}

// ownCertHash is the hash of the certificate this node's peer port shows.
func (n *Node) ownCertHash() [32]byte { return auth.CertHash(n.sec.peer.Load().Cert.Certificate[0]) }

// errJoinDenied is the joiner's answer for a token that does not admit it.
func errJoinDenied(why string) error {
	return fmt.Errorf("%w: %s", transport.ErrDenied, why)
}

// handleJoinChallenge answers a joining node's challenge with this node's
// nonce and its proof that it knows the token.
func (n *Node) handleJoinChallenge(ctx context.Context, b []byte) ([]byte, error) {
	var req joinChallenge
	if err := json.Unmarshal(b, &req); err != nil || req.V != 1 || !auth.ValidTokenID(req.TokenID) || len(req.Nonce) != auth.NonceSize {
		return nil, errJoinDenied("malformed join challenge")
	}
	tok, _, err := n.catalog.GetToken(ctx, req.TokenID)
	if errors.Is(err, meta.ErrTokenInvalid) {
		return nil, errJoinDenied("the join token is unknown here, expired or used up: make a new one with `cairn cluster token create`")
	}
	if err != nil {
		return nil, err
	}
	binding, err := auth.JoinBinding(transport.PeerTLS(ctx))
	if err != nil {
		return nil, errJoinDenied(err.Error())
	}
	tr := auth.JoinTranscript{TokenID: req.TokenID, Server: auth.NewNonce(), MemberCert: n.ownCertHash(), Binding: binding}
	copy(tr.Client[:], req.Nonce)
	if !n.joins.put(tr.Server, challenge{tokenID: req.TokenID, joiner: tr.Client, expires: n.cfg.Clock().Add(challengeTTL)}, n.cfg.Clock()) {
		return nil, fmt.Errorf("too many joins under way here: %w", transport.ErrBusy)
	}
	proof := auth.MemberProof(tok.Secret, &tr)
	return json.Marshal(joinChallenge{V: 1, TokenID: req.TokenID, Nonce: tr.Server[:], Proof: proof[:]})
}

// handleJoin admits a new node that proved it holds a join token: it
// allocates its id, issues its certificate and, while the meta service has
// fewer than five members, adds the node's etcd member as a learner
// (promoted by reconcileMeta once it has caught up).
func (n *Node) handleJoin(ctx context.Context, b []byte) ([]byte, error) {
	var req joinRequest
	if err := json.Unmarshal(b, &req); err != nil || req.V != 1 || req.MetaPeerURL == "" || len(req.Nonce) != auth.NonceSize {
		return nil, errJoinDenied(fmt.Sprintf("malformed join request (%v)", err))
	}
	var nonce auth.Nonce
	copy(nonce[:], req.Nonce)
	ch, ok := n.joins.take(nonce, n.cfg.Clock())
	if !ok || ch.tokenID != req.TokenID {
		return nil, fmt.Errorf("no join challenge of this node matches the request (it expired, or went to another node): start again: %w", transport.ErrBusy)
	}
	tok, _, err := n.catalog.GetToken(ctx, req.TokenID)
	if errors.Is(err, meta.ErrTokenInvalid) {
		return nil, errJoinDenied("the join token is unknown here, expired or used up")
	}
	if err != nil {
		return nil, err
	}
	binding, err := auth.JoinBinding(transport.PeerTLS(ctx))
	if err != nil {
		return nil, errJoinDenied(err.Error())
	}
	tr := auth.JoinTranscript{TokenID: req.TokenID, Client: ch.joiner, Server: nonce, MemberCert: n.ownCertHash(),
		Binding: binding, Request: req.hash()}
	want := auth.JoinerProof(tok.Secret, &tr)
	if !auth.ProofsEqual(want[:], req.Proof) {
		// The joiner checked this node's proof with the token, so it
		// holds the secret: what differs is the connection (a new one
		// since the challenge, or a relay) or the request (altered).
		n.log.Warn("refused a join whose proof does not check on its connection", "token", auth.DescribeToken(req.TokenID), "meta_peer_url", req.MetaPeerURL)
		return nil, fmt.Errorf("the join's proof does not check on this connection (it changed since the challenge, or something between altered it): start again: %w", transport.ErrBusy)
	}
	pub, err := parseNodeKey(req.PublicKey)
	if err != nil {
		return nil, errJoinDenied(err.Error())
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
	// The token's use is taken under the lock, and given back if the
	// admission fails after it.
	tok, rev, err := n.catalog.GetToken(ctx, req.TokenID)
	if errors.Is(err, meta.ErrTokenInvalid) {
		return nil, errJoinDenied("the join token was used up meanwhile")
	}
	if err != nil {
		return nil, err
	}
	if err := n.catalog.UseToken(ctx, tok, rev); err != nil {
		return nil, fmt.Errorf("take a use of the join token: %v: %w", err, transport.ErrBusy)
	}
	resp, err := n.admit(ctx, ms, &req, pub)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if rerr := n.catalog.RestoreToken(rctx, tok.ID); rerr != nil {
			n.log.Warn("could not give back the join token's use after a failed admission", "err", rerr)
		}
		return nil, err
	}
	return resp, nil
}

// admit makes a proven joiner a member: meta membership, node id,
// certificate, and the answer with the cluster's secrets. The admission
// lock is held.
func (n *Node) admit(ctx context.Context, ms membership, req *joinRequest, pub *ecdsa.PublicKey) (_ []byte, err error) {
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
		var learner uint64
		// A member change waits for the meta service's leader; one that
		// is changing (a promotion just made, an election) answers late
		// or not at all: the joiner is told to come back, well within
		// its own wait.
		actx, cancel := context.WithTimeout(ctx, addLearnerWait)
		learner, members, err = ms.AddLearner(actx, req.MetaPeerURL)
		cancel()
		if err != nil && learner != 0 {
			// Added, but the members could not be listed after: the
			// member goes, or it would hold every later admission.
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			if rerr := ms.RemoveMember(rctx, learner); rerr != nil {
				n.log.Warn("could not remove the meta member of a failed admission", "err", rerr)
			}
			rcancel()
		}
		if err != nil {
			if strings.Contains(err.Error(), "unhealthy cluster") || meta.Unsettled(err) ||
				errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				// etcd refuses a member change until the members have
				// been connected a few seconds after the last one; or
				// it had no leader to take it (if it took it all the
				// same, the joiner's next try replaces the member).
				return nil, fmt.Errorf("%v: %w", err, transport.ErrBusy)
			}
			return nil, err
		}
		// A learner that will never start would block every later
		// admission: it goes if this one fails from here on.
		defer func() {
			if err != nil {
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if rerr := ms.RemoveMember(rctx, learner); rerr != nil {
					n.log.Warn("could not remove the meta member of a failed admission", "err", rerr)
				}
			}
		}()
	}
	// The id comes last, so a refused admission uses none up.
	id, err := n.catalog.AllocNodeID(ctx)
	if err != nil {
		return nil, err
	}
	cert, err := n.sec.ca.IssueNode(pub, id, req.Hosts, n.cfg.Clock())
	if err != nil {
		return nil, err
	}
	resp := joinResponse{V: 1, NodeID: id, Cluster: n.id.Cluster, Endpoints: endpoints,
		CACert: n.sec.ca.CertPEM, CAKey: n.sec.ca.KeyPEM, NodeCert: cert, ClusterKeys: n.sec.keys.Load().Marshal()}
	if member {
		resp.InitialCluster = meta.InitialCluster(members, memberName(id))
	}
	n.log.Info("node joining", "node", id, "meta_member", resp.InitialCluster != "", "zone", req.Zone, "token", auth.DescribeToken(req.TokenID))
	return json.Marshal(resp)
}

func parseNodeKey(der []byte) (*ecdsa.PublicKey, error) {
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("the joining node's public key: %v", err)
	}
	ek, ok := k.(*ecdsa.PublicKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, errors.New("the joining node's key must be ECDSA P-256")
	}
	return ek, nil
}

// admissionLock takes the cluster-wide lock of meta membership changes
// (waiting up to 10s; held at most 30s) and returns its release.
func (n *Node) admissionLock(ctx context.Context) (release func(), err error) {
	return n.clusterLock(ctx, "join", 30*time.Second)
}

// addLearnerWait bounds adding a joiner's meta member; the joiner waits
// 30 s for its whole admission.
const addLearnerWait = 10 * time.Second

func memberName(id uint64) string { return fmt.Sprintf("node-%d", id) }

// join asks the node at cfg.Join to admit this one with cfg.JoinToken,
// and saves the identity and the security material it is given.
func (n *Node) join(ctx context.Context) (*joinResponse, error) {
	tok, err := auth.ParseJoinToken(n.cfg.JoinToken)
	if err != nil {
		return nil, err
	}
	urls, err := n.metaURLs()
	if err != nil {
		return nil, err
	}
	key, err := auth.NewNodeKey()
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	keyPEM, err := auth.KeyPEM(key)
	if err != nil {
		return nil, err
	}
	// The member is not known yet: its certificate is taken as it comes
	// (the first one seen is the only one taken from then on), and the
	// member proves it knows the token over it and over the session.
	var seen atomic.Pointer[[32]byte]
	caller := &transport.Caller{TLS: func() *tls.Config {
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("the node sent no certificate")
				}
				h := auth.CertHash(cs.PeerCertificates[0].Raw)
				if !seen.CompareAndSwap(nil, &h) && *seen.Load() != h {
					return errors.New("the node's certificate changed during the join")
				}
				return nil
			}}
	}}
	defer caller.Close()
	attempt := func() ([]byte, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		mine := auth.NewNonce()
		cb, _ := json.Marshal(joinChallenge{V: 1, TokenID: tok.ID, Nonce: mine[:]})
		b, st, err := caller.CallTLS(cctx, n.cfg.Join, adminService, "JoinChallenge", cb)
		if err != nil {
			return nil, err
		}
		var ans joinChallenge
		if err := json.Unmarshal(b, &ans); err != nil || len(ans.Nonce) != auth.NonceSize {
			return nil, fmt.Errorf("malformed answer to the join challenge (%v)", err)
		}
		binding, err := auth.JoinBinding(st)
		if err != nil {
			return nil, err
		}
		tr := auth.JoinTranscript{TokenID: tok.ID, Client: mine, MemberCert: auth.CertHash(st.PeerCertificates[0].Raw), Binding: binding}
		copy(tr.Server[:], ans.Nonce)
		if want := auth.MemberProof(tok.Secret, &tr); !auth.ProofsEqual(want[:], ans.Proof) {
			return nil, fmt.Errorf("%w: the node could not prove it knows the join token: it is not the cluster the token is from, or something between is impersonating it", transport.ErrDenied)
		}
		// The request goes on the same session: the proof binds it.
		jr := joinRequest{V: 1, TokenID: tok.ID, Nonce: ans.Nonce, PublicKey: pub,
			Hosts: n.certHosts(), MetaPeerURL: urls.peer, Zone: n.cfg.Zone}
		tr.Request = jr.hash()
		proof := auth.JoinerProof(tok.Secret, &tr)
		jr.Proof = proof[:]
		jb, _ := json.Marshal(jr)
		return caller.Call(cctx, n.cfg.Join, adminService, "Join", jb)
	}
	deadline := n.cfg.Clock().Add(2 * time.Minute)
	var b []byte
	for backoff := 200 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		b, err = attempt()
		if err == nil {
			break
		}
		if errors.Is(err, transport.ErrDenied) {
			return nil, fmt.Errorf("join the cluster at %s: refused: %w", n.cfg.Join, err)
		}
		// Busy, or an attempt that ran out of time (the admitting node
		// waited on the meta service): the admission is tried again.
		retry := errors.Is(err, transport.ErrBusy) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
		if !retry || n.cfg.Clock().After(deadline) {
			return nil, fmt.Errorf("join the cluster at %s: %w (is a cairn node listening there on its peer port?)", n.cfg.Join, err)
		}
		n.log.Info("another node is joining; waiting to join", "retry", backoff)
		if err := clock.Sleep(ctx, backoff); err != nil {
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
	if err := n.adoptSecurity(resp.CACert, resp.CAKey, resp.NodeCert, keyPEM, resp.ClusterKeys); err != nil {
		return nil, err
	}
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
	u := func(host string, port int) string { return "https://" + net.JoinHostPort(host, fmt.Sprint(port)) }
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
	cli, err := meta.DialEtcd(meta.DialOptions{Endpoints: eps, Name: memberName(n.id.NodeID), Logger: n.log, TLS: n.peerClientTLS()})
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
		Logger:   n.log,
		CertFile: n.secPath(nodeCertFile), KeyFile: n.secPath(nodeKeyFile), CAFile: n.secPath(caCertFile),
	}
}

// securePeerURL moves this node's meta member to its https peer URL when
// its data was written before the meta service used TLS (its member list
// says http). Only a cluster of one member can be moved in place: the
// others would no longer reach it.
func (n *Node) securePeerURL(ctx context.Context, upgraded bool) error {
	es, ok := n.meta.(*meta.EtcdStore)
	if !ok || n.metaPeerURL == "" {
		if err := n.cfg.FS.Remove(n.secPath(upgradeMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	members, err := es.Members(ctx)
	if err != nil {
		return err
	}
	if _, err := n.cfg.FS.Stat(n.secPath(upgradeMarker)); err == nil {
		upgraded = true // an earlier start secured the data and did not get here
	}
	if upgraded && len(members) > 1 {
		return fmt.Errorf("the data directory %s is from a version of Cairn whose clusters had no security material, and its meta service has %d members: a cluster of several nodes cannot be secured in place. Start a new cluster and copy the data over (for example with rclone through the S3 API)", n.cfg.DataDir, len(members))
	}
	for _, m := range members {
		if m.Name != memberName(n.id.NodeID) || slices.Contains(m.PeerURLs, n.metaPeerURL) {
			continue
		}
		if err := es.UpdatePeerURLs(ctx, m.ID, []string{n.metaPeerURL}); err != nil {
			return fmt.Errorf("move this node's meta member to %s: %w", n.metaPeerURL, err)
		}
		n.log.Info("the meta member's peer URL now uses TLS", "peer_url", n.metaPeerURL)
	}
	if upgraded {
		if err := n.cfg.FS.Remove(n.secPath(upgradeMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
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
	// A call the meta service never answers (a request lost in a
	// leadership change) must not stop the loop for good.
	ctx, cancel := context.WithTimeout(ctx, reconcileMetaTimeout)
	defer cancel()
	nodes, err := n.catalog.Nodes(ctx)
	if err != nil {
		return
	}
	members, err := ms.Members(ctx)
	if err != nil {
		return
	}
	n.followMembers(members)
	if n.dropUnstarted(ctx, ms, members) {
		return // the members changed: look again next time
	}
	nodes = slices.DeleteFunc(nodes, func(nd meta.NodeInfo) bool { return nd.State == meta.NodeRemoved })
	voters := 0
	for _, m := range members {
		if !m.Learner {
			voters++
		}
	}
	for id := range n.promoteFailed {
		if !slices.ContainsFunc(members, func(m meta.Member) bool { return m.ID == id && m.Learner }) {
			delete(n.promoteFailed, id)
		}
	}
	target := n.targetVoters(len(nodes))
	for _, m := range members {
		if voters >= target {
			break
		}
		if m.Learner && m.Name != "" { // started and known by name
			pctx, cancel := context.WithTimeout(ctx, promoteTimeout)
			err := ms.Promote(pctx, m.ID)
			cancel()
			if err == nil {
				n.log.Info("meta service member promoted to voter", "member", m.Name)
				voters++
				continue
			}
			n.promoteFailedLog(m, err)
		}
	}
	if voters < target && n.topUpCandidate(nodes, members) {
		if err := n.topUpMeta(ctx, ms); err != nil {
			n.log.Warn("could not become a meta service member", "err", err)
		}
	}
}

// reconcileMetaTimeout bounds one pass of reconcileMeta (longer than
// an admission holds its lock, which topUpMeta takes), and promoteTimeout
// one promotion.
const (
	reconcileMetaTimeout = time.Minute
	promoteTimeout       = 5 * time.Second
)

// promoteFailedLog notes that learner m could not be promoted. A learner
// is refused until it has caught up with the leader's log, so a failure
// says nothing at first; one that lasts is logged every
// promoteWarnEvery, with the time it has lasted.
func (n *Node) promoteFailedLog(m meta.Member, err error) {
	now := n.cfg.Clock()
	if n.promoteFailed == nil {
		n.promoteFailed = map[uint64]promoteFailure{}
	}
	f, ok := n.promoteFailed[m.ID]
	if !ok {
		f = promoteFailure{first: now, logged: now}
	}
	if now.Sub(f.logged) >= promoteWarnEvery {
		n.log.Warn("could not promote a meta service learner to voter", "member", m.Name, "failing_for", now.Sub(f.first).Round(time.Second), "err", err)
		f.logged = now
	}
	n.promoteFailed[m.ID] = f
}

// promoteFailure is when a learner's promotion first failed, and when
// that was last logged.
type promoteFailure struct{ first, logged time.Time }

// promoteWarnEvery is how often a learner that cannot be promoted is
// logged.
const promoteWarnEvery = 10 * time.Second

// dropUnstarted removes a meta member that has been added but not
// started for Config.MemberStartGrace (a joiner admitted that never came
// back: while it is listed, no other node can be admitted). It reports
// whether it removed one.
func (n *Node) dropUnstarted(ctx context.Context, ms membership, members []meta.Member) bool {
	now := n.cfg.Clock()
	seen := make(map[uint64]time.Time, len(n.unstarted))
	dropped := false
	for _, m := range members {
		if m.Name != "" {
			continue
		}
		first, ok := n.unstarted[m.ID]
		if !ok {
			first = now
		}
		seen[m.ID] = first
		if now.Sub(first) < n.cfg.MemberStartGrace {
			continue
		}
		if err := ms.RemoveMember(ctx, m.ID); err != nil {
			n.log.Warn("could not remove a meta member that never started", "peer_urls", m.PeerURLs, "err", err)
			continue
		}
		n.log.Warn("removed a meta member that never started: its node was admitted but never came up", "peer_urls", m.PeerURLs, "unstarted_for", now.Sub(first).Round(time.Second))
		delete(seen, m.ID)
		dropped = true
	}
	n.unstarted = seen
	return dropped
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
