package e2b

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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

// FuzzRouteTarget: any Host and any /files query never panic the
// router's parsers; a Host routes only as <digits>-<id>.<domain>, and a
// signature is valid only when the token made it.
func FuzzRouteTarget(f *testing.F) {
	for _, seed := range [][2]string{
		{"8000-microvm-1.e2b.localhost:3443", "path=a&signature=v1_x&signature_expiration=1"},
		{"49983-x.y", "path=&username=root&signature=v1_"},
		{"-.", "signature=&signature=v1_a"},
		{"api.e2b.localhost", "signature_expiration=99999999999999999999&signature=v1_a"},
		{"[::1]:80", "%zz"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, host, query string) {
		r := httptest.NewRequest("GET", "/files", nil)
		r.Host = host
		r.URL.RawQuery = query
		if id, port, ok := sandboxTarget(r); ok {
			if id == "" || port == "" || strings.Trim(port, "0123456789") != "" {
				t.Fatalf("host %q routed to %q port %q", host, id, port)
			}
		}
		if checkFileSignature(r, "the-token", time.Unix(1_800_000_000, 0)) == sigValid {
			q := r.URL.Query()
			raw := q.Get("path") + ":read:" + q.Get("username") + ":the-token"
			if q.Has("signature_expiration") {
				raw += ":" + q.Get("signature_expiration")
			}
			if q.Get("signature") != sign(q.Get("path"), "read", q.Get("username"), "the-token", q.Get("signature_expiration")) {
				t.Fatalf("query %q accepted without the token's signature (%q)", query, raw)
			}
		}
	})
}
