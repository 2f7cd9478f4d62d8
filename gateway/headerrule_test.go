package gateway

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"
)

// TestHeaderRules: a rule's headers replace the request's own on every
// request to its host; an exact rule beats a wildcard, which matches
// subdomains only; a rule claims the host for interception but grants
// nothing; echoed values are scrubbed from answers.
func TestHeaderRules(t *testing.T) {
	e := newEnv(t, nil)
	port := e.up.port
	rules := []HeaderRule{
		{Host: "*.com", Port: port, Headers: []Header{{Name: "X-Wild", Secret: "wild-value-123456"}}},
		{Host: upstreamDNS, Port: port, Headers: []Header{{Name: "authorization", Prefix: "Bearer ", Secret: phSecret}, {Name: "X-Team", Secret: "t"}}},
	}
	if err := e.g.SetHeaderRules(rules); err != nil {
		t.Fatal(err)
	}
	switch {
	case !e.g.Intercepts("EXAMPLE.com.", port), !e.g.Intercepts("a.b.com", port):
		t.Fatal("a rule's host is not intercepted")
	case e.g.Intercepts("com", port), e.g.Intercepts(upstreamDNS, 443), e.g.Intercepts("example.org", port):
		t.Fatal("a host no rule matches is intercepted")
	case e.g.Grants(upstreamDNS, port):
		t.Fatal("a header rule granted access")
	}
	c, _, _ := interceptClient(t, e, upstreamDNS, port)
	base := "https://" + upstreamDNS + ":" + strconv.Itoa(int(port))
	e.up.setExtra(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		io.WriteString(w, "ok")
		return true
	})
	resp, body := do(t, c, "GET", base+"/v1/x", map[string]string{"Authorization": "Bearer forged", "X-Mine": "kept"})
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	got := e.up.last(t)
	if v := got.Header.Values("Authorization"); len(v) != 1 || v[0] != "Bearer "+phSecret {
		t.Fatalf("Authorization %q: want only the rule's", v)
	}
	if got.Header.Get("X-Team") != "t" || got.Header.Get("X-Mine") != "kept" || got.Header.Get("X-Wild") != "" {
		t.Fatalf("headers %v: want the exact rule's alone (rules are not merged) and the request's own", got.Header)
	}
	if resp.Header.Get("X-Echo") != "" {
		t.Fatal("the answer echoed the rule's secret")
	}

	// Without the exact rule, the wildcard's headers apply.
	if err := e.g.SetHeaderRules(rules[:1]); err != nil {
		t.Fatal(err)
	}
	if resp, _ := do(t, c, "GET", base+"/", map[string]string{"X-Wild": "forged"}); resp.StatusCode != 200 {
		t.Fatalf("wildcard: %d", resp.StatusCode)
	}
	if got := e.up.last(t); got.Header.Get("X-Wild") != "wild-value-123456" || got.Header.Get("Authorization") != "" {
		t.Fatalf("wildcard headers %v", got.Header)
	}

	// Clearing the rules stops the interception.
	if err := e.g.SetHeaderRules(nil); err != nil || e.g.Intercepts(upstreamDNS, port) {
		t.Fatalf("cleared: %v", err)
	}
}

func TestHeaderRulesConfig(t *testing.T) {
	e := newEnv(t, nil)
	h := []Header{{Name: "X-Key", Secret: "v"}}
	for _, c := range []struct {
		rules []HeaderRule
		field string
	}{
		{[]HeaderRule{{Host: "*", Headers: h}}, "header_rules[0].host"},
		{[]HeaderRule{{Host: "*.*.example.com", Headers: h}}, "header_rules[0].host"},
		{[]HeaderRule{{Host: "Example.com", Headers: h}}, "header_rules[0].host"},
		{[]HeaderRule{{Host: "10.0.0.1", Headers: h}}, "header_rules[0].host"},
		{[]HeaderRule{{Host: "example.com"}}, "header_rules[0].headers"},
		{[]HeaderRule{{Host: "a.com", Headers: h}, {Host: "a.com", Port: 443, Headers: h}}, "header_rules[1].host"},
		{[]HeaderRule{{Host: "a.com", Headers: []Header{{Name: "Host", Secret: "x"}}}}, "header_rules[0].headers[0].name"},
		{[]HeaderRule{{Host: "a.com", Headers: []Header{{Name: "X", Secret: "a\nb"}}}}, "header_rules[0].headers[0].secret"},
		{[]HeaderRule{{Host: "a.com", Headers: []Header{{Name: "X", Secret: "a"}, {Name: "x", Secret: "b"}}}}, "header_rules[0].headers[1].name"},
	} {
		err := e.g.SetHeaderRules(c.rules)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%v: %v, want a ConfigError on %s", c.rules, err, c.field)
		}
	}
	many := make([]HeaderRule, MaxHeaderRules+1)
	for i := range many {
		many[i] = HeaderRule{Host: "h" + strconv.Itoa(i) + ".com", Headers: h}
	}
	if err := e.g.SetHeaderRules(many); err == nil {
		t.Error("more than MaxHeaderRules accepted")
	}
	// Nothing of the refused sets is in force.
	if e.g.Intercepts("a.com", 443) {
		t.Error("a refused set was applied")
	}
	// Values never show in String.
	if s := (HeaderRule{Host: "secret-host.com", Headers: []Header{{Name: "X", Secret: "sekrit"}}}).String(); s != "gateway.HeaderRule{Headers:1}" {
		t.Errorf("String %q", s)
	}
}
