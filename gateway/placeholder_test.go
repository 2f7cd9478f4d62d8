package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	phSecret  = "real-secret-value-ABCDEFGH"
	phOther   = "PH_OTHER_host_placeholder_00000000"
	phSecret2 = "other-secret-value-1234567"
)

// interceptClient returns an HTTP client whose connections are handed to
// ServeIntercepted for host:port over net.Pipe (with the first bytes of the
// ClientHello passed as replay).
func interceptClient(t *testing.T, e *env, host string, port uint16) (*http.Client, *sync.WaitGroup, context.CancelFunc) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(e.g.CACertPEM()) {
		t.Fatal("bad CA PEM")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	tr := &http.Transport{
		DialContext: func(_ context.Context, _, _ string) (net.Conn, error) {
			c1, c2 := net.Pipe()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 7)
				n, _ := io.ReadFull(c2, buf)
				e.g.ServeIntercepted(ctx, c2, buf[:n], host, port)
			}()
			return c1, nil
		},
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
	}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		cancel()
		wg.Wait()
	})
	return &http.Client{Transport: tr}, &wg, cancel
}

func setPH(t *testing.T, e *env, extra ...Placeholder) {
	t.Helper()
	ps := append([]Placeholder{{
		Name:        "API_KEY",
		Placeholder: canaryPH,
		Secret:      phSecret,
		Host:        upstreamDNS,
		Port:        e.up.port,
		Rules:       []Rule{{Method: "*", Path: "/v1/*"}},
	}, {
		Name:        "OTHER_KEY",
		Placeholder: phOther,
		Secret:      phSecret2,
		Host:        "other.test",
	}}, extra...)
	if err := e.g.SetPlaceholders(ps); err != nil {
		t.Fatal(err)
	}
}

func phStatus(e *env, name string) PlaceholderStatus {
	for _, p := range e.g.Placeholders() {
		if p.Name == name {
			return p
		}
	}
	return PlaceholderStatus{}
}

func do(t *testing.T, c *http.Client, method, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestPlaceholderReplace(t *testing.T) {
	e := newEnv(t, nil)
	setPH(t, e)
	if !e.g.Intercepts("EXAMPLE.com.", e.up.port) || e.g.Intercepts(upstreamDNS, 443) || !e.g.Intercepts("other.test", 0) || e.g.Intercepts("x.test", 443) {
		t.Fatal("Intercepts")
	}
	c, _, _ := interceptClient(t, e, upstreamDNS, e.up.port)
	base := "https://" + upstreamDNS + ":" + strconv.Itoa(int(e.up.port))
	e.up.setExtra(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("X-Echo", r.Header.Get("X-Api-Key"))
		w.Header().Set("X-Other", "fine")
		io.WriteString(w, "ok")
		return true
	})

	resp, body := do(t, c, "POST", base+"/v1/messages?x=1", map[string]string{
		"Authorization": "Bearer " + canaryPH,
		"X-Api-Key":     canaryPH,
		"X-Both":        "a " + canaryPH + " b " + canaryPH,
	})
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	if resp.Proto != "HTTP/1.1" || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "http/1.1" {
		t.Fatalf("proto %s", resp.Proto)
	}
	got := e.up.last(t)
	if got.Header.Get("Authorization") != "Bearer "+phSecret || got.Header.Get("X-Api-Key") != phSecret ||
		got.Header.Get("X-Both") != "a "+phSecret+" b "+phSecret {
		t.Fatalf("not replaced: %v", got.Header)
	}
	if got.RequestURI != "/v1/messages?x=1" {
		t.Fatalf("uri %q", got.RequestURI)
	}
	if resp.Header.Get("X-Echo") != "" || resp.Header.Get("X-Other") != "fine" {
		t.Fatalf("response not scrubbed: %v", resp.Header)
	}
	if st := phStatus(e, "API_KEY"); st.Injected != 1 {
		t.Fatalf("%+v", st)
	}

	// Basic credentials: placeholder as password and as user.
	for _, cred := range []string{"user:" + canaryPH, canaryPH + ":x"} {
		enc := base64.StdEncoding.EncodeToString([]byte(cred))
		resp, _ = do(t, c, "GET", base+"/v1/x", map[string]string{"Authorization": "Basic " + enc})
		if resp.StatusCode != 200 {
			t.Fatal(resp.StatusCode)
		}
		want := strings.ReplaceAll(cred, canaryPH, phSecret)
		v := e.up.last(t).Header.Get("Authorization")
		dec, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(v, "Basic "))
		if err != nil || string(dec) != want {
			t.Fatalf("basic %q", dec)
		}
	}

	// No placeholder: forwarded unchanged, without a path check.
	hits := e.up.hits.Load()
	resp, _ = do(t, c, "GET", base+"/anything/..;/x", map[string]string{"X-Api-Key": "plain"})
	if resp.StatusCode != 200 || e.up.hits.Load() != hits+1 {
		t.Fatal("plain request not forwarded")
	}
	got = e.up.last(t)
	if got.RequestURI != "/anything/..;/x" || got.Header.Get("X-Api-Key") != "plain" {
		t.Fatalf("changed: %q %v", got.RequestURI, got.Header)
	}

	// Placeholder of another host.
	hits = e.up.hits.Load()
	resp, body = do(t, c, "GET", base+"/v1/x", map[string]string{"X-Api-Key": phOther})
	wantRefusal(t, resp, body, http.StatusForbidden, ClassBlocked)
	if e.up.hits.Load() != hits {
		t.Fatal("blocked request forwarded")
	}
	if st := phStatus(e, "OTHER_KEY"); st.Blocked != 1 || st.LastErrorClass != ClassBlocked {
		t.Fatalf("%+v", st)
	}
	// Both placeholders: still blocked.
	resp, body = do(t, c, "GET", base+"/v1/x", map[string]string{"X-Api-Key": canaryPH, "X-B": phOther})
	wantRefusal(t, resp, body, http.StatusForbidden, ClassBlocked)
	// In Basic credentials.
	enc := base64.StdEncoding.EncodeToString([]byte("u:" + phOther))
	resp, body = do(t, c, "GET", base+"/v1/x", map[string]string{"Authorization": "Basic " + enc})
	wantRefusal(t, resp, body, http.StatusForbidden, ClassBlocked)
	// In the request line.
	resp, body = do(t, c, "GET", base+"/v1/x?k="+phOther, nil)
	wantRefusal(t, resp, body, http.StatusForbidden, ClassBlocked)
	if e.up.hits.Load() != hits {
		t.Fatal("blocked request forwarded")
	}

	// Rule mismatch and bad path.
	resp, body = do(t, c, "GET", base+"/v2/x", map[string]string{"X-Api-Key": canaryPH})
	wantRefusal(t, resp, body, http.StatusForbidden, ClassNotAllowed)
	resp, body = do(t, c, "GET", base+"/v1/%2e%2e/x", map[string]string{"X-Api-Key": canaryPH})
	wantRefusal(t, resp, body, http.StatusForbidden, ClassNotAllowed)
	if e.up.hits.Load() != hits {
		t.Fatal("refused request forwarded")
	}
	if st := phStatus(e, "API_KEY"); st.LastErrorClass != ClassNotAllowed {
		t.Fatalf("%+v", st)
	}

	// Placeholder in its own host's request line only: forwarded unchanged.
	resp, _ = do(t, c, "GET", base+"/v1/x?k="+canaryPH, nil)
	if resp.StatusCode != 200 || e.up.last(t).RequestURI != "/v1/x?k="+canaryPH {
		t.Fatal("request-line placeholder")
	}
}

