package auth

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestKeyAllows(t *testing.T) {
	k := Key{Access: "AK1", Secret: "secret-12", Grants: map[string]string{"photos": Write, AllSpaces: Read}}
	for _, tc := range []struct {
		space, need string
		want        bool
	}{
		{"photos", Read, true}, {"photos", Write, true}, {"photos", Admin, false},
		{"logs", Read, true}, {"logs", Write, false}, {"logs", "bogus", false},
	} {
		if got := k.Allows(tc.space, tc.need); got != tc.want {
			t.Errorf("Allows(%s, %s) = %v", tc.space, tc.need, got)
		}
	}
	admin := Key{Access: "AK2", Secret: "secret-12", ClusterAdmin: true}
	if !admin.Allows("anything", Admin) || admin.Validate(nil) != nil {
		t.Fatal("a cluster admin without grants")
	}
	for _, bad := range []Key{
		{Access: "a", Secret: "secret-12", Grants: map[string]string{"x": Read}},
		{Access: "AKX", Secret: "short", Grants: map[string]string{"x": Read}},
		{Access: "AKX", Secret: "secret-12"},
		{Access: "AKX", Secret: "secret-12", Grants: map[string]string{"x": "owner"}},
		{Access: "A K", Secret: "secret-12", Grants: map[string]string{"x": Read}},
	} {
		if err := bad.Validate(nil); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Validate(%+v) = %v", bad, err)
		}
	}
	nk := NewKey()
	if len(nk.Access) != 20 || !strings.HasPrefix(nk.Access, "CAIRN") || len(nk.Secret) != 40 {
		t.Fatalf("NewKey: %+v", nk)
	}
}

func TestKeyring(t *testing.T) {
	var r Keyring
	if _, ok := r.Lookup("x"); ok || r.Gen() != 0 {
		t.Fatal("empty keyring")
	}
	grants := map[string]string{"a": Read}
	r.Set([]Key{{Access: "ROOT", Secret: "root-secret", ClusterAdmin: true}, {Access: "ROOT", Secret: "shadow"}, {Access: "K", Secret: "k-secret", Grants: grants}})
	grants["a"] = Admin // the keyring keeps its own copy
	if s, ok := r.Secret("ROOT"); !ok || s != "root-secret" {
		t.Fatalf("root secret %q %v (a later key must not shadow it)", s, ok)
	}
	if !r.Allowed("K", "a", Read) || r.Allowed("K", "a", Write) || !r.IsClusterAdmin("ROOT") || r.IsClusterAdmin("K") {
		t.Fatal("grants")
	}
	g := r.Gen()
	r.Set(nil)
	if r.Gen() == g || r.Len() != 0 {
		t.Fatal("Set did not replace the keys")
	}
}

func TestHandshakeProofs(t *testing.T) {
	tr := Transcript{Mech: MechHMACSHA256, Access: "AK", Client: NewNonce(), Server: NewNonce()}
	c, s := ClientProof("secret-1", &tr), ServerProof("secret-1", &tr)
	if c == s {
		t.Fatal("client and server proofs are equal: one could be reflected as the other")
	}
	if c != ClientProof("secret-1", &tr) {
		t.Fatal("proofs are not deterministic")
	}
	for name, change := range map[string]func(*Transcript){
		"access":  func(x *Transcript) { x.Access = "AL" },
		"client":  func(x *Transcript) { x.Client[3] ^= 1 },
		"server":  func(x *Transcript) { x.Server[31] ^= 1 },
		"binding": func(x *Transcript) { x.Binding = []byte{1} },
		"mech":    func(x *Transcript) { x.Mech = 2 },
	} {
		x := tr
		change(&x)
		if ClientProof("secret-1", &x) == c {
			t.Errorf("the proof does not cover the %s", name)
		}
	}
	if ClientProof("secret-2", &tr) == c {
		t.Error("the proof does not depend on the secret")
	}
	if !ProofsEqual(c[:], c[:]) || ProofsEqual(c[:], s[:]) {
		t.Error("ProofsEqual")
	}
}

