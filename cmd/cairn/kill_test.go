package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/chunk"
	"github.com/cairn-db/cairn/internal/testenv"
)

// buildBinary builds the cairn binary once per test binary run.
var buildOnce struct {
	sync.Once
	path string
	err  error
}

// TestMain removes the binary cairnBinary built, once every test is done.
// The tests never see the user's own keys: the credentials file is one
// that does not exist unless a test's server writes it.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cairn-cmd-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("CAIRN_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	for _, v := range []string{"CAIRN_ACCESS_KEY", "CAIRN_SECRET_KEY", "CAIRN_PROFILE", "CAIRN_CA", "CAIRN_SERVER"} {
		os.Unsetenv(v)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if buildOnce.path != "" {
		os.RemoveAll(filepath.Dir(buildOnce.path))
	}
	os.Exit(code)
}

func cairnBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cairn-bin-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "cairn")
		out, err := exec.Command("go", "build", "-o", buildOnce.path, ".").CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.path
}

// server is a cairn server process under test.
type server struct {
	cmd                *exec.Cmd
	dir                string
	port, http, meta   int
	peer, metaClient   int
	native, healthzURL string
	log                *syncBuffer
	// exited is closed once the process has exited and been waited for;
	// waitErr is then its exit status.
	exited  chan struct{}
	waitErr error
	// creds is the credentials file the server writes its root key into
	// (CAIRN_CREDENTIALS_FILE), beside its data directory; the CLI runs
	// and clients of the test read it from there.
	creds string
}

// syncBuffer is a bytes.Buffer the server process writes into while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is the environment of the server and of CLI runs against it.
func (s *server) env() []string {
	return append(os.Environ(), "CAIRN_CREDENTIALS_FILE="+s.creds, "CAIRN_SERVER="+s.native, "CAIRN_ACCESS_KEY=", "CAIRN_SECRET_KEY=", "CAIRN_PROFILE=", "CAIRN_CA=")
}

// dial connects a client to the server with the key in its credentials file.
func (s *server) dial(ctx context.Context) (*client.Client, error) {
	return client.DialOptions(ctx, client.Options{Addrs: []string{s.native}, CredentialsFile: s.creds})
}

func startServer(t *testing.T, bin, dir string, ports [5]int, extra ...string) *server {
	t.Helper()
	return startServerCreds(t, bin, dir, filepath.Join(filepath.Dir(dir), filepath.Base(dir)+"-credentials"), ports, extra...)
}

// startServerCreds is startServer with the credentials file at creds.
func startServerCreds(t *testing.T, bin, dir, creds string, ports [5]int, extra ...string) *server {
	t.Helper()
	s := &server{dir: dir, port: ports[0], http: ports[1], meta: ports[2], peer: ports[3], metaClient: ports[4], log: &syncBuffer{},
		creds: creds}
	s.native = fmt.Sprintf("127.0.0.1:%d", s.port)
	s.healthzURL = fmt.Sprintf("http://127.0.0.1:%d/healthz", s.http)
	hc := http.DefaultClient
	if slices.Contains(extra, "--tls-cert") {
		s.healthzURL = fmt.Sprintf("https://127.0.0.1:%d/healthz", s.http)
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	}
	args := append([]string{"server", "--data-dir", dir, "--port", fmt.Sprint(s.port),
		"--http-port", fmt.Sprint(s.http), "--meta-port", fmt.Sprint(s.meta), "--peer-port", fmt.Sprint(s.peer), "--meta-client-port", fmt.Sprint(s.metaClient), "--log-level", "warn"}, extra...)
	if !slices.Contains(extra, "--chunk-cache") {
		// Many servers run on one machine here: each faults in its chunk
		// cache's memory once it uses it (an eighth of the machine's by
		// default).
		args = append(args, "--chunk-cache", fmt.Sprint(64<<20))
	}
	// A port the test reserved can still be taken when the server binds
	// it (who took it is logged): try again a few times before failing.
	for try := 1; ; try++ {
		err := s.start(bin, args, hc)
		if err == nil {
			return s
		}
		if !strings.Contains(s.log.String(), "address already in use") || try == 3 {
			t.Fatalf("%v; its log:\n%s", err, s.log)
		}
		t.Logf("try %d: the server could not bind a port; sockets on its ports:\n%s\nits log:\n%s", try, socketsOn(s), s.log)
		s.log = &syncBuffer{}
		time.Sleep(time.Duration(try) * 2 * time.Second)
	}
}

