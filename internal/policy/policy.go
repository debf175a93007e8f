// Package policy parses and evaluates S3 bucket policies: the AWS access
// policy language (Version, Statement, Effect, Principal and NotPrincipal,
// Action and NotAction, Resource and NotResource, Condition) as S3
// applies it to one bucket. It is pure: a request is its principal,
// action, resource and condition keys, and the answer is Allow, Deny or
// no opinion.
//
// Principals are Cairn's access keys. A principal matches a request's key
// when it is "*" (anyone, anonymous requests too), the access key id
// itself, or an AWS ARN that names it: arn:aws:iam::KEY:root or
// arn:aws:iam::ACCOUNT:user/KEY.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Decision is a policy's answer for a request.
type Decision int

const (
	NoOpinion Decision = iota // no statement applies
	Allow                     // an Allow statement applies and no Deny does
	Deny                      // a Deny statement applies: it wins over every allow
)

func (d Decision) String() string {
	return [...]string{"no opinion", "allow", "deny"}[d]
}

// Policy is a parsed bucket policy.
type Policy struct {
	Version    string
	ID         string
	Statements []Statement
}

// Statement is one statement of a policy.
type Statement struct {
	Sid          string
	Effect       Decision // Allow or Deny
	Principal    []string // nil: none given; "*" for anyone
	NotPrincipal []string
	Action       []string
	NotAction    []string
	Resource     []string
	NotResource  []string
	Conditions   []Condition
}

// Condition is one key's test under one operator of a Condition block.
type Condition struct {
	Op       string // the operator without IfExists and set prefix, e.g. StringLike
	IfExists bool
	Set      string // "", "ForAnyValue" or "ForAllValues"
	Key      string // as written; matched case-insensitively
	Values   []string
}

// Request is what a policy is asked about.
type Request struct {
	// Principal is the access key id; "" for an anonymous request.
	Principal string
	// Action is the S3 action, e.g. "s3:GetObject".
	Action string
	// Resource is the ARN acted on: arn:aws:s3:::BUCKET or
	// arn:aws:s3:::BUCKET/KEY.
	Resource string
	// Context holds the condition keys of the request, by lower-case
	// name (aws:sourceip, s3:prefix, ...).
	Context map[string][]string
}

// ErrMalformed is the class of errors of a policy that does not parse or
// breaks the grammar.
var ErrMalformed = errors.New("malformed policy")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// strings1 reads a JSON string or array of strings.
func strings1(raw json.RawMessage, what string) ([]string, error) {
	if raw == nil {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, malformed("%s must be a string or an array of strings", what)
	}
	if len(many) == 0 {
		return nil, malformed("%s is empty", what)
	}
	return many, nil
}

// principals reads a Principal: "*" or {"AWS": "..." | [...]}.
func principals(raw json.RawMessage, what string) ([]string, error) {
	if raw == nil {
		return nil, nil
	}
	var star string
	if err := json.Unmarshal(raw, &star); err == nil {
		if star != "*" {
			return nil, malformed("%s must be \"*\" or an object such as {\"AWS\": [...]}", what)
		}
		return []string{"*"}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) == 0 {
		return nil, malformed("%s must be \"*\" or an object such as {\"AWS\": [...]}", what)
	}
	var out []string
	for k, v := range m {
		if k != "AWS" && k != "CanonicalUser" {
			return nil, malformed("%s names a %q principal: only AWS and CanonicalUser principals (access keys) exist here", what, k)
		}
		l, err := strings1(v, what)
		if err != nil {
			return nil, err
		}
		out = append(out, l...)
	}
	return out, nil
}

