package cluster

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/internal/admin"
	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/meta"
	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/storage"
)

// The node's share of the cluster's secrets, in its data directory:
//
//	tls/ca.crt, tls/ca.key      the cluster's certificate authority; every
//	                            node holds its key, so that any node can
//	                            admit the next one
//	tls/node.crt, tls/node.key  this node's certificate (issued by the CA
//	                            for its host names and addresses) and key
//	cluster.keys                the cluster keys the meta service's secrets
//	                            are sealed with (auth's format: magic,
//	                            version, checksum)
//
// Keys are written readable by the owner alone. The first node of a
// cluster makes them; a node that joins receives them in the join's
// answer, over TLS, after both sides proved they hold the join token.
const (
	tlsDir       = "tls"
	caCertFile   = "tls/ca.crt"
	caKeyFile    = "tls/ca.key"
	nodeCertFile = "tls/node.crt"
	nodeKeyFile  = "tls/node.key"
	keysFile     = "cluster.keys"
	// upgradeMarker stays while a data directory of an earlier version is
	// being secured, until its meta service is known to be one member.
	upgradeMarker = "tls/upgrading"
)

var securityFiles = []string{caCertFile, caKeyFile, nodeCertFile, nodeKeyFile, keysFile}

// security is the node's loaded security material.
type security struct {
	ca   *auth.CA
	peer atomic.Pointer[auth.PeerTLS]
	keys atomic.Pointer[auth.ClusterKeys]
}

func (n *Node) secPath(name string) string { return filepath.Join(n.cfg.DataDir, name) }

// loadSecurity reads the material; found is false when there is none (a
// new node, or data written before clusters had security). Some files
// without the others is damage.
func (n *Node) loadSecurity() (found bool, err error) {
	var missing []string
	data := map[string][]byte{}
	for _, f := range securityFiles {
		b, err := storage.ReadFile(n.cfg.FS, n.secPath(f))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				missing = append(missing, f)
				continue
			}
			return false, fmt.Errorf("read %s: %w", n.secPath(f), err)
		}
		data[f] = b
	}
	switch len(missing) {
	case len(securityFiles):
		return false, nil
	case 0:
	default:
		return false, fmt.Errorf("the data directory %s lacks %v of the node's security material; it is damaged", n.cfg.DataDir, missing)
	}
	ca, err := auth.ParseCA(data[caCertFile], data[caKeyFile])
	if err != nil {
		return false, err
	}
	keys, err := auth.ParseClusterKeys(data[keysFile])
	if err != nil {
		return false, fmt.Errorf("%s: %w", n.secPath(keysFile), err)
	}
	peer, err := auth.NewPeerTLS(ca, data[nodeCertFile], data[nodeKeyFile])
	if err != nil {
		return false, err
	}
	n.sec.ca = ca
	n.sec.keys.Store(keys)
	n.sec.peer.Store(peer)
	if !auth.Covers(peer.Cert.Leaf, n.certHosts()) {
		// The node is reached under another name or address than its
		// certificate names (--advertise changed): issue a new one.
		if err := n.issueOwnCert(data[nodeKeyFile]); err != nil {
			return false, fmt.Errorf("renew this node's certificate for %v: %w", n.certHosts(), err)
		}
		n.log.Info("issued this node a certificate for its current names", "hosts", n.certHosts())
	}
	return true, nil
}

// newSecurity makes the material of a new cluster (or of the first node of
// a cluster made before clusters had security).
func (n *Node) newSecurity() error {
	ca, err := auth.NewCA(n.id.Cluster, n.cfg.Clock())
	if err != nil {
		return err
	}
	n.sec.ca = ca
	key, err := auth.NewNodeKey()
	if err != nil {
		return err
	}
	keyPEM, err := auth.KeyPEM(key)
	if err != nil {
		return err
	}
	keys := auth.NewClusterKeys()
	if err := n.saveKeys(keys); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
		priv bool
	}{{caCertFile, ca.CertPEM, false}, {caKeyFile, ca.KeyPEM, true}} {
		if err := n.writeSecFile(f.name, f.data, f.priv); err != nil {
			return err
		}
	}
	return n.issueOwnCert(keyPEM)
}

