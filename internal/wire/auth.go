package wire

import (
	"crypto/tls"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
)

// Authentication (docs/protocol.md, section 7): a connection proves it
// holds an access key's secret with HELLO and AUTH before any other
// request but PING; each request is then checked against the key's
// grants. The proofs are package auth's.
//
//	HELLO request = mech u8 (1), access str, client nonce [32]
//	HELLO answer  = server nonce [32]
//	AUTH request  = proof [32]
//	AUTH answer   = server proof [32], idle timeout ms u32, cluster_admin bool, grants map

// HelloRequest is HELLO's body.
type HelloRequest struct {
	Mech   uint8
	Access string
	Nonce  auth.Nonce
}

// AppendHello encodes a HELLO body.
func AppendHello(b []byte, r *HelloRequest) []byte {
	b = append(b, r.Mech)
	b = appendStr(b, r.Access)
	return append(b, r.Nonce[:]...)
}

// DecodeHello decodes a HELLO body.
func DecodeHello(b []byte) (HelloRequest, error) {
	d := newDecoder(b)
	var r HelloRequest
	r.Mech = d.u8("mechanism")
	r.Access = d.str("access key")
	copy(r.Nonce[:], d.take(auth.NonceSize, "nonce"))
	if err := d.done(); err != nil {
		return HelloRequest{}, err
	}
	return r, nil
}

// AuthResult is AUTH's answer.
type AuthResult struct {
	Proof        [auth.ProofSize]byte
	IdleTimeout  time.Duration // the server closes connections idle this long
	ClusterAdmin bool
	Grants       map[string]string
}

// AppendAuthResult encodes an AUTH answer.
func AppendAuthResult(b []byte, r *AuthResult) []byte {
	b = append(b, r.Proof[:]...)
	b = appendU32(b, uint32(min(r.IdleTimeout.Milliseconds(), 1<<32-1)))
	b = appendBool(b, r.ClusterAdmin)
	return appendMap(b, r.Grants)
}

// DecodeAuthResult decodes an AUTH answer.
func DecodeAuthResult(b []byte) (AuthResult, error) {
	d := newDecoder(b)
	var r AuthResult
	copy(r.Proof[:], d.take(auth.ProofSize, "server proof"))
	r.IdleTimeout = time.Duration(d.u32("idle timeout")) * time.Millisecond
	r.ClusterAdmin = d.boolean("cluster admin")
	r.Grants = d.strMap("grants")
	if err := d.done(); err != nil {
		return AuthResult{}, err
	}
	return r, nil
}

// errAuthFailed is the one answer to a failed AUTH, whatever failed (no
// such key, wrong secret), so that keys cannot be probed.
func errAuthFailed() *Error {
	return Errorf(CodeUnauthenticated, "authentication failed: no such access key, or the wrong secret for it")
}

// connAuth is a server connection's authentication state. The reader
// goroutine owns it; access is set before the first request is handed to
// a handler, so handlers read it without a lock.
type connAuth struct {
	hello    *auth.Transcript // after HELLO, until AUTH
	known    bool             // HELLO named a key that exists
	access   string           // the authenticated key; "" until AUTH succeeds
	secret   string           // its secret then: a key made again under the same id is another key
	strikes  int              // failed AUTHs and requests before authentication
	authed   bool
	tlsState *tls.ConnectionState
}

// hello answers HELLO: the server's nonce (also for an unknown key, so
// that AUTH fails the same way for both).
func (c *serverConn) hello(h Header, body []byte) {
	a := &c.auth
	if c.s.opts.Keys == nil {
		c.sendError(h.Op, h.ID, Errorf(CodeInvalidArgument, "this server takes no authentication"))
		return
	}
	if a.authed {
		c.sendError(h.Op, h.ID, Errorf(CodeInvalidArgument, "the connection is already authenticated"))
		return
	}
	req, err := DecodeHello(body)
	if err != nil {
		c.sendError(h.Op, h.ID, err.(*Error))
		return
	}
	if req.Mech != auth.MechHMACSHA256 {
		c.sendError(h.Op, h.ID, Errorf(CodeInvalidArgument, "authentication mechanism %d is not known here (1: HMAC-SHA256)", req.Mech))
		return
	}
	binding, berr := auth.ChannelBinding(a.tlsState)
	if berr != nil {
		c.sendError(h.Op, h.ID, Errorf(CodeInternal, "%v", berr))
		return
	}
	_, a.known = c.s.opts.Keys.Lookup(req.Access)
	a.hello = &auth.Transcript{Mech: req.Mech, Access: req.Access, Client: req.Nonce, Server: auth.NewNonce(), Binding: binding}
	c.send(h.Op, FlagResponse, h.ID, append([]byte(nil), a.hello.Server[:]...))
}

