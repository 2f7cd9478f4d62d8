package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// forbiddenOutput must never appear in an error, status or log.
var forbiddenOutput = []string{canary, canaryPH, phSecret, phSecret2, phOther, upstreamDNS, "other.test", "/v1/", "x-api-key-value"}

func checkNoLeak(t *testing.T, s string) {
	t.Helper()
	for _, f := range forbiddenOutput {
		if strings.Contains(s, f) {
			t.Errorf("output leaks %q: %s", f, s)
		}
	}
}

func TestRouteConfigErrors(t *testing.T) {
	e := newEnv(t, nil)
	setRoute(t, e, basicRoute(e, "keep"))
	port := e.route("keep").Port
	good := func() Route { return basicRoute(e, "api") }
	cases := []struct {
		field string
		mod   func(*Route)
	}{
		{"routes[0].name", func(r *Route) { r.Name = "Api" }},
		{"routes[0].name", func(r *Route) { r.Name = "-api" }},
		{"routes[0].name", func(r *Route) { r.Name = strings.Repeat("a", 64) }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "http://example.com" }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "https://example.com/" }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "https://example.com/v1/" }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "https://example.com?x" }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "https://example.com#x" }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "https://u:" + canary + "@example.com" }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "https://example.com:0" }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "https://example.com:65536" }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "https://example.com:" }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "https://" }},
		{"routes[0].upstream", func(r *Route) { r.Upstream = "https://exa_mple.com" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "bad name" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "host" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "Content-Length" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "transfer-encoding" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "Connection" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "Keep-Alive" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "TE" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "Trailer" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "Upgrade" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "Proxy-Connection" }},
		{"routes[0].headers[0].name", func(r *Route) { r.Headers[0].Name = "proxy-authorization" }},
		{"routes[0].headers[1].name", func(r *Route) { r.Headers[1].Name = "X-API-KEY" }},
		{"routes[0].headers[0].secret", func(r *Route) { r.Headers[0].Secret = "" }},
		{"routes[0].headers[0].secret", func(r *Route) { r.Headers[0].Secret = canary + "\r" }},
		{"routes[0].headers[0].secret", func(r *Route) { r.Headers[0].Secret = canary + "\n" }},
		{"routes[0].headers[0].secret", func(r *Route) { r.Headers[0].Secret = canary + "\x00" }},
		{"routes[0].headers[0].prefix", func(r *Route) { r.Headers[0].Prefix = "Bearer\n" }},
		{"routes[0].rules", func(r *Route) { r.Rules = nil }},
		{"routes[0].rules[0].method", func(r *Route) { r.Rules[0].Method = "get" }},
		{"routes[0].rules[0].method", func(r *Route) { r.Rules[0].Method = "" }},
		{"routes[0].rules[0].path", func(r *Route) { r.Rules[0].Path = "v1" }},
		{"routes[0].rules[0].path", func(r *Route) { r.Rules[0].Path = "/v1//x" }},
		{"routes[0].rules[0].path", func(r *Route) { r.Rules[0].Path = "" }},
		{"routes[0].rate_per_minute", func(r *Route) { r.RatePerMinute = 6001 }},
	}
	for _, c := range cases {
		r := good()
		c.mod(&r)
		err := e.g.SetRoutes([]Route{r})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: got %v", c.field, err)
			continue
		}
		checkNoLeak(t, err.Error())
	}
	dup := []Route{good(), good()}
	if err := e.g.SetRoutes(dup); err == nil || !strings.Contains(err.Error(), "routes[1].name") {
		t.Fatalf("duplicate: %v", err)
	}
	// The previous set still runs.
	if rs := e.g.Routes(); len(rs) != 1 || rs[0].Name != "keep" || rs[0].Port != port {
		t.Fatalf("%+v", rs)
	}
	if resp, _ := rawDo(t, port, "GET", "/x"); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	// Accepted forms.
	for _, u := range []string{"https://example.com", "https://EXAMPLE.com:8443", "https://127.0.0.1:8443", "https://[::1]:8443", "https://[2001:db8::1]"} {
		r := good()
		r.Upstream = u
		if err := e.g.SetRoutes([]Route{r}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestStringersOmitSecrets(t *testing.T) {
	e := newEnv(t, nil)
	r := basicRoute(e, "api")
	p := Placeholder{Name: "API_KEY", Placeholder: canaryPH, Secret: phSecret, Host: upstreamDNS}
	for _, v := range []any{r, &r, r.Headers[0], p, &p, []Route{r}, []Placeholder{p}} {
		for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
			checkNoLeak(t, fmt.Sprintf(f, v))
		}
	}
	var sb logBuf
	l := slog.New(slog.NewJSONHandler(&sb, nil))
	l.Info("x", "route", r, "header", r.Headers[0], "placeholder", p)
	checkNoLeak(t, sb.String())
	if !strings.Contains(sb.String(), "API_KEY") {
		t.Fatal("LogValue lost the name")
	}
}

// TestNoLeakEverywhere runs a mix of traffic and searches every log,
// status and error for secrets, placeholders, hosts and paths.
func TestNoLeakEverywhere(t *testing.T) {
	e := newEnv(t, nil)
	setRoute(t, e, basicRoute(e, "api"))
	setPH(t, e)
	port := e.route("api").Port
	rawDo(t, port, "GET", "/v1/ok")
	rawDo(t, port, "GET", "/v1/%2e%2e/x")
	rawDo(t, port, "GET", "/v1/;x")
	c, _, _ := interceptClient(t, e, upstreamDNS, e.up.port)
	base := "https://" + upstreamDNS + ":" + strconv.Itoa(int(e.up.port))
	do(t, c, "GET", base+"/v1/x", map[string]string{"X-Api-Key": canaryPH})
	do(t, c, "GET", base+"/v2/x", map[string]string{"X-Api-Key": canaryPH})
	do(t, c, "GET", base+"/v1/x", map[string]string{"X-Api-Key": phOther})
	e.g.CheckPlain([]byte("GET / HTTP/1.1\r\nX: " + canaryPH + "\r\n\r\n"))
	e.up.setExtra(func(w http.ResponseWriter, r *http.Request) bool {
		panic(http.ErrAbortHandler)
	})
	rawDo(t, port, "GET", "/v1/ok")
	checkNoLeak(t, fmt.Sprintf("%+v %+v", e.g.Routes(), e.g.Placeholders()))
	e.g.Close()
	logs := e.logs.String()
	if !strings.Contains(logs, "route=api") || !strings.Contains(logs, "placeholder=API_KEY") {
		t.Fatalf("expected logs missing: %s", logs)
	}
	checkNoLeak(t, logs)
	if err := e.g.SetRoutes(nil); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	// The upstream stays up: its connection goroutines only end if the
	// gateway closes its upstream connections.
	up := newTestUpstream(t)
	time.Sleep(20 * time.Millisecond)
	base := runtime.NumGoroutine()
	func() {
		e := newEnvWith(t, up, nil)
		setRoute(t, e, basicRoute(e, "api"), basicRoute(e, "gone"))
		setPH(t, e)
		for i := 0; i < 3; i++ {
			rawDo(t, e.route("api").Port, "GET", "/v1/x")
			rawDo(t, e.route("gone").Port, "GET", "/v1/x")
		}
		// Keep-alive client connection left open at Close.
		client := &http.Client{}
		resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(int(e.route("api").Port)) + "/v1/keep")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		setRoute(t, e, basicRoute(e, "api")) // removes "gone"
		c, wg, cancel := interceptClient(t, e, upstreamDNS, e.up.port)
		base := "https://" + upstreamDNS + ":" + strconv.Itoa(int(e.up.port))
		do(t, c, "GET", base+"/v1/x", map[string]string{"X-Api-Key": canaryPH})
		do(t, c, "GET", base+"/plain", nil)
		e.g.Close()
		cancel()
		c.CloseIdleConnections()
		client.CloseIdleConnections()
		wg.Wait()
	}()
	waitGoroutines(t, base)
}