func TestSeal(t *testing.T) {
	k := NewClusterKeys()
	sealed, err := k.Seal([]byte("the secret"), []byte("/cairn/keys/AK"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("the secret")) {
		t.Fatal("sealed value holds the plaintext")
	}
	if p, err := k.Open(sealed, []byte("/cairn/keys/AK")); err != nil || string(p) != "the secret" {
		t.Fatalf("open: %q %v", p, err)
	}
	if _, err := k.Open(sealed, []byte("/cairn/keys/OTHER")); !errors.Is(err, ErrSealed) {
		t.Fatalf("opened under another record's key: %v", err)
	}
	for i := range sealed {
		b := bytes.Clone(sealed)
		b[i] ^= 0x40
		if _, err := k.Open(b, []byte("/cairn/keys/AK")); err == nil {
			t.Fatalf("a flip at byte %d went unnoticed", i)
		}
	}
	if _, err := NewClusterKeys().Open(sealed, []byte("/cairn/keys/AK")); !errors.Is(err, ErrSealed) {
		t.Fatal("another cluster's key opened it")
	}
	r := k.Rotate()
	if r.Current() != 2 || k.Current() != 1 {
		t.Fatalf("rotate: %d %d", r.Current(), k.Current())
	}
	if p, err := r.Open(sealed, []byte("/cairn/keys/AK")); err != nil || string(p) != "the secret" {
		t.Fatal("a rotated keyring does not open what the old key sealed")
	}
	s2, _ := r.Seal([]byte("x"), nil)
	if id, _ := SealedWith(s2); id != 2 {
		t.Fatalf("sealed with %d after rotation", id)
	}
	if _, err := k.Open(s2, nil); !errors.Is(err, ErrUnknownClusterKey) || !errors.Is(err, ErrSealed) {
		t.Fatalf("a node without the new key: %v", err)
	}
	m, err := k.Merge(r)
	if err != nil || m.Current() != 1 || m.Newest() != 2 {
		t.Fatalf("merge: %v", err)
	}
	if u, err := m.Use(2); err != nil || u.Current() != 2 {
		t.Fatalf("use: %v", err)
	}
	if _, err := k.Use(7); err == nil {
		t.Fatal("used a key not held")
	}
	if _, err := k.Merge(NewClusterKeys()); err == nil {
		t.Fatal("merged two different keys with one id")
	}
	if d := r.Drop(2); len(d.IDs()) != 1 || d.Current() != 2 {
		t.Fatalf("drop: %v", d.IDs())
	}
}

func TestClusterKeysFile(t *testing.T) {
	k := NewClusterKeys().Rotate()
	k, _ = k.Use(1) // the current key is kept, whichever it is
	b := k.Marshal()
	back, err := ParseClusterKeys(b)
	if err != nil || back.Current() != 1 || len(back.IDs()) != 2 {
		t.Fatalf("round trip: %v %v", back, err)
	}
	sealed, _ := k.Seal([]byte("v"), nil)
	if p, err := back.Open(sealed, nil); err != nil || string(p) != "v" {
		t.Fatal("the parsed keys are not the same keys")
	}
	for i := range b {
		x := bytes.Clone(b)
		x[i] ^= 1
		if _, err := ParseClusterKeys(x); err == nil {
			t.Fatalf("a flip at byte %d went unnoticed", i)
		}
	}
	if _, err := ParseClusterKeys(b[:len(b)-1]); err == nil {
		t.Fatal("a truncated file parsed")
	}
}

func TestCAAndPeerTLS(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("c1", now)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseCA(ca.CertPEM, ca.KeyPEM)
	if err != nil || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("ParseCA: %v", err)
	}
	other, _ := NewCA("c2", now)
	if _, err := ParseCA(ca.CertPEM, other.KeyPEM); err == nil {
		t.Fatal("a CA with another CA's key parsed")
	}
	var strangerPEM, strangerKey []byte
	member := func(ca *CA, id uint64) *PeerTLS {
		key, _ := NewNodeKey()
		certPEM, err := ca.IssueNode(&key.PublicKey, id, []string{"127.0.0.1", "node1.example"}, now)
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, _ := KeyPEM(key)
		p, err := NewPeerTLS(ca, certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		strangerPEM, strangerKey = certPEM, keyPEM
		return p
	}
	a, b, stranger := member(ca, 1), member(ca, 2), member(other, 1)
	if !Covers(a.Cert.Leaf, []string{"127.0.0.1", "node1.example"}) || Covers(a.Cert.Leaf, []string{"10.9.9.9"}) {
		t.Fatal("Covers")
	}
	if _, err := NewPeerTLS(ca, strangerPEM, strangerKey); err == nil {
		t.Fatal("a certificate of another cluster was taken as this one's")
	}
	// handshake runs a TLS connection between a client and a server
	// configuration and returns the server's view of the client.
	handshake := func(client, server *tls.Config) (bool, error) {
		c1, c2 := net.Pipe()
		defer c1.Close()
		defer c2.Close()
		srvErr := make(chan error, 1)
		var member bool
		go func() {
			s := tls.Server(c2, server)
			err := s.Handshake()
			if err == nil {
				st := s.ConnectionState()
				member = Member(&st)
			}
			srvErr <- err
		}()
		cerr := tls.Client(c1, client).Handshake()
		serr := <-srvErr
		if cerr != nil {
			return false, cerr
		}
		return member, serr
	}
	if m, err := handshake(a.Client(), b.Server()); err != nil || !m {
		t.Fatalf("two members: member=%v %v", m, err)
	}
	if _, err := handshake(stranger.Client(), b.Server()); err == nil {
		t.Fatal("a node of another cluster passed as a member")
	}
	if _, err := handshake(a.Client(), stranger.Server()); err == nil {
		t.Fatal("a member accepted a server of another cluster")
	}
	// Without a client certificate the server takes the connection (a
	// joiner) but it is not a member.
	if m, err := handshake(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, b.Server()); err != nil || m {
		t.Fatalf("no client certificate: member=%v %v", m, err)
	}
}

func TestJoinToken(t *testing.T) {
	tok := NewJoinToken()
	back, err := ParseJoinToken(" " + tok.String() + "\n")
	if err != nil || back != tok {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	for _, bad := range []string{"", "cjt1.abc.def", "cjt2." + tok.ID + "." + tok.Secret, "cjt1." + strings.ToUpper(tok.ID) + "." + tok.Secret, tok.String() + "x"} {
		if _, err := ParseJoinToken(bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("ParseJoinToken(%q) = %v", bad, err)
		}
	}
	tr := JoinTranscript{TokenID: tok.ID, Client: NewNonce(), Server: NewNonce(), MemberCert: CertHash([]byte("cert"))}
	m, j := MemberProof(tok.Secret, &tr), JoinerProof(tok.Secret, &tr)
	if m == j {
		t.Fatal("member and joiner proofs are equal")
	}
	for name, change := range map[string]func(*JoinTranscript){
		"certificate": func(x *JoinTranscript) { x.MemberCert = CertHash([]byte("another cert")) },
		"binding":     func(x *JoinTranscript) { x.Binding = []byte("other session") },
		"nonce":       func(x *JoinTranscript) { x.Server[0] ^= 1 },
	} {
		x := tr
		change(&x)
		if MemberProof(tok.Secret, &x) == m || JoinerProof(tok.Secret, &x) == j {
			t.Errorf("the proofs do not cover the %s", name)
		}
	}
	x := tr
	x.Request = CertHash([]byte("another request"))
	if JoinerProof(tok.Secret, &x) == j {
		t.Error("the joiner's proof does not cover its request")
	}
}

func TestCredentialsFile(t *testing.T) {
	f, err := ParseCredentialsFile([]byte("# comment\n[default]\naccess_key = AK1\nsecret_key=S1 \n\n[profile other]\n; x\naccess_key = AK2\nsecret_key = S2\nserver = 10.0.0.1:7070\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := f.Profile("default"); p == nil || p.Get("access_key") != "AK1" || p.Get("secret_key") != "S1" {
		t.Fatalf("default: %+v", p)
	}
	if p := f.Profile("other"); p == nil || p.Get("server") != "10.0.0.1:7070" {
		t.Fatalf("other: %+v", p)
	}
	f.Rename("default", "default-old")
	n := f.Add("default")
	n.Set("access_key", "AK3")
	n.Set("secret_key", "S3")
	back, err := ParseCredentialsFile(f.Marshal())
	if err != nil || back.Profile("default").Get("access_key") != "AK3" || back.Profile("default-old").Get("secret_key") != "S1" || len(back.Profiles) != 3 {
		t.Fatalf("round trip: %s %v", f.Marshal(), err)
	}
	for _, bad := range []string{"access_key = x\n", "[default]\nnovalue\n", "[default]\n[default]\n", "[\n"} {
		if _, err := ParseCredentialsFile([]byte(bad)); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}
