package client

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cairn-db/cairn/internal/auth"
)

// Credentials are an access key and its secret.
type Credentials struct {
	AccessKey, SecretKey string
	// Server and CAFile are what the credentials file's profile says of
	// the cluster, if anything: a native address, and the CA certificate
	// that verifies its TLS. Endpoint is its HTTP URL (for the S3 and
	// JSON APIs: the Python SDK reads it).
	Server, CAFile, Endpoint string
	// Source says where they came from (for messages); Profile and Path
	// name the credentials file's profile they came from, if they did.
	Source        string
	Profile, Path string
}

// The environment variables the client reads, as the AWS SDKs read theirs.
const (
	EnvAccessKey       = "CAIRN_ACCESS_KEY"
	EnvSecretKey       = "CAIRN_SECRET_KEY"
	EnvProfile         = "CAIRN_PROFILE"
	EnvCredentialsFile = "CAIRN_CREDENTIALS_FILE"
)

// DefaultProfile is the profile used when none is named.
const DefaultProfile = "default"

// CredentialsPath is the credentials file: $CAIRN_CREDENTIALS_FILE, else
// credentials in the user's configuration directory
// (~/.config/cairn/credentials on Linux).
func CredentialsPath() (string, error) {
	if p := os.Getenv(EnvCredentialsFile); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no credentials file: %w (set %s)", err, EnvCredentialsFile)
	}
	return filepath.Join(dir, "cairn", "credentials"), nil
}

// ErrNoCredentials is returned by FindCredentials when no key is given
// anywhere.
var ErrNoCredentials = errors.New("no access key")

// FindCredentials finds the key to connect with, as Dial does: the given
// key; else CAIRN_ACCESS_KEY and CAIRN_SECRET_KEY; else the profile
// (profile, else $CAIRN_PROFILE, else "default") of the credentials file
// (path, else CredentialsPath). A credentials file that others may read is
// refused.
func FindCredentials(access, secret, profile, path string) (Credentials, error) {
	switch {
	case access != "" && secret != "":
		return Credentials{AccessKey: access, SecretKey: secret, Source: "the options"}, nil
	case access != "" || secret != "":
		return Credentials{}, errors.New("an access key and its secret must be given together")
	}
	ea, es := os.Getenv(EnvAccessKey), os.Getenv(EnvSecretKey)
	switch {
	case ea != "" && es != "":
		return Credentials{AccessKey: ea, SecretKey: es, Source: EnvAccessKey}, nil
	case ea != "" || es != "":
		return Credentials{}, fmt.Errorf("%s and %s must be set together", EnvAccessKey, EnvSecretKey)
	}
	named := profile != "" || os.Getenv(EnvProfile) != ""
	if profile == "" {
		profile = os.Getenv(EnvProfile)
	}
	if profile == "" {
		profile = DefaultProfile
	}
	if path == "" {
		var err error
		if path, err = CredentialsPath(); err != nil {
			return Credentials{}, err
		}
	}
	f, err := readCredentialsFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credentials{}, fmt.Errorf("%w: set %s and %s, pass an access key and secret, or write %s (cairn server writes it when it makes a new cluster's root key)",
			ErrNoCredentials, EnvAccessKey, EnvSecretKey, path)
	}
	if err != nil {
		return Credentials{}, err
	}
	p := f.Profile(profile)
	if p == nil {
		if !named {
			return Credentials{}, fmt.Errorf("%w: %s has no [%s] profile; name one with --profile or %s", ErrNoCredentials, path, profile, EnvProfile)
		}
		return Credentials{}, fmt.Errorf("%w: %s has no [%s] profile", ErrNoCredentials, path, profile)
	}
	c := Credentials{AccessKey: p.Get("access_key"), SecretKey: p.Get("secret_key"), Server: p.Get("server"), CAFile: p.Get("ca_file"), Endpoint: p.Get("endpoint"),
		Source: fmt.Sprintf("profile %s of %s", profile, path), Profile: profile, Path: path}
	if c.AccessKey == "" || c.SecretKey == "" {
		return Credentials{}, fmt.Errorf("profile %s of %s needs access_key and secret_key", profile, path)
	}
	return c, nil
}

func readCredentialsFile(path string) (*auth.CredentialsFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the credentials file %s may be read by others (mode %04o): chmod 600 %s", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := auth.ParseCredentialsFile(b)
	if err != nil {
		return nil, fmt.Errorf("the credentials file %s: %w", path, err)
	}
	return f, nil
}

// SaveCredentials writes c into the credentials file at path (mode 0600,
// its directory 0700) as profile (default: "default"). A profile of that
// name already there is kept under another name, which it returns (""
// if there was none): nothing is lost.
func SaveCredentials(path, profile string, c Credentials) (kept string, err error) {
	if profile == "" {
		profile = DefaultProfile
	}
	f, err := readCredentialsFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f = &auth.CredentialsFile{}
	case err != nil:
		return "", err
	}
	if f.Profile(profile) != nil {
		for i := 1; ; i++ {
			kept = fmt.Sprintf("%s-old-%d", profile, i)
			if f.Profile(kept) == nil {
				break
			}
		}
		f.Rename(profile, kept)
	}
	p := f.Add(profile)
	p.Set("access_key", c.AccessKey)
	p.Set("secret_key", c.SecretKey)
	if c.Server != "" {
		p.Set("server", c.Server)
	}
	if c.CAFile != "" {
		p.Set("ca_file", c.CAFile)
	}
	if c.Endpoint != "" {
		p.Set("endpoint", c.Endpoint)
	}
	return kept, writeCredentialsFile(path, f)
}

// ReplaceKey sets the key of profile (default: "default") in the
// credentials file at path, keeping its other values: after the key it
// held was rotated.
func ReplaceKey(path, profile, access, secret string) error {
	if profile == "" {
		profile = DefaultProfile
	}
	f, err := readCredentialsFile(path)
	if err != nil {
		return err
	}
	p := f.Profile(profile)
	if p == nil {
		return fmt.Errorf("%s has no [%s] profile", path, profile)
	}
	p.Set("access_key", access)
	p.Set("secret_key", secret)
	return writeCredentialsFile(path, f)
}

func writeCredentialsFile(path string, f *auth.CredentialsFile) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, f.Marshal(), 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
