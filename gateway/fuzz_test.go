package gateway

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// FuzzCheckPlain: a plain-HTTP head from sandbox code never panics the
// check, and one carrying a placeholder (in clear or in Basic
// credentials) is always caught.
func FuzzCheckPlain(f *testing.F) {
	const token = "RAYITO-PLACEHOLDER-0123456789abcdef0123456789abcdef"
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + token + "\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nAuthorization: Basic dXNlcjpSQVlJVE8tUExBQ0VIT0xERVItMDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\r\n\r\n"))
	f.Add([]byte("GET /?k=" + token + " HTTP/1.1\r\n\r\n"))
	f.Add([]byte("authorization:basic ====\n\n"))
	g, err := New(Options{Listen: func(string, string) (net.Listener, error) { return nil, net.ErrClosed }})
	if err != nil {
		f.Fatal(err)
	}
	defer g.Close()
	if err := g.SetPlaceholders([]Placeholder{{Name: "K", Placeholder: token, Secret: "sk-fuzz-secret", Host: "api.example.com"}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		got := g.CheckPlain(head)
		if bytes.Contains(head, []byte(token)) && !got {
			t.Fatalf("a head with the placeholder in clear passed")
		}
	})
}

// FuzzRouteUpstream: any upstream string either is refused with a
// ConfigError that does not quote it, or is an https origin with nothing
// after the authority.
func FuzzRouteUpstream(f *testing.F) {
	for _, s := range []string{"https://api.example.com", "https://api.example.com:8443", "http://x", "https://u:p@x", "https://x/", "https://x/path",
		"https://x?q", "https://x#f", "https://[::1]:443", "https://x:0", "https://x:99999", "HTTPS://X", "https://x\x00.y", "https://%61.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, up string) {
		r := Route{Name: "r", Upstream: up, Headers: []Header{{Name: "x-api-key", Secret: "sk-fuzz-secret"}}, Rules: []Rule{{Method: "GET", Path: "/*"}}}
		_, err := validateRoutes([]Route{r})
		if err != nil {
			// The fixed reasons name the expected form; the input itself
			// is never quoted.
			msg := strings.ReplaceAll(err.Error(), "https://host[:port]", "")
			if len(up) > 5 && strings.Contains(msg, up) {
				t.Fatalf("the error quotes the upstream: %v", err)
			}
			return
		}
		rest, ok := strings.CutPrefix(strings.ToLower(up), "https://")
		if !ok || strings.ContainsAny(rest, "/?#@\\ \t\r\n") || rest == "" {
			t.Fatalf("accepted upstream %q", up)
		}
	})
}

// FuzzContainsFold: containsFold agrees with a case-folded search.
func FuzzContainsFold(f *testing.F) {
	f.Add([]byte("X-Authorization: Basic x"), "authorization")
	f.Add([]byte("aUtHoRiZaTiOn"), "authorization")
	f.Add([]byte("a"), "ab")
	f.Fuzz(func(t *testing.T, b []byte, sub string) {
		if sub == "" || strings.ToLower(sub) != sub || strings.IndexFunc(sub, func(r rune) bool { return r >= 0x80 }) >= 0 {
			return
		}
		want := bytes.Contains(bytes.ToLower(b), []byte(sub))
		if strings.IndexFunc(string(b), func(r rune) bool { return r >= 0x80 }) >= 0 {
			return // ToLower of non-ASCII may change lengths
		}
		if got := containsFold(b, sub); got != want {
			t.Fatalf("containsFold(%q, %q) = %v", b, sub, got)
		}
	})
}
