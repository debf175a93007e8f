package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/transport"
	"github.com/cairn-db/cairn/internal/wire"
)

// TestJoinByInvitation: a node joins only with a valid join token; a
// one-time token admits one node; a refused joiner changes nothing in the
// cluster map or the meta service.
func TestJoinByInvitation(t *testing.T) {
	ctx := context.Background()
	first := openNode(t, clusterConfig(t, ""))
	members := func() int {
		ms, err := first.meta.(membership).Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ms)
	}
	nodes := func() int {
		ns, err := first.catalog.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ns)
	}

	cfg := clusterConfig(t, first.PeerAddr())
	cfg.JoinToken = ""
	if _, err := openStarted(ctx, cfg); err == nil || !strings.Contains(err.Error(), "needs a join token") {
		t.Fatalf("a join without a token: %v", err)
	}
	cfg = clusterConfig(t, first.PeerAddr())
	cfg.JoinToken = auth.NewJoinToken().String() // well formed, but made by nobody
	if _, err := openStarted(ctx, cfg); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a join with an unknown token: %v", err)
	}
	// The right id with a wrong secret: the member's proof fails first.
	bad := auth.NewJoinToken()
	made, err := first.CreateToken(ctx, wire.TokenSpec{TTLSeconds: 600, Uses: 1})
	if err != nil {
		t.Fatal(err)
	}
	good, err := auth.ParseJoinToken(made.Token)
	if err != nil {
		t.Fatal(err)
	}
	bad.ID = good.ID
	cfg = clusterConfig(t, first.PeerAddr())
	cfg.JoinToken = bad.String()
	if _, err := openStarted(ctx, cfg); err == nil || !strings.Contains(err.Error(), "could not prove") {
		t.Fatalf("a join with a wrong secret: %v", err)
	}
	if n, m := nodes(), members(); n != 1 || m != 1 {
		t.Fatalf("after refused joins: %d nodes, %d meta members", n, m)
	}

	cfg = clusterConfig(t, first.PeerAddr())
	cfg.JoinToken = made.Token
	second := openNode(t, cfg)
	if second.NodeID() == first.NodeID() || nodes() != 2 {
		t.Fatalf("joined as node %d; %d nodes", second.NodeID(), nodes())
	}
	cfg = clusterConfig(t, first.PeerAddr())
	cfg.JoinToken = made.Token
	if _, err := openStarted(ctx, cfg); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a one-time token used twice: %v", err)
	}
	if ts, _ := first.ListTokens(ctx); len(ts) != 1 || ts[0].Uses != -1 {
		t.Fatalf("tokens after the one-time token's use: %+v (want the bootstrap token alone)", ts)
	}
}

// TestMembersOnly: the peer port and the meta service's client port take
// only connections with a certificate from the cluster's CA; the access
// keys' secrets are sealed in the meta service.
func TestMembersOnly(t *testing.T) {
	ctx := context.Background()
	n := openNode(t, clusterConfig(t, ""))
	if _, err := n.CreateKey(ctx, wire.KeySpec{Access: "SEALEDKEY", Secret: "sealed-secret-123", Grants: map[string]string{"*": "read"}}); err != nil {
		t.Fatal(err)
	}

	// The peer API: no certificate, another cluster's, then a member's.
	call := func(conf *tls.Config) error {
		c := &transport.Caller{TLS: func() *tls.Config { return conf }}
		defer c.Close()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := c.Call(cctx, n.PeerAddr(), object.ChunkService, "Has", make([]byte, 32))
		return err
	}
	err := call(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if !strings.Contains(err.Error(), "members only") {
		t.Fatalf("a peer call without a certificate: %v", err)
	}
	stranger := strangerTLS(t)
	if err := call(stranger.Client()); err == nil || status.Code(err) == codes.OK {
		t.Fatalf("a peer call with another cluster's certificate: %v", err)
	}
	if err := call(n.peerClientTLS()); err != nil {
		t.Fatalf("a member's peer call: %v", err)
	}

	// The meta service's client port (what etcdctl would reach).
	ep := fmt.Sprintf("https://127.0.0.1:%d", n.cfg.MetaClientPort)
	etcd := func(conf *tls.Config) error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: time.Second, TLS: conf})
		if err != nil {
			return err
		}
		defer cli.Close()
		cctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		_, err = cli.Get(cctx, "/cairn/keys/", clientv3.WithPrefix())
		return err
	}
	if err := etcd(&tls.Config{InsecureSkipVerify: true}); err == nil {
		t.Fatal("an etcd client without a member certificate read the meta service")
	}
	if err := etcd(stranger.Client()); err == nil {
		t.Fatal("an etcd client with another cluster's certificate read the meta service")
	}
	if err := etcd(n.peerClientTLS()); err != nil {
		t.Fatalf("an etcd client with a member's certificate: %v", err)
	}
	plain := fmt.Sprintf("http://127.0.0.1:%d", n.cfg.MetaClientPort)
	if cli, err := clientv3.New(clientv3.Config{Endpoints: []string{plain}, DialTimeout: time.Second}); err == nil {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = cli.Get(cctx, "/cairn/keys/", clientv3.WithPrefix())
		cancel()
		cli.Close()
		if err == nil {
			t.Fatal("a plain-text etcd client read the meta service")
		}
	}

	// Secrets at rest: no record of the meta service holds one in clear.
	kvs, err := n.meta.List(ctx, meta.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	root := n.RootKey()
	for _, kv := range kvs {
		for _, secret := range []string{"sealed-secret-123", root.Secret, testToken[len("cjt1.testtokn."):]} {
			if bytes.Contains(kv.Value, []byte(secret)) {
				t.Fatalf("%s holds a secret in clear: %s", kv.Key, kv.Value)
			}
		}
	}
}

