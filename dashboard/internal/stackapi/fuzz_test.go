package stackapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// FuzzHandle: arbitrary methods, paths, Authorization, Origin,
// Content-Type, bodies (plain or base64) and queries through the handler
// with actions and cost on: no panic, the security headers and JSON error
// codes on every answer, no CORS header, and no AWS call at all without a
// valid token (every fuzzed token is forged).
func FuzzHandle(f *testing.F) {
	f.Add("GET", "/api/v1/sandboxes", "Bearer a.b.c", "", "", "", false, "")
	f.Add("POST", "/api/v1/actions", "Bearer eyJhbGciOiJub25lIn0.e30.", tOrigin, "application/json", `{"action":"kill","ids":["x"],"confirm":true}`, false, "")
	f.Add("POST", "/api/v1/actions", "bearer x", tOrigin, "application/json; charset=utf-8", "eyJ9", true, "")
	f.Add("GET", "/api/v1/cost", "Bearer x", "", "", "", false, "from=2026-01&to=2026-12&region=eu-west-1")
	f.Add("GET", "/config.json", "", "", "", "", false, "")
	f.Fuzz(func(t *testing.T, method, path, auth, origin, ctype, body string, b64 bool, query string) {
		r := newRig(t, true, &Audit{API: failingPut{}, Table: "x"})
		r.h.Config.EnableCostExplorer = true
		cex := &fakeCE{}
		r.h.Cost = &Cost{State: CostStateTable{API: nil, Table: "x"}, CE: cex}
		var req events.LambdaFunctionURLRequest
		req.RequestContext.HTTP.Method = method
		req.RequestContext.HTTP.Path = path
		req.Headers = map[string]string{"authorization": auth, "origin": origin, "content-type": ctype}
		req.Body, req.IsBase64Encoded = body, b64
		req.QueryStringParameters = map[string]string{}
		for _, kv := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			req.QueryStringParameters[k] = v
		}
		resp, err := r.h.Handle(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Headers["Content-Security-Policy"] != CSP || resp.Headers["X-Content-Type-Options"] != "nosniff" {
			t.Fatalf("security headers missing: %v", resp.Headers)
		}
		for k := range resp.Headers {
			if strings.HasPrefix(strings.ToLower(k), "access-control-") {
				t.Fatalf("CORS header %s", k)
			}
		}
		if resp.StatusCode >= 400 {
			var m map[string]string
			if json.Unmarshal([]byte(resp.Body), &m) != nil || messages[m["code"]] == "" {
				t.Fatalf("error body %q", resp.Body)
			}
		}
		if r.cp.lists.Load()+r.cp.acts.Load()+r.cog.calls.Load()+cex.n.Load() != 0 || len(r.assumed) != 0 {
			t.Fatal("an AWS call without a valid token")
		}
	})
}