var operators = map[string]bool{
	"StringEquals": true, "StringNotEquals": true, "StringEqualsIgnoreCase": true, "StringNotEqualsIgnoreCase": true,
	"StringLike": true, "StringNotLike": true,
	"NumericEquals": true, "NumericNotEquals": true, "NumericLessThan": true, "NumericLessThanEquals": true,
	"NumericGreaterThan": true, "NumericGreaterThanEquals": true,
	"DateEquals": true, "DateNotEquals": true, "DateLessThan": true, "DateLessThanEquals": true,
	"DateGreaterThan": true, "DateGreaterThanEquals": true,
	"Bool": true, "IpAddress": true, "NotIpAddress": true,
	"ArnEquals": true, "ArnLike": true, "ArnNotEquals": true, "ArnNotLike": true,
	"Null": true,
}

// conditionValues reads a condition's value(s): strings, numbers or
// booleans, alone or in an array.
func conditionValues(raw json.RawMessage) ([]string, error) {
	var many []json.RawMessage
	if err := json.Unmarshal(raw, &many); err != nil {
		many = []json.RawMessage{raw}
	}
	out := make([]string, 0, len(many))
	for _, v := range many {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			out = append(out, s)
			continue
		}
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if err := d.Decode(&n); err == nil {
			out = append(out, n.String())
			continue
		}
		var b bool
		if err := json.Unmarshal(v, &b); err == nil {
			out = append(out, strconv.FormatBool(b))
			continue
		}
		return nil, malformed("a condition value must be a string, number or boolean")
	}
	return out, nil
}

// Parse reads a policy document and checks its grammar. bucket, if set,
// is the bucket it is for: every resource must be in it.
func Parse(doc []byte, bucket string) (*Policy, error) {
	var raw struct {
		Version   string
		ID        string `json:"Id"`
		Statement json.RawMessage
	}
	d := json.NewDecoder(bytes.NewReader(doc))
	if err := d.Decode(&raw); err != nil {
		return nil, malformed("not a JSON object: %v", err)
	}
	switch raw.Version {
	case "2012-10-17", "2008-10-17":
	case "":
		return nil, malformed("Version is missing (use 2012-10-17)")
	default:
		return nil, malformed("Version %q is not a policy language version (2012-10-17 or 2008-10-17)", raw.Version)
	}
	var stmts []json.RawMessage
	if err := json.Unmarshal(raw.Statement, &stmts); err != nil {
		var one json.RawMessage
		if err := json.Unmarshal(raw.Statement, &one); err != nil || len(one) == 0 || one[0] != '{' {
			return nil, malformed("Statement must be an object or an array of objects")
		}
		stmts = []json.RawMessage{one}
	}
	if len(stmts) == 0 {
		return nil, malformed("the policy has no statement")
	}
	p := &Policy{Version: raw.Version, ID: raw.ID}
	sids := map[string]bool{}
	for i, rs := range stmts {
		s, err := parseStatement(rs, bucket)
		if err != nil {
			return nil, fmt.Errorf("statement %d: %w", i+1, err)
		}
		if s.Sid != "" {
			if sids[s.Sid] {
				return nil, malformed("Sid %q is used twice", s.Sid)
			}
			sids[s.Sid] = true
		}
		p.Statements = append(p.Statements, s)
	}
	return p, nil
}

