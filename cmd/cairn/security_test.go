package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/testenv"
)

// writeServerCert writes a certificate for 127.0.0.1, its key and the CA
// that issued it into dir.
func writeServerCert(t *testing.T, dir string) (certFile, keyFile, caFile string) {
	t.Helper()
	ca, err := auth.NewCA("cairn-test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := auth.NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.IssueNode(&key.PublicKey, 1, []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := auth.KeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, caFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	for f, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, caFile: ca.CertPEM} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile, caFile
}

func freePorts(t *testing.T) [5]int {
	return [5]int{testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)}
}

// TestFirstStartCredentials: a new cluster's first start prints the root
// key once and saves it in the user's credentials file, so the CLI works
// with no other step; a key that is wrong, or lacks a grant, is refused
// with a clear error and changes nothing. A second new cluster (with TLS
// on its native port) becomes the default profile and keeps the first
// one's, and the CLI says which side spoke TLS when the two do not match.
func TestFirstStartCredentials(t *testing.T) {
	bin := cairnBinary(t)
	dir := t.TempDir()
	ports := freePorts(t)
	srv := startServer(t, bin, dir, ports)
	// The server may report the saved profile just after it answers
	// /healthz: give its log a moment.
	for deadline := time.Now().Add(5 * time.Second); ; {
		l := srv.log.String()
		if strings.Contains(l, "made the root key") && strings.Contains(l, "saved it as the default profile") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first start did not show and save the root key:\n%s", l)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, err := os.Stat(srv.creds); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", st, err)
	}
	if out, errs, code := run(t, bin, srv, "", "space", "create", "first"); code != 0 || !strings.Contains(out, "created space first") {
		t.Fatalf("space create with the saved key: %q %s", out, errs)
	}
	srv.kill()
	srv = startServer(t, bin, dir, ports)
	defer srv.kill()
	if strings.Contains(srv.log.String(), "made the root key") {
		t.Fatalf("a restart showed a root key again:\n%s", srv.log)
	}
	if _, errs, code := run(t, bin, srv, "", "space", "ls", "--access-key", "CAIRNNOSUCHKEY", "--secret-key", "wrong-secret"); code != 1 || !strings.Contains(errs, "authentication failed") {
		t.Fatalf("a wrong key: exit %d %s", code, errs)
	}
	if _, errs, code := run(t, bin, srv, "", "key", "create", "--access", "LIMITED", "--secret", "limited-secret", "--grant", "first=read"); code != 0 {
		t.Fatalf("key create: %s", errs)
	}
	limited := []string{"--access-key", "LIMITED", "--secret-key", "limited-secret"}
	if _, errs, code := run(t, bin, srv, "", append([]string{"space", "create", "second"}, limited...)...); code != 1 || !strings.Contains(errs, "access denied") {
		t.Fatalf("space create without the admin grant: exit %d %s", code, errs)
	}
	if _, errs, code := run(t, bin, srv, "", append([]string{"key", "ls"}, limited...)...); code != 1 || !strings.Contains(errs, "cluster-admin") {
		t.Fatalf("key ls without the cluster-admin grant: exit %d %s", code, errs)
	}
	if out, _, _ := run(t, bin, srv, "", "space", "ls"); strings.Contains(out, "second") {
		t.Fatalf("a refused space create made the space: %s", out)
	}

	// A second new cluster, serving TLS, whose key goes into the same file.
	tdir := t.TempDir()
	certFile, keyFile, caFile := writeServerCert(t, tdir)
	tlsSrv := startServerCreds(t, bin, filepath.Join(tdir, "data"), srv.creds, freePorts(t), "--tls-cert", certFile, "--tls-key", keyFile)
	defer tlsSrv.kill()
	if !strings.Contains(tlsSrv.log.String(), "kept as [default-old-1]") {
		t.Fatalf("the second cluster did not keep the first one's profile:\n%s", tlsSrv.log)
	}
	// The default profile is now the TLS cluster's (its address and the
	// certificate that verifies it); the first is a named profile.
	noServer := func(args ...string) (string, string, int) {
		s := *tlsSrv
		s.native = "" // CAIRN_SERVER empty: the profile says where
		return run(t, bin, &s, "", args...)
	}
	if out, errs, code := noServer("space", "create", "overtls"); code != 0 || !strings.Contains(out, "created space overtls") {
		t.Fatalf("the default profile, over TLS: %q %s", out, errs)
	}
	if out, errs, code := noServer("space", "ls", "--profile", "default-old-1"); code != 0 || !strings.Contains(out, "first") {
		t.Fatalf("the first cluster's profile: %q %s", out, errs)
	}
	if _, errs, code := run(t, bin, tlsSrv, "", "space", "ls", "--profile", "default-old-1"); code != 1 || !strings.Contains(errs, "TLS") {
		t.Fatalf("plain TCP to a TLS port: exit %d %s", code, errs)
	}
	if _, errs, code := run(t, bin, srv, "", "space", "ls", "--ca", caFile); code != 1 || !strings.Contains(errs, "does not speak TLS") {
		t.Fatalf("TLS to a plain port: exit %d %s", code, errs)
	}
}
