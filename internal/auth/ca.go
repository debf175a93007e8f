package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// The cluster's certificate authority. The first node of a cluster makes
// it; every node that joins receives it (its key too, so that any node can
// admit the next), and a certificate of its own issued by it. Node-to-node
// gRPC and the meta service's peer and client ports use mutual TLS under
// it: only holders of a certificate it issued reach them.

const (
	caValidity   = 20 * 365 * 24 * time.Hour
	nodeValidity = 10 * 365 * 24 * time.Hour
)

// CA is the cluster's certificate authority.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	Key     *ecdsa.PrivateKey
	KeyPEM  []byte
}

// NewCA makes the authority of a new cluster.
func NewCA(cluster string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Cairn cluster " + cluster, Organization: []string{"Cairn"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyPEM, err := KeyPEM(key)
	if err != nil {
		return nil, err
	}
	return ParseCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM)
}

// ParseCA reads an authority from its PEM files.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("auth: cluster CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("auth: the cluster CA certificate is not a CA")
	}
	key, err := ParseKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("auth: cluster CA key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("auth: the cluster CA key does not match its certificate")
	}
	return &CA{Cert: cert, CertPEM: certPEM, Key: key, KeyPEM: keyPEM}, nil
}

// Pool is a pool holding the authority alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// NewNodeKey makes a node's private key.
func NewNodeKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// IssueNode issues node id's certificate for public key pub, valid for the
// host names and addresses hosts, for both ends of a TLS connection.
func (ca *CA) IssueNode(pub *ecdsa.PublicKey, id uint64, hosts []string, now time.Time) ([]byte, error) {
	if pub == nil || pub.Curve != elliptic.P256() {
		return nil, errors.New("auth: a node key must be ECDSA P-256")
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: fmt.Sprintf("cairn-node-%d", id), Organization: []string{"Cairn"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(nodeValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" && !slices.Contains(tmpl.DNSNames, h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// Covers reports whether cert names every host of hosts.
func Covers(cert *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if h != "" && cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// Issued reports whether cert was issued by ca (its signature checks).
func (ca *CA) Issued(cert *x509.Certificate) bool {
	_, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// KeyPEM encodes a private key.
func KeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseKeyPEM decodes an ECDSA private key.
func ParseKeyPEM(b []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		if ek, err2 := x509.ParseECPrivateKey(blk.Bytes); err2 == nil {
			return ek, nil
		}
		return nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an ECDSA key")
	}
	return ek, nil
}

// ParseCertPEM decodes the first certificate of b.
func ParseCertPEM(b []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}

// CertHash is the SHA-256 of a certificate's DER bytes.
func CertHash(der []byte) [32]byte { return sha256.Sum256(der) }

// PeerTLS holds the TLS configurations of a member of the cluster.
type PeerTLS struct {
	CA   *CA
	Cert tls.Certificate // this node's, with its key
}

// NewPeerTLS pairs a node's certificate and key with its authority.
func NewPeerTLS(ca *CA, certPEM, keyPEM []byte) (*PeerTLS, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("auth: node certificate: %w", err)
	}
	if !ca.Issued(cert.Leaf) {
		return nil, errors.New("auth: the node certificate was not issued by the cluster's CA")
	}
	return &PeerTLS{CA: ca, Cert: cert}, nil
}

// verifyMember checks that the peer's certificate chains to the cluster
// CA. The host name is not checked: every member is equally trusted, and
// a node may be reached under names its certificate does not list.
func (p *PeerTLS) verifyMember(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("auth: the peer sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: p.CA.Pool(), Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("auth: the peer is not a member of this cluster: %w", err)
	}
	return nil
}

// Server is the configuration of a member's servers (the peer port):
// its certificate; client certificates are verified when sent (a node
// joining has none yet), and callers require one where it matters
// (Member).
func (p *PeerTLS) Server() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.Cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    p.CA.Pool(),
		MinVersion:   tls.VersionTLS13,
	}
}

// Client is the configuration of a member's connections to other
// members: its certificate, and the other's checked against the CA.
func (p *PeerTLS) Client() *tls.Config {
	return &tls.Config{
		Certificates:       []tls.Certificate{p.Cert},
		InsecureSkipVerify: true, // verified by VerifyConnection, without host names
		VerifyConnection:   p.verifyMember,
		MinVersion:         tls.VersionTLS13,
	}
}

// Member reports whether a connection's client proved membership: it sent
// a certificate the server verified against the cluster CA.
func Member(cs *tls.ConnectionState) bool { return cs != nil && len(cs.VerifiedChains) > 0 }
