package policy

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestPolicies parses policies and evaluates requests against them.
// Commands:
//
//	policy [bucket=B]   parse the input as a policy for bucket B (default
//	                    photos); prints ok, public, or the error
//	eval [key=K] action=A resource=R
//	                    evaluate a request by access key K (none:
//	                    anonymous); each input line is a condition key and
//	                    its values: KEY V1 V2 ...; prints the decision
func TestPolicies(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var p *Policy
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "policy":
				bucket := "photos"
				td.MaybeScanArgs(t, "bucket", &bucket)
				var err error
				if p, err = Parse([]byte(td.Input), bucket); err != nil {
					p = nil
					return err.Error() + "\n"
				}
				if p.Public() {
					return "ok public\n"
				}
				return "ok\n"
			case "eval":
				var key, action, resource string
				td.MaybeScanArgs(t, "key", &key)
				td.ScanArgs(t, "action", &action)
				td.ScanArgs(t, "resource", &resource)
				r := &Request{Principal: key, Action: action, Resource: resource, Context: map[string][]string{}}
				for _, l := range strings.Split(td.Input, "\n") {
					if f := strings.Fields(l); len(f) > 0 {
						r.Context[strings.ToLower(f[0])] = f[1:]
					}
				}
				return p.Evaluate(r).String() + "\n"
			}
			t.Fatalf("unknown command %q", td.Cmd)
			return ""
		})
	})
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		ok   bool
	}{
		{"*", "", true}, {"a*c", "abbbc", true}, {"a*c", "abbbd", false}, {"a?c", "abc", true}, {"a?c", "ac", false},
		{"arn:aws:s3:::b/*", "arn:aws:s3:::b/x/y", true}, {"arn:aws:s3:::b/*", "arn:aws:s3:::b", false},
		{"*a*b*", "xxaxxbxx", true}, {"*a*b", "ba", false}, {"", "", true}, {"", "x", false},
	} {
		if Match(c.p, c.s) != c.ok {
			t.Errorf("Match(%q, %q) = %v", c.p, c.s, !c.ok)
		}
	}
}

// FuzzParse: any document either fails to parse or evaluates without
// panicking.
func FuzzParse(f *testing.F) {
	f.Add(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::photos/*","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}`)
	f.Add(`{"Version":"2012-10-17","Statement":{"Effect":"Deny","NotPrincipal":{"AWS":["k"]},"NotAction":"s3:*","NotResource":"arn:aws:s3:::photos","Condition":{"ForAllValues:StringLike":{"s3:prefix":["a*",1,true]}}}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		p, err := Parse([]byte(doc), "photos")
		if err != nil {
			return
		}
		p.Evaluate(&Request{Principal: "k", Action: "s3:GetObject", Resource: "arn:aws:s3:::photos/x",
			Context: map[string][]string{"aws:sourceip": {"10.1.2.3"}, "s3:prefix": {"ab"}}})
		p.Public()
	})
}