// adoptSecurity saves the material a join's answer brought, with the node
// key made for the join.
func (n *Node) adoptSecurity(caCert, caKey, nodeCert, nodeKey, clusterKeys []byte) error {
	ca, err := auth.ParseCA(caCert, caKey)
	if err != nil {
		return fmt.Errorf("the join's answer: %w", err)
	}
	keys, err := auth.ParseClusterKeys(clusterKeys)
	if err != nil {
		return fmt.Errorf("the join's answer: %w", err)
	}
	peer, err := auth.NewPeerTLS(ca, nodeCert, nodeKey)
	if err != nil {
		return fmt.Errorf("the join's answer: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		priv bool
	}{{caCertFile, caCert, false}, {caKeyFile, caKey, true}, {nodeCertFile, nodeCert, false}, {nodeKeyFile, nodeKey, true}} {
		if err := n.writeSecFile(f.name, f.data, f.priv); err != nil {
			return err
		}
	}
	if err := n.saveKeys(keys); err != nil {
		return err
	}
	n.sec.ca = ca
	n.sec.peer.Store(peer)
	return nil
}

// issueOwnCert issues this node a certificate for its names with the CA
// it holds, and saves it with its key.
func (n *Node) issueOwnCert(keyPEM []byte) error {
	key, err := auth.ParseKeyPEM(keyPEM)
	if err != nil {
		return err
	}
	certPEM, err := n.sec.ca.IssueNode(&key.PublicKey, n.id.NodeID, n.certHosts(), n.cfg.Clock())
	if err != nil {
		return err
	}
	peer, err := auth.NewPeerTLS(n.sec.ca, certPEM, keyPEM)
	if err != nil {
		return err
	}
	if err := n.writeSecFile(nodeKeyFile, keyPEM, true); err != nil {
		return err
	}
	if err := n.writeSecFile(nodeCertFile, certPEM, false); err != nil {
		return err
	}
	n.sec.peer.Store(peer)
	return nil
}

// saveKeys writes the cluster keys and makes them the node's.
func (n *Node) saveKeys(keys *auth.ClusterKeys) error {
	if err := n.writeSecFile(keysFile, keys.Marshal(), true); err != nil {
		return err
	}
	n.sec.keys.Store(keys)
	return nil
}

func (n *Node) writeSecFile(name string, data []byte, private bool) error {
	if err := storage.MkdirAllSync(n.cfg.FS, n.secPath(tlsDir)); err != nil {
		return err
	}
	if n.cfg.FS == vfs.Default {
		if err := os.Chmod(n.secPath(tlsDir), 0o700); err != nil {
			return err
		}
	}
	return storage.WriteFileSync(n.cfg.FS, n.secPath(name), data, private)
}

// certHosts are the names and addresses this node's certificate must
// cover: the advertised host, the listen address, the machine's name and
// loopback.
func (n *Node) certHosts() []string {
	hosts := []string{n.advertiseHost(), "localhost", "127.0.0.1", "::1"}
	if ip := net.ParseIP(n.cfg.Listen); ip == nil || !ip.IsUnspecified() {
		hosts = append(hosts, n.cfg.Listen)
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// peerServerTLS and peerClientTLS are the configurations of node-to-node
// connections (the peer port).
func (n *Node) peerServerTLS() *tls.Config {
	p := n.sec.peer.Load()
	cfg := p.Server()
	// A certificate renewed while running is served to new connections.
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		c := n.sec.peer.Load().Cert
		return &c, nil
	}
	cfg.Certificates = nil
	return cfg
}

func (n *Node) peerClientTLS() *tls.Config {
	p := n.sec.peer.Load()
	if p == nil {
		// No certificate yet (a node still joining): nothing verifies.
		return &tls.Config{MinVersion: tls.VersionTLS13, VerifyConnection: func(tls.ConnectionState) error {
			return errors.New("this node has no cluster certificate yet")
		}}
	}
	return p.Client()
}

// keyBox seals and opens the meta service's secrets with the node's
// current cluster keys (meta.SecretBox).
type keyBox struct{ n *Node }

func (b keyBox) Seal(p, ad []byte) ([]byte, error) { return b.n.sec.keys.Load().Seal(p, ad) }

// Open opens a sealed value; one sealed under a cluster key this node
// does not hold yet (another node rotated the key while this one was
// joining) is opened once the node has learned the keys from another.
func (b keyBox) Open(s, ad []byte) ([]byte, error) {
	p, err := b.n.sec.keys.Load().Open(s, ad)
	if !errors.Is(err, auth.ErrUnknownClusterKey) {
		return p, err
	}
	if ferr := b.n.learnClusterKeys(); ferr != nil {
		return nil, fmt.Errorf("%w (and learning the cluster keys from another node failed: %v)", err, ferr)
	}
	return b.n.sec.keys.Load().Open(s, ad)
}

// learnClusterKeys merges in the cluster keys of the first other node that
// gives them, at most every few seconds.
func (n *Node) learnClusterKeys() error {
	n.keysMu.Lock()
	if n.cfg.Clock().Sub(n.keysLearned) < 5*time.Second {
		n.keysMu.Unlock()
		return errors.New("tried a moment ago")
	}
	n.keysLearned = n.cfg.Clock()
	n.keysMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, nd := range n.peers.view() {
		if nd.ID == n.id.NodeID || nd.State == meta.NodeRemoved {
			continue
		}
		b, err := n.callNode(ctx, nd.ID, adminService, "ClusterKeys", []byte{keysGet}, 5*time.Second)
		if err == nil {
			_, err = n.takeClusterKeys(keysLearn, b)
		}
		if err == nil {
			n.log.Info("learned the cluster keys from another node", "from", nd.ID, "current", n.sec.keys.Load().Current())
			return nil
		}
		errs = append(errs, fmt.Errorf("node %d: %w", nd.ID, err))
	}
	return errors.Join(append(errs, errors.New("no other node gave its cluster keys"))...)
}

// sealSecrets seals what earlier versions kept in clear (and what an
// older cluster key sealed) under the current key.
func (n *Node) sealSecrets(ctx context.Context) {
	cur := n.sec.keys.Load().Current()
	stale := func(sealed []byte) bool { id, _ := auth.SealedWith(sealed); return id != cur }
	k, err := n.catalog.SealSecrets(ctx, stale)
	if err != nil {
		n.log.Warn("could not seal the meta service's secrets under the cluster key; trying again at the next start", "err", err)
		return
	}
	if k == 0 {
		return
	}
	n.log.Info("sealed secrets under the cluster key", "records", k)
	// The values they replaced stay in the meta service's history until
	// it is compacted: drop it now.
	if f, ok := n.meta.(interface{ Forget(context.Context) error }); ok {
		if err := f.Forget(ctx); err != nil {
			n.log.Warn("could not compact the meta service's history of the secrets just sealed", "err", err)
		}
	}
}

// RotateClusterKey implements admin.KeyRotator. Every node of the map must
// be up. This node first learns every other node's keys (so the new key's
// id is new everywhere), then the new key goes to every node in two steps,
// so that no node meets a value sealed with a key it does not hold: first
// every node learns it (still sealing with the old one, this node first),
// then every node seals with it. Then every secret in the meta service is
// sealed again under it and the meta service's history of the old sealed
// values is compacted. Admissions wait meanwhile (a node being admitted
// gets the keys as they are after).
func (n *Node) RotateClusterKey(ctx context.Context) (admin.ClusterKeyRotation, error) {
	release, err := n.clusterLock(ctx, "rotate-cluster-key", 5*time.Minute)
	if err != nil {
		return admin.ClusterKeyRotation{}, object.Errorf(object.Unavailable, "another rotation is under way: %v", err)
	}
	defer release()
	admissions, err := n.admissionLock(ctx)
	if err != nil {
		return admin.ClusterKeyRotation{}, object.Errorf(object.Unavailable, "a node is being admitted: %v; try again", err)
	}
	defer admissions()
	nodes, err := n.catalog.Nodes(ctx)
	if err != nil {
		return admin.ClusterKeyRotation{}, object.Unreachable("meta service", err)
	}
	var others []uint64
	for _, nd := range nodes {
		switch {
		case nd.State == meta.NodeRemoved || nd.ID == n.id.NodeID:
		case nd.State != meta.NodeUp:
			return admin.ClusterKeyRotation{}, object.Errorf(object.Unavailable, "node %d is %s: every node must be up to receive the new cluster key", nd.ID, nd.State)
		default:
			others = append(others, nd.ID)
		}
	}
	call := func(id uint64, body []byte) ([]byte, error) {
		b, err := n.callNode(ctx, id, adminService, "ClusterKeys", body, 10*time.Second)
		if err != nil {
			return nil, object.Errorf(object.Unavailable, "node %d did not take part in the rotation (%v); nothing is sealed under a new key yet: try again", id, err)
		}
		return b, nil
	}
	for _, id := range others {
		b, err := call(id, []byte{keysGet})
		if err == nil {
			_, err = n.takeClusterKeys(keysLearn, b)
		}
		if err != nil {
			return admin.ClusterKeyRotation{}, err
		}
	}
	cur := n.sec.keys.Load()
	next := cur.Rotate()
	learn, err := next.Use(cur.Current())
	if err != nil {
		return admin.ClusterKeyRotation{}, err
	}
	if _, err := n.takeClusterKeys(keysLearn, learn.Marshal()); err != nil {
		return admin.ClusterKeyRotation{}, err
	}
	for _, id := range others {
		if _, err := call(id, append([]byte{keysLearn}, learn.Marshal()...)); err != nil {
			return admin.ClusterKeyRotation{}, err
		}
	}
	use := binary.BigEndian.AppendUint32(nil, next.Current())
	for _, id := range others {
		if _, err := call(id, append([]byte{keysUse}, use...)); err != nil {
			return admin.ClusterKeyRotation{}, err
		}
	}
	if _, err := n.takeClusterKeys(keysUse, use); err != nil {
		return admin.ClusterKeyRotation{}, err
	}
	n.log.Info("cluster key rotated; sealing the meta service's secrets under it", "key", next.Current(), "nodes", len(others)+1)
	now := next.Current()
	resealed, err := n.catalog.SealSecrets(ctx, func(sealed []byte) bool { id, _ := auth.SealedWith(sealed); return id != now })
	if err != nil {
		return admin.ClusterKeyRotation{}, fmt.Errorf("every node holds cluster key %d, but sealing the secrets under it stopped: %w (run the rotation again)", now, err)
	}
	if f, ok := n.meta.(interface{ Forget(context.Context) error }); ok {
		if err := f.Forget(ctx); err != nil {
			n.log.Warn("could not compact the meta service's history of the secrets sealed again", "err", err)
		}
	}
	return admin.ClusterKeyRotation{KeyID: now, Nodes: len(others) + 1, Resealed: resealed}, nil
}

// The steps of handing cluster keys between nodes (peer call ClusterKeys:
// the step byte, then its body).
const (
	keysLearn = 1 // body: a cluster key file; the keys are merged in, the current key stays
	keysUse   = 2 // body: key id u32; that key seals from now on
	keysGet   = 3 // no body; answer: the node's cluster key file
)

// handleClusterKeys takes a step of a cluster key rotation another node
// leads, or gives this node's keys (members only: the peer port checks
// the caller's certificate).
func (n *Node) handleClusterKeys(_ context.Context, b []byte) ([]byte, error) {
	if len(b) < 1 {
		return nil, errors.New("empty cluster keys request")
	}
	return n.takeClusterKeys(b[0], b[1:])
}

func (n *Node) takeClusterKeys(step byte, body []byte) ([]byte, error) {
	n.keysMu.Lock()
	defer n.keysMu.Unlock()
	cur := n.sec.keys.Load()
	var next *auth.ClusterKeys
	var err error
	switch step {
	case keysGet:
		return cur.Marshal(), nil
	case keysLearn:
		var got *auth.ClusterKeys
		if got, err = auth.ParseClusterKeys(body); err == nil {
			next, err = cur.Merge(got)
		}
	case keysUse:
		if len(body) != 4 {
			return nil, errors.New("malformed cluster key id")
		}
		next, err = cur.Use(binary.BigEndian.Uint32(body))
	default:
		return nil, fmt.Errorf("unknown cluster keys step %d", step)
	}
	if err != nil {
		return nil, err
	}
	if err := n.saveKeys(next); err != nil {
		return nil, err
	}
	if step == keysUse && next.Current() != cur.Current() {
		n.log.Info("sealing with a new cluster key", "key", next.Current())
	}
	return nil, nil
}

// clusterLock takes the cluster-wide lock name of the meta service
// (waiting up to 10s; held at most hold, should this node stop) and
// returns its release.
func (n *Node) clusterLock(ctx context.Context, name string, hold time.Duration) (release func(), err error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	lock, err := n.meta.Campaign(lctx, name, hold)
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
