package auth

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The credentials file of the CLI and the Go client
// (~/.config/cairn/credentials, mode 0600), in the form of the AWS CLI's:
//
//	[default]
//	access_key = CAIRNXXXXXXXXXXXXXXX
//	secret_key = ...
//
// A profile may also name its cluster's native address (server) and the
// CA certificate file that verifies it (ca_file); other keys are kept and
// ignored.

// Profile is one section of the credentials file.
type Profile struct {
	Name   string
	Values map[string]string // key = value lines, in any order
	order  []string
}

// Get returns a value of the profile ("" if unset).
func (p *Profile) Get(key string) string { return p.Values[key] }

// Set sets a value, keeping the others.
func (p *Profile) Set(key, value string) {
	if p.Values == nil {
		p.Values = map[string]string{}
	}
	if _, ok := p.Values[key]; !ok {
		p.order = append(p.order, key)
	}
	p.Values[key] = value
}

// CredentialsFile is the whole file: its profiles in order.
type CredentialsFile struct {
	Profiles []*Profile
}

// Profile returns the profile called name, or nil.
func (f *CredentialsFile) Profile(name string) *Profile {
	for _, p := range f.Profiles {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Add appends a new, empty profile called name (which must not exist).
func (f *CredentialsFile) Add(name string) *Profile {
	p := &Profile{Name: name, Values: map[string]string{}}
	f.Profiles = append(f.Profiles, p)
	return p
}

// Rename renames profile from to to.
func (f *CredentialsFile) Rename(from, to string) {
	if p := f.Profile(from); p != nil {
		p.Name = to
	}
}

// ParseCredentialsFile reads the file's text. Blank lines and lines
// starting with # or ; are comments.
func ParseCredentialsFile(b []byte) (*CredentialsFile, error) {
	f := &CredentialsFile{}
	var cur *Profile
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		switch {
		case t == "" || t[0] == '#' || t[0] == ';':
			continue
		case t[0] == '[':
			if !strings.HasSuffix(t, "]") || len(t) < 3 {
				return nil, fmt.Errorf("line %d: a profile header is [NAME]", line)
			}
			name := strings.TrimSpace(t[1 : len(t)-1])
			name = strings.TrimSpace(strings.TrimPrefix(name, "profile "))
			if f.Profile(name) != nil {
				return nil, fmt.Errorf("line %d: profile %q appears twice", line, name)
			}
			cur = f.Add(name)
		default:
			k, v, ok := strings.Cut(t, "=")
			if !ok {
				return nil, fmt.Errorf("line %d: expected KEY = VALUE", line)
			}
			if cur == nil {
				return nil, fmt.Errorf("line %d: a value before the first [profile]", line)
			}
			cur.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return f, sc.Err()
}

// Marshal writes the file's text.
func (f *CredentialsFile) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString("# Cairn credentials: keep this file private (mode 0600).\n")
	for i, p := range f.Profiles {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[%s]\n", p.Name)
		keys := slices.Clone(p.order)
		for _, k := range slices.Sorted(maps.Keys(p.Values)) {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			fmt.Fprintf(&b, "%s = %s\n", k, p.Values[k])
		}
	}
	return b.Bytes()
}
