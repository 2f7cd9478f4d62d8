package mcpserver

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rayito-dev/rayito/dashboard/hostguard"
)

// bearerTransport adds the bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestHTTPGuard: the HTTP transport answers only requests for its own
// host, from no origin or its own, with the token; such a client lists
// the tools.
func TestHTTPGuard(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	guard, err := hostguard.New(port, hostguard.Options{Bind: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	token := NewToken()
	hs := httptest.NewUnstartedServer(HTTPHandler(New(Options{}), guard, token))
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	url := hs.URL + Path
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tc := range []struct {
		name, host, origin, auth string
		want                     int
	}{
		{"no token", "", "", "", http.StatusUnauthorized},
		{"wrong token", "", "", "Bearer " + strings.Repeat("0", 64), http.StatusUnauthorized},
		{"basic", "", "", "Basic " + token, http.StatusUnauthorized},
		{"foreign host", "rebind.example:" + strconv.Itoa(port), "", "Bearer " + token, http.StatusMisdirectedRequest},
		{"host without port", "127.0.0.1", "", "Bearer " + token, http.StatusMisdirectedRequest},
		{"foreign origin", "", "http://evil.example", "Bearer " + token, http.StatusForbidden},
		{"null origin", "", "null", "Bearer " + token, http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}

	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
	}
	if got := strings.Join(names, " "); got != "create kill list_files list_sandboxes read_file run_code run_command write_file" {
		t.Errorf("tools: %s", got)
	}
}
