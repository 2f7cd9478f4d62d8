package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// auditLines renders the audit trail one record a line, without times.
func auditLines(g *Gateway) string {
	recs, dropped := g.Audit()
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s %s %s %s:%d %s %d\n", r.Mechanism, r.Name, r.Header, r.Host, r.Port, r.Outcome, r.Count)
	}
	if dropped > 0 {
		fmt.Fprintf(&b, "dropped %d\n", dropped)
	}
	return b.String()
}

// TestAudit: placeholders substituted, a placeholder sent to a host that
// does not hold it (through TLS interception and in clear), header rules
// and routes are counted per secret and host, never with a value.
func TestAudit(t *testing.T) {
	e := newEnv(t, nil)
	setPH(t, e)
	port := e.up.port
	if err := e.g.SetHeaderRules([]HeaderRule{{Host: upstreamDNS, Port: port, Headers: []Header{{Name: "X-Team", Secret: "team-secret-0001"}}}}); err != nil {
		t.Fatal(err)
	}
	c, _, _ := interceptClient(t, e, upstreamDNS, port)
	base := "https://" + upstreamDNS + ":" + strconv.Itoa(int(port))
	e.up.setExtra(func(w http.ResponseWriter, r *http.Request) bool {
		io.WriteString(w, "ok")
		return true
	})
	for range 2 {
		if resp, body := do(t, c, "POST", base+"/v1/messages", map[string]string{"X-Api-Key": canaryPH}); resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	}
	// OTHER_KEY's placeholder to API_KEY's host: refused, recorded.
	if resp, _ := do(t, c, "POST", base+"/v1/messages", map[string]string{"X-Api-Key": phOther}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a placeholder to the wrong host: %d", resp.StatusCode)
	}
	// In clear, to another host and to its own.
	if !e.g.CheckPlainTo([]byte("GET / HTTP/1.1\r\nHost: x.test\r\nX-Api-Key: "+canaryPH+"\r\n\r\n"), "X.test.", 0) {
		t.Fatal("CheckPlainTo missed the placeholder")
	}
	if !e.g.CheckPlainTo([]byte("GET / HTTP/1.1\r\nX-Key: "+phOther+"\r\n\r\n"), "other.test", 80) {
		t.Fatal("CheckPlainTo missed the placeholder")
	}
	if e.g.CheckPlainTo([]byte("GET / HTTP/1.1\r\n\r\n"), "x.test", 80) {
		t.Fatal("CheckPlainTo found a placeholder in nothing")
	}
	setRoute(t, e, basicRoute(e, "api"))
	if resp, body := rawDo(t, e.route("api").Port, "GET", "/v1/x"); resp.StatusCode != 200 {
		t.Fatalf("route: %d %q", resp.StatusCode, body)
	}
	p := strconv.Itoa(int(port))
	want := "gateway_route api Authorization " + upstreamDNS + ":" + p + " sent 1\n" +
		"gateway_route api X-Api-Key " + upstreamDNS + ":" + p + " sent 1\n" +
		"header_rule  X-Team " + upstreamDNS + ":" + p + " sent 2\n" +
		"placeholder API_KEY  " + upstreamDNS + ":" + p + " sent 2\n" +
		"placeholder API_KEY  x.test:80 wrong_host 1\n" +
		"placeholder OTHER_KEY  " + upstreamDNS + ":" + p + " wrong_host 1\n" +
		"placeholder OTHER_KEY  other.test:80 plain_http 1\n"
	if got := auditLines(e.g); got != want {
		t.Errorf("audit:\n%s\nwant:\n%s", got, want)
	}
	recs, _ := e.g.Audit()
	for _, r := range recs {
		s := fmt.Sprintf("%+v", r)
		for _, secret := range []string{phSecret, phSecret2, canaryPH, phOther, canary, "team-secret-0001"} {
			if strings.Contains(s, secret) {
				t.Errorf("a record holds a secret or a placeholder: %s", s)
			}
		}
		if r.Last.IsZero() {
			t.Errorf("no time: %+v", r)
		}
	}
}

// TestAuditBounded: past maxAuditEntries distinct records, requests are
// only counted as dropped.
func TestAuditBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	setPH(t, e)
	for i := range maxAuditEntries + 5 {
		e.g.CheckPlainTo([]byte("X: "+canaryPH), "h"+strconv.Itoa(i)+".test", 80)
	}
	recs, dropped := e.g.Audit()
	if len(recs) != maxAuditEntries || dropped != 5 {
		t.Errorf("%d records, %d dropped", len(recs), dropped)
	}
}