func TestPlaceholderRateLimit(t *testing.T) {
	e := newEnv(t, nil)
	setPH(t, e)
	ps := []Placeholder{{Name: "K", Placeholder: canaryPH, Secret: phSecret, Host: upstreamDNS, Port: e.up.port, RatePerMinute: 1}}
	if err := e.g.SetPlaceholders(ps); err != nil {
		t.Fatal(err)
	}
	c, _, _ := interceptClient(t, e, upstreamDNS, e.up.port)
	base := "https://" + upstreamDNS + ":" + strconv.Itoa(int(e.up.port))
	if resp, _ := do(t, c, "GET", base+"/any/path", map[string]string{"X-Api-Key": canaryPH}); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	resp, body := do(t, c, "GET", base+"/any/path", map[string]string{"X-Api-Key": canaryPH})
	wantRefusal(t, resp, body, http.StatusTooManyRequests, ClassRateLimited)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	if len(e.g.Placeholders()) != 1 {
		t.Fatal("old placeholders kept")
	}
}

func TestPlaceholderCert(t *testing.T) {
	e := newEnv(t, nil)
	setPH(t, e)
	block, _ := pem.Decode(e.g.CACertPEM())
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	now := *e.now.Load()
	if !caCert.IsCA || caCert.MaxPathLen != 0 || !caCert.MaxPathLenZero || caCert.KeyUsage&x509.KeyUsageCertSign == 0 ||
		!strings.HasPrefix(caCert.Subject.CommonName, "Rayito sandbox CA ") || len(caCert.Subject.CommonName) != len("Rayito sandbox CA ")+8 ||
		caCert.PublicKeyAlgorithm != x509.ECDSA {
		t.Fatalf("CA %+v", caCert.Subject)
	}
	if d := now.Sub(caCert.NotBefore); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatal("NotBefore")
	}
	if d := caCert.NotAfter.Sub(now); d < 396*24*time.Hour || d > 398*24*time.Hour {
		t.Fatal("NotAfter")
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	c1, c2 := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.g.ServeIntercepted(context.Background(), c2, nil, "Example.COM.", e.up.port)
	}()
	tc := tls.Client(c1, &tls.Config{RootCAs: pool, ServerName: upstreamDNS, NextProtos: []string{"h2", "http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	st := tc.ConnectionState()
	leaf := st.PeerCertificates[0]
	if st.NegotiatedProtocol != "http/1.1" || leaf.NotAfter.After(caCert.NotAfter) || leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Fatalf("leaf %v %v", st.NegotiatedProtocol, leaf.NotAfter)
	}
	tc.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ServeIntercepted did not return after the client closed")
	}
	// ctx cancel ends a connection.
	c1, c2 = net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() {
		defer close(done)
		e.g.ServeIntercepted(ctx, c2, nil, upstreamDNS, e.up.port)
	}()
	tc = tls.Client(c1, &tls.Config{RootCAs: pool, ServerName: upstreamDNS})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ServeIntercepted did not return after ctx ended")
	}
	tc.Close()
}

