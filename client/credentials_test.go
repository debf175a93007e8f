package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/object"
	"github.com/cairn-db/cairn/internal/wire"
)

// TestFindCredentials: options win over the environment, which wins over
// the credentials file; profiles are chosen by name or CAIRN_PROFILE; a
// file others may read is refused; with nothing anywhere the error says
// what to do.
func TestFindCredentials(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "credentials")
	t.Setenv(EnvCredentialsFile, path)
	t.Setenv(EnvAccessKey, "")
	t.Setenv(EnvSecretKey, "")
	t.Setenv(EnvProfile, "")

	_, err := FindCredentials("", "", "", "")
	if !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), EnvAccessKey) {
		t.Fatalf("nothing anywhere: %v", err)
	}
	if _, err := SaveCredentials(path, "", Credentials{AccessKey: "AKFILE", SecretKey: "file-secret", Server: "127.0.0.9:7070", Endpoint: "http://127.0.0.9:7080"}); err != nil {
		t.Fatal(err)
	}
	if _, err := SaveCredentials(path, "other", Credentials{AccessKey: "AKOTHER", SecretKey: "other-secret"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %04o", st.Mode().Perm())
	}
	c, err := FindCredentials("", "", "", "")
	if err != nil || c.AccessKey != "AKFILE" || c.Server != "127.0.0.9:7070" || c.Endpoint != "http://127.0.0.9:7080" {
		t.Fatalf("default profile: %+v %v", c, err)
	}
	t.Setenv(EnvProfile, "other")
	if c, err := FindCredentials("", "", "", ""); err != nil || c.AccessKey != "AKOTHER" {
		t.Fatalf("CAIRN_PROFILE=other: %+v %v", c, err)
	}
	if _, err := FindCredentials("", "", "nosuch", ""); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("a missing profile: %v", err)
	}
	t.Setenv(EnvAccessKey, "AKENV")
	if _, err := FindCredentials("", "", "", ""); err == nil || !strings.Contains(err.Error(), "together") {
		t.Fatalf("half a key in the environment: %v", err)
	}
	t.Setenv(EnvSecretKey, "env-secret")
	if c, _ := FindCredentials("", "", "", ""); c.AccessKey != "AKENV" {
		t.Fatalf("the environment should win over the file: %+v", c)
	}
	if c, _ := FindCredentials("AKOPT", "opt-secret", "", ""); c.AccessKey != "AKOPT" {
		t.Fatalf("options should win: %+v", c)
	}
	t.Setenv(EnvAccessKey, "")
	t.Setenv(EnvSecretKey, "")
	os.Chmod(path, 0o644)
	if _, err := FindCredentials("", "", "", ""); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable file: %v", err)
	}
}

// TestSaveCredentialsKeepsOld: a profile written over an existing one of
// the same name keeps the old one under another name.
func TestSaveCredentialsKeepsOld(t *testing.T) {
	t.Setenv(EnvAccessKey, "") // the caller's environment would win over the file
	t.Setenv(EnvSecretKey, "")
	t.Setenv(EnvProfile, "")
	path := filepath.Join(t.TempDir(), "sub", "credentials")
	if kept, err := SaveCredentials(path, "", Credentials{AccessKey: "AK1", SecretKey: "secret-1"}); err != nil || kept != "" {
		t.Fatalf("first save: %q %v", kept, err)
	}
	kept, err := SaveCredentials(path, "", Credentials{AccessKey: "AK2", SecretKey: "secret-2"})
	if err != nil || kept != "default-old-1" {
		t.Fatalf("second save: %q %v", kept, err)
	}
	if c, err := FindCredentials("", "", "", path); err != nil || c.AccessKey != "AK2" {
		t.Fatalf("default after the second save: %+v %v", c, err)
	}
	if c, err := FindCredentials("", "", kept, path); err != nil || c.AccessKey != "AK1" {
		t.Fatalf("the kept profile: %+v %v", c, err)
	}
}

// TestDialCredentials: Dial takes its key from the environment when none
// is given, and a wrong key is reported as such (not retried on every
// node as a network failure).
func TestDialCredentials(t *testing.T) {
	ctx := context.Background()
	addr := serve(t, object.NewMemService())
	t.Setenv(EnvCredentialsFile, filepath.Join(t.TempDir(), "none"))
	t.Setenv(EnvAccessKey, testAccess)
	t.Setenv(EnvSecretKey, testSecret)
	c, err := Dial(ctx, addr)
	if err != nil {
		t.Fatalf("Dial with the key in the environment: %v", err)
	}
	c.Close()
	t.Setenv(EnvSecretKey, "wrong-secret")
	_, err = Dial(ctx, addr, addr)
	if wire.CodeOf(err) != wire.CodeUnauthenticated {
		t.Fatalf("Dial with a wrong secret: %v", err)
	}
}
