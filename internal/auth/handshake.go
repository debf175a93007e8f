package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"fmt"
)

// The native protocol's handshake (docs/protocol.md, "Authentication").
//
// The client names its access key and sends a fresh nonce (HELLO); the
// server answers with a fresh nonce of its own; the client proves it
// holds the key's secret with an HMAC over both nonces and the key id
// (AUTH), and the server answers with its own proof, so that the client
// knows it reached a server that holds the secret too. The HMAC key is
// derived from the secret, which never crosses the wire. On a TLS
// connection both proofs also cover keying material exported from the
// TLS session, so a proof is good on that one connection only: a relay
// that terminates TLS on both sides cannot pass it on.
//
//	K      = HMAC-SHA256(secret, "cairn native auth v1")
//	T      = "cairn-native-v1" | mech u8 | u16 len(access) | access |
//	         client nonce [32] | server nonce [32] | u8 len(binding) | binding
//	client = HMAC-SHA256(K, "client" | T)
//	server = HMAC-SHA256(K, "server" | T)
//
// binding is the TLS exporter's output (ExporterLabel, 32 bytes), or
// empty on plain TCP.

// Sizes of the handshake's fields.
const (
	NonceSize = 32
	ProofSize = sha256.Size
)

// MechHMACSHA256 is the handshake's only mechanism so far.
const MechHMACSHA256 = 1

// ExporterLabel is the TLS exporter label of the channel binding.
const ExporterLabel = "EXPORTER-cairn-native-auth"

// Nonce is a handshake nonce.
type Nonce [NonceSize]byte

// NewNonce returns a random nonce.
func NewNonce() Nonce {
	var n Nonce
	_, _ = rand.Read(n[:])
	return n
}

// Transcript is what both proofs cover.
type Transcript struct {
	Mech    byte
	Access  string
	Client  Nonce
	Server  Nonce
	Binding []byte // TLS keying material, or empty
}

// ChannelBinding returns the binding of a TLS connection's state, or nil
// for a connection without TLS (st nil).
func ChannelBinding(st *tls.ConnectionState) ([]byte, error) {
	if st == nil {
		return nil, nil
	}
	b, err := st.ExportKeyingMaterial(ExporterLabel, nil, 32)
	if err != nil {
		return nil, fmt.Errorf("auth: TLS channel binding: %w", err)
	}
	return b, nil
}

func (t *Transcript) bytes(side string) []byte {
	b := make([]byte, 0, len(side)+16+3+len(t.Access)+2*NonceSize+1+len(t.Binding))
	b = append(b, side...)
	b = append(b, "cairn-native-v1"...)
	b = append(b, t.Mech)
	b = binary.BigEndian.AppendUint16(b, uint16(len(t.Access)))
	b = append(b, t.Access...)
	b = append(b, t.Client[:]...)
	b = append(b, t.Server[:]...)
	b = append(b, byte(len(t.Binding)))
	return append(b, t.Binding...)
}

func proofKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("cairn native auth v1"))
	return m.Sum(nil)
}

func proof(secret, side string, t *Transcript) [ProofSize]byte {
	m := hmac.New(sha256.New, proofKey(secret))
	m.Write(t.bytes(side))
	var p [ProofSize]byte
	m.Sum(p[:0])
	return p
}

// ClientProof is the proof the client sends in AUTH.
func ClientProof(secret string, t *Transcript) [ProofSize]byte { return proof(secret, "client", t) }

// ServerProof is the proof the server answers AUTH with.
func ServerProof(secret string, t *Transcript) [ProofSize]byte { return proof(secret, "server", t) }

// ProofsEqual compares two proofs in constant time.
func ProofsEqual(a, b []byte) bool { return hmac.Equal(a, b) }
