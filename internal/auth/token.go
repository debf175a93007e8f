package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
)

// Join tokens. A node joins a cluster only with a token made by a cluster
// admin (`cairn cluster token create`), which names the token and holds
// its secret:
//
//	cjt1.<id: 8 base32 characters>.<secret: 32 base32 characters, 160 bits>
//
// The secret never crosses the wire. The joining node reaches any member's
// peer port over TLS without a certificate of its own (it has none yet),
// so it cannot check the member's certificate against a CA it does not
// know; instead the two prove to each other that they hold the token's
// secret. Each proof covers both sides' nonces, the hash of the
// certificate the member presented and keying material exported from the
// TLS session it travels on; the joiner's proof also covers the hash of
// its request (its public key, names and addresses). A machine in the
// middle presents another certificate, or terminates TLS and has other
// keying material, so it can neither pass a proof on nor make one of its
// own, nor change the request; and the joiner accepts, within one join,
// only the certificate it saw first.
//
//	T      = "cairn-join-v1" | u8 len(id) | id | client nonce | server nonce |
//	         SHA-256(member's certificate) | u8 len(binding) | binding
//	member = HMAC-SHA256(secret, "member" | T)               (binding: the challenge's session)
//	joiner = HMAC-SHA256(secret, "joiner" | T | request hash) (binding: the join's session)
//
// The member answers the joiner's nonce with its proof first; the joiner
// checks it before it sends its own (and then the request to join).

// JoinExporterLabel is the TLS exporter label of the join's channel
// binding.
const JoinExporterLabel = "EXPORTER-cairn-join"

// JoinBinding returns the channel binding of a TLS session for the join
// proofs.
func JoinBinding(st *tls.ConnectionState) ([]byte, error) {
	if st == nil {
		return nil, errors.New("auth: a join must go over TLS")
	}
	b, err := st.ExportKeyingMaterial(JoinExporterLabel, nil, 32)
	if err != nil {
		return nil, fmt.Errorf("auth: TLS channel binding: %w", err)
	}
	return b, nil
}

const (
	tokenPrefix   = "cjt1"
	tokenIDLen    = 8
	tokenSecretLn = 32
	base32Lower   = "abcdefghijklmnopqrstuvwxyz234567"
)

// ErrBadToken is returned by ParseJoinToken.
var ErrBadToken = errors.New("not a join token (they look like cjt1.xxxxxxxx.<32 characters>; make one with: cairn cluster token create)")

// JoinToken is a join token's id and secret.
type JoinToken struct {
	ID, Secret string
}

// NewJoinToken makes a random token.
func NewJoinToken() JoinToken {
	return JoinToken{ID: randomString(tokenIDLen, base32Lower), Secret: randomString(tokenSecretLn, base32Lower)}
}

func (t JoinToken) String() string { return tokenPrefix + "." + t.ID + "." + t.Secret }

// ParseJoinToken reads a token as String writes it.
func ParseJoinToken(s string) (JoinToken, error) {
	p := strings.Split(strings.TrimSpace(s), ".")
	if len(p) != 3 || p[0] != tokenPrefix || len(p[1]) != tokenIDLen || len(p[2]) != tokenSecretLn || !isBase32(p[1]) || !isBase32(p[2]) {
		return JoinToken{}, ErrBadToken
	}
	return JoinToken{ID: p[1], Secret: p[2]}, nil
}

// ValidTokenID reports whether id can name a token.
func ValidTokenID(id string) bool { return len(id) == tokenIDLen && isBase32(id) }

func isBase32(s string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(base32Lower, rune(s[i])) {
			return false
		}
	}
	return true
}

// JoinTranscript is what both join proofs cover.
type JoinTranscript struct {
	TokenID        string
	Client, Server Nonce
	MemberCert     [32]byte // SHA-256 of the member's certificate (DER)
	Binding        []byte   // JoinBinding of the TLS session the proof travels on
	Request        [32]byte // the joiner's proof only: SHA-256 of its request's contents
}

func (t *JoinTranscript) bytes(side string) []byte {
	b := make([]byte, 0, 128+len(t.TokenID)+2*NonceSize+len(t.Binding))
	b = append(b, side...)
	b = append(b, "cairn-join-v1"...)
	b = append(b, byte(len(t.TokenID)))
	b = append(b, t.TokenID...)
	b = append(b, t.Client[:]...)
	b = append(b, t.Server[:]...)
	b = append(b, t.MemberCert[:]...)
	b = append(b, byte(len(t.Binding)))
	b = append(b, t.Binding...)
	if side == "joiner" {
		b = append(b, t.Request[:]...)
	}
	return b
}

func joinProof(secret, side string, t *JoinTranscript) [ProofSize]byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(t.bytes(side))
	var p [ProofSize]byte
	m.Sum(p[:0])
	return p
}

// MemberProof is the proof a member answers a joiner's challenge with.
func MemberProof(secret string, t *JoinTranscript) [ProofSize]byte {
	return joinProof(secret, "member", t)
}

// JoinerProof is the proof a joining node sends with its request.
func JoinerProof(secret string, t *JoinTranscript) [ProofSize]byte {
	return joinProof(secret, "joiner", t)
}

// DescribeToken is a token's id for logs and listings (never the secret).
func DescribeToken(id string) string { return fmt.Sprintf("%s.%s.…", tokenPrefix, id) }