// authenticate answers AUTH. It returns an *Error when the connection must
// close (too many failures); the answer has been queued.
func (c *serverConn) authenticate(h Header, body []byte) error {
	a := &c.auth
	if c.s.opts.Keys == nil {
		c.sendError(h.Op, h.ID, Errorf(CodeInvalidArgument, "this server takes no authentication"))
		return nil
	}
	if a.authed {
		c.sendError(h.Op, h.ID, Errorf(CodeInvalidArgument, "the connection is already authenticated"))
		return nil
	}
	tr := a.hello
	a.hello = nil // a HELLO answers one AUTH
	if tr == nil {
		c.sendError(h.Op, h.ID, Errorf(CodeInvalidArgument, "send HELLO before AUTH"))
		return c.strike()
	}
	if len(body) != auth.ProofSize {
		c.sendError(h.Op, h.ID, Errorf(CodeMalformed, "AUTH carries a %d-byte proof, not %d bytes", auth.ProofSize, len(body)))
		return c.strike()
	}
	key, ok := c.s.opts.Keys.Lookup(tr.Access)
	if !ok || !a.known {
		// As much work as a wrong secret, so that time tells nothing.
		auth.ClientProof("no such key", tr)
		c.sendError(h.Op, h.ID, errAuthFailed())
		return c.strike()
	}
	want := auth.ClientProof(key.Secret, tr)
	if !auth.ProofsEqual(want[:], body) {
		c.sendError(h.Op, h.ID, errAuthFailed())
		return c.strike()
	}
	a.access, a.secret, a.authed = tr.Access, key.Secret, true
	c.authedAt.Store(true)
	c.s.log.Debug("wire: authenticated", "remote", c.nc.RemoteAddr(), "access", tr.Access)
	res := AuthResult{Proof: auth.ServerProof(key.Secret, tr), IdleTimeout: c.s.opts.IdleTimeout, ClusterAdmin: key.ClusterAdmin, Grants: key.Grants}
	c.send(h.Op, FlagResponse, h.ID, AppendAuthResult(nil, &res))
	return nil
}

// strike counts a failure to authenticate; past the limit the connection
// is closed (after the answers queued so far).
func (c *serverConn) strike() error {
	c.auth.strikes++
	if c.auth.strikes >= c.s.opts.MaxAuthFailures {
		c.s.log.Info("wire: closing a connection that failed to authenticate", "remote", c.nc.RemoteAddr(), "failures", c.auth.strikes)
		return Errorf(CodeUnauthenticated, "too many failures")
	}
	return nil
}

// key is the connection's key as the keyring has it now (so a key
// removed meanwhile stops working), or an error for the answer. The
// lookup is kept until the keyring changes.
func (c *serverConn) key() (*auth.Key, *Error) {
	if c.s.opts.AllowUnauthenticated {
		return nil, nil
	}
	gen := c.s.opts.Keys.Gen()
	if k := c.keyAt.Load(); k != nil && k.gen == gen {
		return k.key, nil
	}
	k, ok := c.s.opts.Keys.Lookup(c.auth.access)
	if !ok || k.Secret != c.auth.secret {
		return nil, Errorf(CodeUnauthenticated, "access key %s was removed (or replaced) since the connection authenticated", c.auth.access)
	}
	c.keyAt.Store(&keyAt{gen: gen, key: k})
	return k, nil
}

// keyAt is a key as the keyring of generation gen had it.
type keyAt struct {
	gen uint64
	key *auth.Key
}

// allow checks that the connection's key may do need on space.
func (c *serverConn) allow(space, need string) *Error {
	k, err := c.key()
	if err != nil || k == nil {
		return err
	}
	if !k.Allows(space, need) {
		return Errorf(CodeAccessDenied, "access key %s may not %s space %q (it needs the %s grant: cairn key create --grant %s=%s)", k.Access, verb(need), space, need, space, need)
	}
	return nil
}

// allowCluster checks that the connection's key is a cluster admin.
func (c *serverConn) allowCluster(what string) *Error {
	k, err := c.key()
	if err != nil || k == nil {
		return err
	}
	if !k.ClusterAdmin {
		return Errorf(CodeAccessDenied, "access key %s may not %s: that needs the cluster-admin grant", k.Access, what)
	}
	return nil
}

func verb(need string) string {
	switch need {
	case auth.Read:
		return "read"
	case auth.Write:
		return "write to"
	}
	return "administer"
}

// needOf is the permission an object operation needs.
func needOf(op Op) string {
	switch op {
	case OpPut, OpDelete:
		return auth.Write
	case OpCreateSpace, OpDeleteSpace:
		return auth.Admin
	}
	return auth.Read
}
