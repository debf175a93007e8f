package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
)

func load(t *testing.T, args []string, env []string) (Server, error) {
	t.Helper()
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	RegisterServerFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Server{}, err
	}
	return LoadServer(fs, func() []string { return env })
}

// TestPrecedence checks flags > environment > file > defaults, one key at
// each level.
func TestPrecedence(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "cairn.yaml")
	if err := os.WriteFile(cfg, []byte("port: 1111\nhttp-port: 2222\nmeta-port: 3333\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := load(t, []string{"--config", cfg, "--port", "9999"}, []string{"CAIRN_PORT=8888", "CAIRN_HTTP_PORT=7777"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Port != 9999 || s.HTTPPort != 7777 || s.MetaPort != 3333 || s.Ranges != 4 || s.DataDir != "cairn-data" {
		t.Fatalf("got %+v", s)
	}
}

func TestUnknownFileKey(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "cairn.yaml")
	os.WriteFile(cfg, []byte("prot: 1\n"), 0o644)
	if _, err := load(t, []string{"--config", cfg}, nil); err == nil {
		t.Fatal("unknown config key accepted")
	}
}

func TestUnknownFlag(t *testing.T) {
	if _, err := load(t, []string{"--no-such-flag"}, nil); err == nil {
		t.Fatal("unknown flag accepted")
	}
}

func TestBadEnvValue(t *testing.T) {
	if _, err := load(t, nil, []string{"CAIRN_PORT=abc"}); err == nil {
		t.Fatal("CAIRN_PORT=abc accepted")
	}
}

// TestEveryFlagIsAKey: every server flag (but --config) can be set from
// the environment and a config file, which know the keys by serverKeys.
func TestEveryFlagIsAKey(t *testing.T) {
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	RegisterServerFlags(fs)
	known := map[string]bool{}
	for _, k := range serverKeys {
		known[k] = true
	}
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "config" {
			return
		}
		n++
		if !known[f.Name] {
			t.Errorf("flag --%s is missing from serverKeys", f.Name)
		}
	})
	if n != len(serverKeys) {
		t.Errorf("%d flags but %d keys in serverKeys", n, len(serverKeys))
	}
}
