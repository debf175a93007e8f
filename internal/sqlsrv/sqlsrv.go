// Package sqlsrv serves Cairn's spaces over the MySQL protocol, read-only,
// through go-mysql-server: one database, cairn, whose tables are the
// spaces, their snapshots and branches. A table's rows are its live objects, read by
// the object service's query (so a WHERE on an indexed column becomes an
// index lookup on each range); AS OF reads the past. Users are Cairn
// access keys: a key sees the tables of the spaces it may read.
package sqlsrv

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/server"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/sirupsen/logrus"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// Database is the name of the one database the server serves.
const Database = "cairn"

// Service is what the server reads: spaces, snapshots, queries and
// field indexes (a cluster node).
type Service interface {
	object.Service
	object.Querier
	object.IndexManager
	object.Snapshotter
}

// Config configures a Server.
type Config struct {
	// Listener is where the server accepts connections (loopback by
	// default: the caller's choice).
	Listener net.Listener
	Service  Service
	Keys     *auth.Keyring
	Logger   *slog.Logger
	// MaxConnections bounds the open connections (default 256).
	MaxConnections uint64
}

// Server is a running MySQL-protocol server.
type Server struct {
	srv  *server.Server
	eng  *sqle.Engine
	done chan error
	once sync.Once
}

var initOnce sync.Once

// initLibrary sets the engine library's process-wide settings, once.
func initLibrary() {
	initOnce.Do(func() {
		// No file of the node's machine is any client's business.
		_ = sql.SystemVariables.AssignValues(map[string]interface{}{"secure_file_priv": "/nonexistent"})
		// The engine logs every connection (info) and every refused
		// statement (warning) to the process's logrus logger: only its
		// errors are worth a line.
		logrus.SetLevel(logrus.ErrorLevel)
	})
}

// newEngine is a read-only engine over svc's spaces.
func newEngine(svc Service, keys *auth.Keyring) *sqle.Engine {
	initLibrary()
	return sqle.New(analyzer.NewDefault(&provider{svc: svc, keys: keys}), &sqle.Config{IsReadOnly: true})
}

// Start starts a server on cfg.Listener.
func Start(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = 256
	}
	eng := newEngine(cfg.Service, cfg.Keys)
	as := &authServer{keys: cfg.Keys}
	sb := func(ctx context.Context, c *mysql.Conn, addr string) (sql.Session, error) {
		return sql.BaseSessionFromConnection(ctx, c, addr)
	}
	scfg := server.Config{
		Protocol:       "tcp",
		Listener:       cfg.Listener,
		MaxConnections: cfg.MaxConnections,
		ProtocolListenerFactory: func(c server.Config, lc mysql.ListenerConfig, sel server.ServerEventListener) (server.ProtocolListener, error) {
			lc.AuthServer = as
			return server.MySQLProtocolListenerFactory(c, lc, sel)
		},
	}
	srv, err := server.NewServer(scfg, eng, sql.NewContext, sb, nil)
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("sql: %w", err)
	}
	s := &Server{srv: srv, eng: eng, done: make(chan error, 1)}
	go func() { s.done <- srv.Start() }()
	return s, nil
}

// Close stops accepting, ends the open connections and waits for them.
func (s *Server) Close() error {
	s.once.Do(func() {
		_ = s.srv.Close()
		sm := s.srv.SessionManager()
		sm.Iter(func(se sql.Session) (bool, error) {
			sm.KillConnection(se.ID())
			return false, nil
		})
		sm.WaitForClosedConnections()
		s.eng.Close()
	})
	return nil
}

// authServer checks a client's mysql_native_password answer against the
// access key's secret: the user is the access key.
type authServer struct {
	keys *auth.Keyring
}

func (a *authServer) AuthMethods() []mysql.AuthMethod {
	return []mysql.AuthMethod{mysql.NewMysqlNativeAuthMethod(a, a)}
}

func (a *authServer) DefaultAuthMethodDescription() mysql.AuthMethodDescription {
	return mysql.MysqlNativePassword
}

// HandleUser implements mysql.UserValidator: every user is asked for its
// password (an unknown one fails with "access denied" then).
func (a *authServer) HandleUser(user string, _ net.Addr) bool { return true }

// UserEntryWithHash implements mysql.HashStorage.
func (a *authServer) UserEntryWithHash(_ []*x509.Certificate, salt []byte, user string, resp []byte, _ net.Addr) (mysql.Getter, error) {
	secret, ok := a.keys.Secret(user)
	if !ok || len(resp) == 0 || subtle.ConstantTimeCompare(resp, mysql.ScrambleMysqlNativePassword(salt, []byte(secret))) != 1 {
		return nil, mysql.NewSQLError(mysql.ERAccessDeniedError, mysql.SSAccessDeniedError, "Access denied for user '%v': use a Cairn access key and its secret", user)
	}
	return sql.MysqlConnectionUser{User: user, Host: "%"}, nil
}

// timeout bounds one statement's reads of the store.
const timeout = 5 * time.Minute