func parseStatement(rs json.RawMessage, bucket string) (Statement, error) {
	var r map[string]json.RawMessage
	if err := json.Unmarshal(rs, &r); err != nil {
		return Statement{}, malformed("a statement must be an object")
	}
	var s Statement
	for k := range r {
		switch k {
		case "Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource", "NotResource", "Condition":
		default:
			return s, malformed("unknown field %q", k)
		}
	}
	if v, ok := r["Sid"]; ok {
		if err := json.Unmarshal(v, &s.Sid); err != nil {
			return s, malformed("Sid must be a string")
		}
	}
	var effect string
	_ = json.Unmarshal(r["Effect"], &effect)
	switch effect {
	case "Allow":
		s.Effect = Allow
	case "Deny":
		s.Effect = Deny
	default:
		return s, malformed("Effect must be Allow or Deny")
	}
	var err error
	if s.Principal, err = principals(r["Principal"], "Principal"); err != nil {
		return s, err
	}
	if s.NotPrincipal, err = principals(r["NotPrincipal"], "NotPrincipal"); err != nil {
		return s, err
	}
	if (s.Principal == nil) == (s.NotPrincipal == nil) {
		return s, malformed("a bucket policy statement needs exactly one of Principal and NotPrincipal")
	}
	if s.Action, err = strings1(r["Action"], "Action"); err != nil {
		return s, err
	}
	if s.NotAction, err = strings1(r["NotAction"], "NotAction"); err != nil {
		return s, err
	}
	if (s.Action == nil) == (s.NotAction == nil) {
		return s, malformed("a statement needs exactly one of Action and NotAction")
	}
	for _, a := range append(slices.Clone(s.Action), s.NotAction...) {
		if a != "*" && !strings.HasPrefix(strings.ToLower(a), "s3:") {
			return s, malformed("action %q is not an S3 action (s3:...)", a)
		}
	}
	if s.Resource, err = strings1(r["Resource"], "Resource"); err != nil {
		return s, err
	}
	if s.NotResource, err = strings1(r["NotResource"], "NotResource"); err != nil {
		return s, err
	}
	if (s.Resource == nil) == (s.NotResource == nil) {
		return s, malformed("a statement needs exactly one of Resource and NotResource")
	}
	for _, res := range append(slices.Clone(s.Resource), s.NotResource...) {
		if !resourceInBucket(res, bucket) {
			return s, malformed("Policy has invalid resource: %q is not this bucket (arn:aws:s3:::%s or arn:aws:s3:::%s/...)", res, bucket, bucket)
		}
	}
	if c, ok := r["Condition"]; ok {
		var block map[string]map[string]json.RawMessage
		if err := json.Unmarshal(c, &block); err != nil {
			return s, malformed("Condition must map operators to objects of keys and values")
		}
		for op, keys := range block {
			cond := Condition{Op: op}
			if set, rest, ok := strings.Cut(op, ":"); ok {
				if set != "ForAnyValue" && set != "ForAllValues" {
					return s, malformed("unknown condition set operator %q", set)
				}
				cond.Set, cond.Op = set, rest
			}
			if base, ok := strings.CutSuffix(cond.Op, "IfExists"); ok && base != "Null" {
				cond.Op, cond.IfExists = base, true
			}
			if !operators[cond.Op] {
				return s, malformed("unknown condition operator %q", op)
			}
			for k, v := range keys {
				vals, err := conditionValues(v)
				if err != nil {
					return s, err
				}
				c := cond
				c.Key, c.Values = k, vals
				if err := c.check(); err != nil {
					return s, err
				}
				s.Conditions = append(s.Conditions, c)
			}
		}
	}
	return s, nil
}

// check validates a condition's values for its operator.
func (c Condition) check() error {
	if len(c.Values) == 0 {
		return malformed("condition %s on %s has no value", c.Op, c.Key)
	}
	if (c.Op == "Null" || c.Op == "Bool") && len(c.Values) != 1 {
		return malformed("%s takes one value", c.Op)
	}
	for _, v := range c.Values {
		switch {
		case strings.HasPrefix(c.Op, "Numeric"):
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return malformed("%s takes numbers, not %q", c.Op, v)
			}
		case strings.HasPrefix(c.Op, "Date"):
			if _, ok := parseDate(v); !ok {
				return malformed("%s takes ISO 8601 dates or epoch seconds, not %q", c.Op, v)
			}
		case c.Op == "Bool" || c.Op == "Null":
			if v != "true" && v != "false" {
				return malformed("%s takes true or false, not %q", c.Op, v)
			}
		case strings.HasSuffix(c.Op, "IpAddress"):
			if _, err := parsePrefix(v); err != nil {
				return malformed("%s takes IP addresses or CIDR ranges, not %q", c.Op, v)
			}
		}
	}
	return nil
}

