package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Unary handles one unary method of a peer service: request bytes in,
// response bytes out. An error reaches the caller as its message.
type Unary func(ctx context.Context, req []byte) ([]byte, error)

// RegisterUnary adds a service of unary methods to s (created with
// ServerOptions), for control traffic between nodes (join, timestamps).
func RegisterUnary(s *grpc.Server, service string, methods map[string]Unary) {
	desc := &grpc.ServiceDesc{ServiceName: service, HandlerType: (*any)(nil)}
	for name, h := range methods {
		run := func(ctx context.Context, req any) (any, error) {
			out, err := h(ctx, req.(*frame).b)
			switch {
			case errors.Is(err, ErrNotFound):
				return nil, status.Error(codes.NotFound, err.Error())
			case errors.Is(err, ErrCorrupt):
				return nil, status.Error(codes.DataLoss, err.Error())
			case errors.Is(err, ErrBusy):
				return nil, status.Error(codes.ResourceExhausted, err.Error())
			case errors.Is(err, ErrDenied):
				return nil, status.Error(codes.PermissionDenied, strings.TrimPrefix(err.Error(), ErrDenied.Error()+": "))
			case err != nil:
				return nil, err
			}
			return &frame{b: out}, nil
		}
		info := &grpc.UnaryServerInfo{FullMethod: "/" + service + "/" + name}
		desc.Methods = append(desc.Methods, grpc.MethodDesc{
			MethodName: name,
			Handler: func(_ any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
				in := &frame{}
				if err := dec(in); err != nil {
					return nil, err
				}
				// The server's interceptor (ServerOptions: members only)
				// runs around the method, as generated code does.
				if intercept != nil {
					return intercept(ctx, in, info, run)
				}
				return run(ctx, in)
			},
		})
	}
	s.RegisterService(desc, nil)
}

// Caller makes unary calls to other nodes, keeping one connection per
// address.
type Caller struct {
	// TLS returns the configuration of its connections (nil function or
	// result: plain TCP). Set it before the first call.
	TLS   func() *tls.Config
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// Errors a unary handler returns to tell the caller what happened; Call
// returns them (wrapped) on the calling side.
var (
	ErrNotFound = errors.New("not found")
	ErrCorrupt  = errors.New("corrupt")
	// ErrNotSent is returned by Try when the node could not be reached
	// at all: the request was not sent, so it had no effect.
	ErrNotSent = errors.New("not sent")
	// ErrBusy asks the caller to try again shortly.
	ErrBusy = errors.New("busy")
	// ErrDenied: the node refused the caller (not a member, a wrong join
	// token).
	ErrDenied = errors.New("denied")
	// ErrUnknownMethod: the node does not serve the method (a node of an
	// earlier version); nothing was done.
	ErrUnknownMethod = errors.New("unknown method")
)

// Call invokes service/method on the node at addr, waiting for the
// connection to come up for as long as ctx allows.
func (c *Caller) Call(ctx context.Context, addr, service, method string, req []byte) ([]byte, error) {
	return c.invoke(ctx, addr, service, method, req, true)
}

// CallTLS is Call that also returns the state of the TLS connection the
// call went over (its peer's certificate, its keying material).
func (c *Caller) CallTLS(ctx context.Context, addr, service, method string, req []byte) ([]byte, *tls.ConnectionState, error) {
	var p grpcpeer.Peer
	b, err := c.invoke(ctx, addr, service, method, req, true, grpc.Peer(&p))
	if err != nil {
		return nil, nil, err
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil, nil, fmt.Errorf("%s/%s on %s: the call did not go over TLS", service, method, addr)
	}
	return b, &ti.State, nil
}

// PeerTLS returns the TLS state of the connection a unary handler's
// request came over, or nil.
func PeerTLS(ctx context.Context) *tls.ConnectionState {
	if p, ok := grpcpeer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			return &ti.State
		}
	}
	return nil
}

// Try is Call that fails at once when the node cannot be reached, rather
// than waiting for it to come up (for calls that have somewhere else to go).
func (c *Caller) Try(ctx context.Context, addr, service, method string, req []byte) ([]byte, error) {
	return c.invoke(ctx, addr, service, method, req, false)
}

func (c *Caller) invoke(ctx context.Context, addr, service, method string, req []byte, wait bool, opts ...grpc.CallOption) ([]byte, error) {
	cc, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	var out frame
	if err := cc.Invoke(ctx, "/"+service+"/"+method, &frame{b: req}, &out, append(opts, grpc.WaitForReady(wait))...); err != nil {
		if st, ok := status.FromError(err); ok {
			switch st.Code() {
			case codes.NotFound:
				return nil, fmt.Errorf("%s/%s on %s: %w: %s", service, method, addr, ErrNotFound, st.Message())
			case codes.DataLoss:
				return nil, fmt.Errorf("%s/%s on %s: %w: %s", service, method, addr, ErrCorrupt, st.Message())
			case codes.ResourceExhausted:
				return nil, fmt.Errorf("%s/%s on %s: %w: %s", service, method, addr, ErrBusy, st.Message())
			case codes.PermissionDenied:
				return nil, fmt.Errorf("%s/%s on %s: %w: %s", service, method, addr, ErrDenied, st.Message())
			case codes.Unimplemented:
				return nil, fmt.Errorf("%s/%s on %s: %w: %s", service, method, addr, ErrUnknownMethod, st.Message())
			case codes.DeadlineExceeded:
				return nil, fmt.Errorf("%s/%s on %s: %w: %s", service, method, addr, context.DeadlineExceeded, st.Message())
			case codes.Unavailable:
				if !wait && strings.Contains(st.Message(), "while dialing") {
					// Failed fast on a connection that could not be made:
					// the request never left.
					return nil, fmt.Errorf("%s/%s on %s: %w: %s", service, method, addr, ErrNotSent, st.Message())
				}
			}
			return nil, fmt.Errorf("%s/%s on %s: %s", service, method, addr, st.Message())
		}
		return nil, err
	}
	return out.b, nil
}

func (c *Caller) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.conns[addr]; cc != nil {
		return cc, nil
	}
	var tlsConf *tls.Config
	if c.TLS != nil {
		tlsConf = c.TLS()
	}
	cc, err := newClientConn(addr, tlsConf)
	if err != nil {
		return nil, err
	}
	if c.conns == nil {
		c.conns = map[string]*grpc.ClientConn{}
	}
	c.conns[addr] = cc
	return cc, nil
}

// Close closes every connection.
func (c *Caller) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cc := range c.conns {
		cc.Close()
	}
	c.conns = nil
}