// start runs the server process and waits until it answers /healthz, or
// it exits, or 30 s pass (then it is killed).
func (s *server) start(bin string, args []string, hc *http.Client) error {
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = s.env()
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exited = make(chan struct{})
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(s.healthzURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("server exited before it became healthy (%v)", s.waitErr)
		default:
		}
		if time.Now().After(deadline) {
			s.kill()
			return errors.New("server did not become healthy in 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// socketsOn lists the sockets (with their processes, where ss may show
// them) on the server's ports.
func socketsOn(s *server) string {
	var b strings.Builder
	for _, p := range []int{s.port, s.http, s.meta, s.peer, s.metaClient} {
		out, err := exec.Command("ss", "-tanp", fmt.Sprintf("( sport = :%d or dport = :%d )", p, p)).CombinedOutput()
		fmt.Fprintf(&b, "port %d: %s%v\n", p, out, err)
	}
	return b.String()
}

// kill ends the server with SIGKILL and waits for it to exit.
func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

type ackedWrite struct {
	key     string
	version uint64
	hash    chunk.Hash
}

// TestKill9LosesNothingAcknowledged kills the server with SIGKILL at random
// moments while writers run, restarts it, and checks after every restart
// that every write ever acknowledged reads back intact at its version.
func TestKill9LosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 loop takes about a minute")
	}
	bin := cairnBinary(t)
	dir := t.TempDir()
	ports := [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const kills = 50
	ctx := context.Background()

	var acked []ackedWrite
	srv := startServer(t, bin, dir, ports, "--inline-threshold", "4096")
	defer func() { srv.kill() }()
	c, err := srv.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSpace(ctx, "dur", client.SpaceSettings{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for k := 0; k < kills; k++ {
		c, err := srv.dial(ctx)
		if err != nil {
			t.Fatalf("kill %d: dial: %v\n%s", k, err, srv.log)
		}
		wctx, cancel := context.WithCancel(ctx)
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, uint64(k*10+w)))
				for wctx.Err() == nil {
					key := fmt.Sprintf("w%d/k%d", w, r.IntN(50))
					body := make([]byte, []int{100, 3000, 20000, 300000}[r.IntN(4)])
					for i := range body {
						body[i] = byte(r.Uint32())
					}
					info, err := c.Put(wctx, "dur", key, body)
					if err != nil {
						continue
					}
					mu.Lock()
					acked = append(acked, ackedWrite{key, info.Version, chunk.Sum(body)})
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(time.Duration(30+rng.IntN(300)) * time.Millisecond)
		mu.Lock()
		srv.kill() // acknowledged up to here must survive
		mu.Unlock()
		cancel()
		wg.Wait()
		c.Close()

		srv = startServer(t, bin, dir, ports, "--inline-threshold", "4096")
		c, err = srv.dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range acked {
			data, info, err := c.Get(ctx, "dur", a.key, client.WithVersion(a.version))
			if err != nil {
				t.Fatalf("after kill %d: acknowledged %s@%x lost: %v\nserver log:\n%s", k, a.key, a.version, err, srv.log)
			}
			if chunk.Sum(data) != a.hash || info.Hash != a.hash {
				t.Fatalf("after kill %d: %s@%x differs from what was acknowledged", k, a.key, a.version)
			}
		}
		c.Close()
	}
	t.Logf("%d kills, %d acknowledged writes all intact", kills, len(acked))
}
