package e2b

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseRules: network.rules from any client never panics, and what
// it accepts is what rayd is told: lower-case hosts, a wildcard only as a
// leading "*.", at most maxHeaderRules hosts, each with headers.
func FuzzParseRules(f *testing.F) {
	for _, seed := range []string{
		`{"api.example.com":[{"transform":{"headers":{"Authorization":"Bearer x"}}}]}`,
		`{"*.Example.com":[{"transform":{"headers":{"a":"1"}}},{"transform":{"headers":{"a":"2","b":"3"}}}]}`,
		`{"*":[]}`, `{"a.*.b":[{}]}`, `{"x":null}`, `[]`, `null`, `{"":[{"transform":null}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		rules, err := parseRules(json.RawMessage(raw))
		if err != nil {
			return
		}
		if len(rules) > maxHeaderRules {
			t.Fatalf("%d rules", len(rules))
		}
		for _, r := range rules {
			if r.Host != strings.ToLower(r.Host) || r.Host == "" || r.Host == "*" {
				t.Fatalf("host %q", r.Host)
			}
			if i := strings.Index(r.Host, "*"); i >= 0 && (i != 0 || !strings.HasPrefix(r.Host, "*.") || strings.Count(r.Host, "*") != 1) {
				t.Fatalf("wildcard host %q", r.Host)
			}
			if len(r.Headers) == 0 {
				t.Fatalf("host %q without headers", r.Host)
			}
		}
	})
}
