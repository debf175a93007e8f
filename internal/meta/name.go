package meta

import (
	"fmt"
	"net/netip"
	"strings"
)

// ValidSpaceName checks name against the S3 bucket-name rules: 3 to 63
// characters of lower-case letters, digits, '-' and '.', starting and ending
// with a letter or digit, without "..", and not shaped like an IPv4 address.
// The error wraps ErrBadSpaceName and says which rule broke.
func ValidSpaceName(name string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrBadSpaceName, name, fmt.Sprintf(format, args...))
	}
	if len(name) < 3 || len(name) > 63 {
		return bad("must be 3 to 63 characters long, not %d", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.':
		case c >= 'A' && c <= 'Z':
			return bad("must be lower case (%q at offset %d)", c, i)
		default:
			return bad("may hold only lower-case letters, digits, '-' and '.' (%q at offset %d)", c, i)
		}
	}
	if !isAlnum(name[0]) {
		return bad("must start with a letter or digit")
	}
	if !isAlnum(name[len(name)-1]) {
		return bad("must end with a letter or digit")
	}
	if strings.Contains(name, "..") {
		return bad("must not contain \"..\"")
	}
	if addr, err := netip.ParseAddr(name); err == nil && addr.Is4() {
		return bad("must not be an IP address")
	}
	return nil
}

// Prefixes and suffixes S3 reserves for its own names (punycode, its
// access points, aliases and directory and table buckets), which a new
// bucket may not use.
var (
	reservedPrefixes = []string{"xn--", "sthree-", "amzn-s3-demo-"}
	reservedSuffixes = []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"}
)

// ValidNewSpaceName is ValidSpaceName with the rules S3 adds for new
// buckets: no prefix or suffix it reserves. Spaces made before those rules
// were checked keep working under their names.
func ValidNewSpaceName(name string) error {
	if err := ValidSpaceName(name); err != nil {
		return err
	}
	if strings.Contains(name, ".-") || strings.Contains(name, "-.") {
		return fmt.Errorf("%w %q: a label must not start or end with '-' (\".-\" or \"-.\")", ErrBadSpaceName, name)
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("%w %q: must not start with %q (S3 reserves it)", ErrBadSpaceName, name, p)
		}
	}
	for _, sfx := range reservedSuffixes {
		if strings.HasSuffix(name, sfx) {
			return fmt.Errorf("%w %q: must not end with %q (S3 reserves it)", ErrBadSpaceName, name, sfx)
		}
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
