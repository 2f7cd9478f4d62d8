package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// The endpoint proxy lets nothing through without a valid token for the
// port, and never reaches the hooks port.
func TestProxyRefusals(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	sbx := p.create(ctx)
	defer sbx.Kill(ctx)
	mv, err := microvms.New(p.endpoint, microvms.Unsigned())
	if err != nil {
		t.Fatal(err)
	}
	vm, err := mv.GetMicrovm(ctx, sbx.ID())
	if err != nil {
		t.Fatal(err)
	}
	port := 8080
	good, err := mv.CreateMicrovmAuthToken(ctx, sbx.ID(), &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 1, AllowedPorts: []microvmsapi.AllowedPort{{Port: &port}}})
	if err != nil {
		t.Fatal(err)
	}
	health := func(headers map[string]string) int {
		req, _ := http.NewRequest(http.MethodPost, p.endpoint+"/rayito.rayd.v1.HealthService/Health", bytes.NewReader([]byte("{}")))
		req.Host = vm.Endpoint
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 {
			var h map[string]any
			if json.Unmarshal(body, &h) != nil || h["sandboxId"] != sbx.ID() {
				t.Fatalf("health through the proxy: %s", body)
			}
		}
		return resp.StatusCode
	}
	if got := health(map[string]string{"x-aws-proxy-auth": good}); got != 200 {
		t.Fatalf("valid token: %d", got)
	}
	cases := map[string]struct {
		headers map[string]string
		want    int
	}{
		"no token":          {map[string]string{}, 403},
		"garbage token":     {map[string]string{"x-aws-proxy-auth": "x.y.z.w.v"}, 403},
		"port not in token": {map[string]string{"x-aws-proxy-auth": good, "x-aws-proxy-port": "8081"}, 403},
		"hooks port":        {map[string]string{"x-aws-proxy-auth": good, "x-aws-proxy-port": "9000"}, 403},
		"bad port header":   {map[string]string{"x-aws-proxy-auth": good, "x-aws-proxy-port": "80a"}, 400},
	}
	for name, c := range cases {
		if got := health(c.headers); got != c.want {
			t.Errorf("%s: %d, want %d", name, got, c.want)
		}
	}
	// A token for another sandbox is refused.
	other, err := rayito.Create(ctx, p.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Kill(ctx)
	otherTok, err := mv.CreateMicrovmAuthToken(ctx, other.ID(), &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 1, AllowedPorts: []microvmsapi.AllowedPort{{Port: &port}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := health(map[string]string{"x-aws-proxy-auth": otherTok}); got != 403 {
		t.Fatalf("another sandbox's token: %d", got)
	}
	// Minting 9000 is refused by the SDK before any call.
	hooks := 9000
	if _, err := mv.CreateMicrovmAuthToken(ctx, sbx.ID(), &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 1, AllowedPorts: []microvmsapi.AllowedPort{{Port: &hooks}}}); err == nil || !strings.Contains(err.Error(), "9000") && !strings.Contains(strings.ToLower(err.Error()), "invalid") {
		t.Fatalf("minting 9000: %v", err)
	}
}