func parsePrefix(v string) (netip.Prefix, error) {
	if strings.Contains(v, "/") {
		return netip.ParsePrefix(v)
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parseDate(v string) (time.Time, bool) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(n, 0), true
	}
	for _, f := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02T15:04Z07:00", "2006-01-02"} {
		if t, err := time.Parse(f, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// resourceInBucket reports whether a resource pattern lies within bucket
// (any bucket, if bucket is "").
func resourceInBucket(res, bucket string) bool {
	name, ok := strings.CutPrefix(res, "arn:aws:s3:::")
	if !ok {
		return false
	}
	if bucket == "" {
		return name != ""
	}
	b, _, _ := strings.Cut(name, "/")
	return b == bucket || (strings.ContainsAny(b, "*?") && Match(b, bucket))
}

// Evaluate answers r: Deny if a Deny statement applies, else Allow if an
// Allow statement does, else NoOpinion.
func (p *Policy) Evaluate(r *Request) Decision {
	d := NoOpinion
	for i := range p.Statements {
		s := &p.Statements[i]
		if !s.applies(r) {
			continue
		}
		if s.Effect == Deny {
			return Deny
		}
		d = Allow
	}
	return d
}

func (s *Statement) applies(r *Request) bool {
	if s.Principal != nil && !principalIn(s.Principal, r.Principal) {
		return false
	}
	if s.NotPrincipal != nil && principalIn(s.NotPrincipal, r.Principal) {
		return false
	}
	if s.Action != nil && !actionIn(s.Action, r.Action) {
		return false
	}
	if s.NotAction != nil && actionIn(s.NotAction, r.Action) {
		return false
	}
	if s.Resource != nil && !resourceIn(s.Resource, r.Resource) {
		return false
	}
	if s.NotResource != nil && resourceIn(s.NotResource, r.Resource) {
		return false
	}
	for _, c := range s.Conditions {
		if !c.holds(r.Context) {
			return false
		}
	}
	return true
}

// PrincipalKey is the access key a principal names, or "" if it names
// none (then it is "*" or matches nothing here).
func PrincipalKey(p string) string {
	if rest, ok := strings.CutPrefix(p, "arn:aws:iam::"); ok {
		acct, res, _ := strings.Cut(rest, ":")
		if res == "root" {
			return acct
		}
		if u, ok := strings.CutPrefix(res, "user/"); ok {
			return u[strings.LastIndexByte(u, '/')+1:]
		}
		return ""
	}
	return p
}

func principalIn(ps []string, key string) bool {
	for _, p := range ps {
		if p == "*" || (key != "" && PrincipalKey(p) == key) {
			return true
		}
	}
	return false
}

func actionIn(as []string, action string) bool {
	for _, a := range as {
		if a == "*" || Match(strings.ToLower(a), strings.ToLower(action)) {
			return true
		}
	}
	return false
}

func resourceIn(rs []string, res string) bool {
	for _, p := range rs {
		if Match(p, res) {
			return true
		}
	}
	return false
}

// Match reports whether s matches pattern, where * matches any run of
// characters and ? any one.
func Match(pattern, s string) bool {
	// Iterative wildcard match with backtracking to the last star.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// negated operators hold when the key is absent.
func (c Condition) negated() bool {
	return strings.Contains(c.Op, "Not")
}

func (c Condition) holds(ctx map[string][]string) bool {
	vals, present := ctx[strings.ToLower(c.Key)]
	if c.Op == "Null" {
		want := c.Values[0] == "true" // true: the key must be absent
		return want != present
	}
	if !present {
		return c.IfExists || c.negated() || c.Set == "ForAllValues"
	}
	switch c.Set {
	case "ForAllValues":
		for _, v := range vals {
			if !c.matchOne(v) {
				return false
			}
		}
		return true
	case "ForAnyValue":
		for _, v := range vals {
			if c.matchOne(v) {
				return true
			}
		}
		return false
	}
	// A single-valued key: negated operators hold when no value matches.
	if c.negated() {
		for _, v := range vals {
			if !c.matchOne(v) {
				return false
			}
		}
		return true
	}
	for _, v := range vals {
		if c.matchOne(v) {
			return true
		}
	}
	return false
}

// matchOne reports whether the request's value v satisfies the condition
// (for a negated operator: none of the condition's values matches).
func (c Condition) matchOne(v string) bool {
	op := c.Op
	neg := false
	switch op {
	case "StringNotEquals", "StringNotEqualsIgnoreCase", "StringNotLike", "NumericNotEquals", "DateNotEquals", "NotIpAddress", "ArnNotEquals", "ArnNotLike":
		neg = true
		op = strings.Replace(op, "Not", "", 1)
	}
	any := false
	for _, want := range c.Values {
		if compare(op, want, v) {
			any = true
			break
		}
	}
	return any != neg
}

func compare(op, want, v string) bool {
	switch op {
	case "StringEquals", "ArnEquals":
		return v == want
	case "StringEqualsIgnoreCase":
		return strings.EqualFold(v, want)
	case "StringLike", "ArnLike":
		return Match(want, v)
	case "Bool":
		return strings.EqualFold(v, want)
	case "IpAddress":
		p, err1 := parsePrefix(want)
		a, err2 := netip.ParseAddr(v)
		return err1 == nil && err2 == nil && p.Contains(a.Unmap())
	}
	if strings.HasPrefix(op, "Numeric") {
		w, err1 := strconv.ParseFloat(want, 64)
		x, err2 := strconv.ParseFloat(v, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		return order(op[len("Numeric"):], cmpFloat(x, w))
	}
	if strings.HasPrefix(op, "Date") {
		w, ok1 := parseDate(want)
		x, ok2 := parseDate(v)
		if !ok1 || !ok2 {
			return false
		}
		return order(op[len("Date"):], x.Compare(w))
	}
	return false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func order(rel string, c int) bool {
	switch rel {
	case "Equals":
		return c == 0
	case "LessThan":
		return c < 0
	case "LessThanEquals":
		return c <= 0
	case "GreaterThan":
		return c > 0
	case "GreaterThanEquals":
		return c >= 0
	}
	return false
}

// Mentions reports whether a condition of the policy tests a key that
// starts with prefix (case-insensitively): a caller gathers costly keys
// only for policies that use them.
func (p *Policy) Mentions(prefix string) bool {
	for _, s := range p.Statements {
		for _, c := range s.Conditions {
			if len(c.Key) >= len(prefix) && strings.EqualFold(c.Key[:len(prefix)], prefix) {
				return true
			}
		}
	}
	return false
}

// Public reports whether the policy grants anything to everyone without
// a condition that narrows who (S3's GetBucketPolicyStatus IsPublic): an
// Allow statement with Principal "*" and no condition on the source IP,
// source account, source ARN or user.
func (p *Policy) Public() bool {
	for _, s := range p.Statements {
		// NotPrincipal allows everyone it does not name.
		if s.Effect != Allow || (!slices.Contains(s.Principal, "*") && s.NotPrincipal == nil) {
			continue
		}
		narrowed := false
		for _, c := range s.Conditions {
			if c.negated() || c.IfExists || c.Op == "Null" || c.Set != "" {
				continue // holds for a request without the key: narrows no one
			}
			switch strings.ToLower(c.Key) {
			case "aws:sourceip", "aws:sourceaccount", "aws:sourcearn", "aws:sourcevpc", "aws:sourcevpce", "aws:userid", "aws:username", "aws:principalaccount", "aws:principalarn":
				narrowed = true
			}
		}
		if !narrowed {
			return true
		}
	}
	return false
}