func strangerTLS(t *testing.T) *auth.PeerTLS {
	t.Helper()
	ca, err := auth.NewCA("stranger", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, _ := auth.NewNodeKey()
	certPEM, _ := ca.IssueNode(&key.PublicKey, 1, []string{"127.0.0.1"}, time.Now())
	keyPEM, _ := auth.KeyPEM(key)
	p, err := auth.NewPeerTLS(ca, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKeyRotation: rotating the cluster key hands it to every node and
// seals every secret under it, each node still reading all of them (and a
// node that joins afterwards too); rotating the root key retires the old
// one on every node; a rotation with a node down is refused.
func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	nodes := clusterOf(t, 2)
	a, b := nodes[0], nodes[1]
	if _, err := a.CreateKey(ctx, wire.KeySpec{Access: "ROTATED", Secret: "rotated-secret", Grants: map[string]string{"*": "read"}}); err != nil {
		t.Fatal(err)
	}
	r, err := b.RotateClusterKey(ctx)
	if err != nil || r.KeyID != 2 || r.Nodes != 2 || r.Resealed < 3 {
		t.Fatalf("rotate the cluster key: %+v %v", r, err)
	}
	for _, n := range nodes {
		if k := n.sec.keys.Load(); k.Current() != 2 {
			t.Fatalf("node %d seals with key %d", n.NodeID(), k.Current())
		}
		if err := n.refreshKeys(ctx); err != nil {
			t.Fatalf("node %d reads the keys: %v", n.NodeID(), err)
		}
		if k, ok := n.keys.Lookup("ROTATED"); !ok || k.Secret != "rotated-secret" {
			t.Fatalf("node %d lost the key", n.NodeID())
		}
	}
	kvs, err := a.meta.List(ctx, meta.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, meta.Prefix+"keys/") || kv.Key == meta.Prefix+"rootkey" || strings.HasPrefix(kv.Key, meta.Prefix+"tokens/") {
			var rec struct{ Sealed []byte }
			if err := json.Unmarshal(kv.Value, &rec); err != nil {
				t.Fatal(err)
			}
			if id, _ := auth.SealedWith(rec.Sealed); id != 2 {
				t.Fatalf("%s is sealed with key %d after the rotation", kv.Key, id)
			}
		}
	}
	// A node that missed the rotation (admitted while it ran) learns the
	// new key from another node when it meets a value sealed with it.
	before, err := b.sec.keys.Load().Use(1)
	if err != nil {
		t.Fatal(err)
	}
	b.sec.keys.Store(mustKeys(t, before, 1)) // key 1 alone, as before the rotation
	if err := b.refreshKeys(ctx); err != nil {
		t.Fatalf("refresh on a node without the new key: %v", err)
	}
	if k, ok := b.keys.Lookup("ROTATED"); !ok || k.Secret != "rotated-secret" || b.sec.keys.Load().Newest() != 2 {
		t.Fatal("the node did not learn the new cluster key from the other")
	}

	third := openNode(t, clusterConfig(t, a.PeerAddr()))
	if k, ok := third.keys.Lookup("ROTATED"); !ok || k.Secret != "rotated-secret" || third.sec.keys.Load().Current() != 2 {
		t.Fatal("a node that joined after the rotation does not read the secrets")
	}

	old := a.RootKey()
	nk, err := a.RotateRootKey(ctx)
	if err != nil || nk.Access == old.Access {
		t.Fatalf("rotate the root key: %+v %v", nk, err)
	}
	if err := b.refreshKeys(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.keys.Lookup(old.Access); ok {
		t.Fatal("the old root key still works")
	}
	if k, ok := b.keys.Lookup(nk.Access); !ok || !k.ClusterAdmin || k.Secret != nk.Secret {
		t.Fatal("the new root key does not work")
	}

	// A node that is not up (here, draining) cannot take a new key.
	if err := a.NodeAdmin(ctx, wire.NodeDrain, third.NodeID()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RotateClusterKey(ctx); err == nil || !strings.Contains(err.Error(), "must be up") {
		t.Fatalf("a rotation with a node draining: %v", err)
	}
	if a.sec.keys.Load().Current() != 2 {
		t.Fatal("a refused rotation changed the cluster key")
	}
}

// mustKeys returns keys with only key id kept (a node's keys before a
// rotation).
func mustKeys(t *testing.T, keys *auth.ClusterKeys, id uint32) *auth.ClusterKeys {
	t.Helper()
	only, err := auth.ParseClusterKeys(keys.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range only.IDs() {
		if k != id {
			only = only.DropID(k)
		}
	}
	return only
}