func TestCheckPlain(t *testing.T) {
	e := newEnv(t, nil)
	setPH(t, e)
	if e.g.CheckPlain([]byte("GET /x HTTP/1.1\r\nHost: a\r\nX-Api-Key: nothing\r\n\r\n")) {
		t.Fatal("false positive")
	}
	if !e.g.CheckPlain([]byte("GET /x HTTP/1.1\r\nHost: a\r\nX-Api-Key: " + canaryPH + "\r\n\r\n")) {
		t.Fatal("header placeholder missed")
	}
	if !e.g.CheckPlain([]byte("GET /x?k=" + phOther + " HTTP/1.1\r\nHost: a\r\n\r\n")) {
		t.Fatal("request-line placeholder missed")
	}
	enc := base64.StdEncoding.EncodeToString([]byte("u:" + canaryPH))
	if !e.g.CheckPlain([]byte("GET / HTTP/1.1\r\nauthorization: Basic " + enc + "\r\n\r\n")) {
		t.Fatal("basic placeholder missed")
	}
	if st := phStatus(e, "API_KEY"); st.Blocked != 2 || st.LastErrorClass != ClassBlocked {
		t.Fatalf("%+v", st)
	}
	if st := phStatus(e, "OTHER_KEY"); st.Blocked != 1 {
		t.Fatalf("%+v", st)
	}
}

func TestPlaceholderConfig(t *testing.T) {
	e := newEnv(t, nil)
	setPH(t, e)
	good := Placeholder{Name: "A", Placeholder: canaryPH, Secret: canary, Host: "api.example.com"}
	bad := []struct {
		field string
		mod   func(*Placeholder)
	}{
		{"placeholders[0].name", func(p *Placeholder) { p.Name = "1A" }},
		{"placeholders[0].placeholder", func(p *Placeholder) { p.Placeholder = "short" }},
		{"placeholders[0].placeholder", func(p *Placeholder) { p.Placeholder = canaryPH + "!" }},
		{"placeholders[0].secret", func(p *Placeholder) { p.Secret = "" }},
		{"placeholders[0].secret", func(p *Placeholder) { p.Secret = canary + "\n" }},
		{"placeholders[0].secret", func(p *Placeholder) { p.Secret = canary + "\x00" }},
		{"placeholders[0].host", func(p *Placeholder) { p.Host = "API.example.com" }},
		{"placeholders[0].host", func(p *Placeholder) { p.Host = "*.example.com" }},
		{"placeholders[0].host", func(p *Placeholder) { p.Host = "127.0.0.1" }},
		{"placeholders[0].host", func(p *Placeholder) { p.Host = "::1" }},
		{"placeholders[0].host", func(p *Placeholder) { p.Host = "example.com." }},
		{"placeholders[0].rules[0].method", func(p *Placeholder) { p.Rules = []Rule{{Method: "get", Path: "/"}} }},
		{"placeholders[0].rules[0].path", func(p *Placeholder) { p.Rules = []Rule{{Method: "GET", Path: "/a/../b"}} }},
		{"placeholders[0].rate_per_minute", func(p *Placeholder) { p.RatePerMinute = 6001 }},
	}
	for _, c := range bad {
		p := good
		c.mod(&p)
		err := e.g.SetPlaceholders([]Placeholder{p})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: err %v", c.field, err)
			continue
		}
		checkNoLeak(t, err.Error())
	}
	// duplicates
	dup := []Placeholder{good, good}
	dup[1].Placeholder = canaryPH + "x"
	if err := e.g.SetPlaceholders(dup); err == nil {
		t.Fatal("duplicate name accepted")
	}
	dup[1].Name = "B"
	if err := e.g.SetPlaceholders(dup); err == nil {
		t.Fatal("overlapping placeholder accepted")
	} else {
		checkNoLeak(t, err.Error())
	}
	dup[1].Placeholder = canaryPH
	if err := e.g.SetPlaceholders(dup); err == nil {
		t.Fatal("duplicate placeholder accepted")
	}
	var many []Placeholder
	for i := 0; i < 17; i++ {
		p := good
		p.Name = "P" + strconv.Itoa(i)
		p.Placeholder = strings.Repeat(string(rune('a'+i)), 30)
		many = append(many, p)
	}
	if err := e.g.SetPlaceholders(many); err == nil {
		t.Fatal("17 placeholders accepted")
	}
	if err := e.g.SetPlaceholders(many[:16]); err != nil {
		t.Fatal(err)
	}
	if len(e.g.Placeholders()) != 16 {
		t.Fatal("not 16")
	}
}
