package rayito

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCappedOutput(t *testing.T) {
	t.Parallel()
	var c capped
	c.write([]byte("hello"), 8)
	c.write([]byte("world"), 8)
	if string(c.buf) != "hellowor" || !c.truncated {
		t.Fatalf("%q %v", c.buf, c.truncated)
	}
}

func TestConfigBackendSelection(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	c := newConfig([]Option{withGetenv(getenv)})
	if c.backend != BackendLocal || c.endpoint != DefaultLocalEndpoint {
		t.Fatalf("default %+v", c)
	}
	env["RAYITO_BACKEND"] = "aws"
	env["RAYITO_TEMPLATE"] = "arn:aws:lambda:us-east-1:1:microvm-image:x"
	c = newConfig([]Option{withGetenv(getenv)})
	if c.backend != BackendAWS || c.endpoint != "" || c.template == "" {
		t.Fatalf("env %+v", c)
	}
	c = newConfig([]Option{withGetenv(getenv), WithBackend(BackendLocal), WithEndpoint("http://127.0.0.1:1")})
	if c.backend != BackendLocal || c.endpoint != "http://127.0.0.1:1" {
		t.Fatalf("explicit %+v", c)
	}
}

func TestCreateRefusesBadOptionsLocally(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := Create(ctx, WithEndpoint("http://127.0.0.1:1"), WithTimeout(time.Millisecond)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("tiny timeout: %v", err)
	}
	if _, err := Create(ctx, WithBackend(BackendAWS), withGetenv(func(string) string { return "" })); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("aws without template: %v", err)
	}
	if _, err := Create(ctx, WithEndpoint("http://127.0.0.1:1"), WithEnvs(map[string]string{"BAD=NAME": "x"})); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad env: %v", err)
	}
	if _, err := Connect(ctx, "microvm-1", WithAccessToken("not a token")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad token: %v", err)
	}
	// The local platform has its two images and the templates built on
	// it: a name that cannot be one is refused before any call (whether
	// a valid name was built is the platform's answer).
	if _, err := Create(ctx, WithEndpoint("http://127.0.0.1:1"), WithTemplate("python:3.12")); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), `"python:3.12" cannot name one`) {
		t.Fatalf("local with another template: %v", err)
	}
	for _, tmpl := range []string{LocalTemplate, LocalRootTemplate, "my-template"} {
		if _, err := Create(ctx, WithEndpoint("http://127.0.0.1:1"), WithTemplate(tmpl)); errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("local with its own template %s: %v", tmpl, err)
		}
	}
}

// TestCreateFailsAtOnceWhenTheBootFailed: the local platform answers
// RunMicrovm after the boot; a sandbox that ended during it is an
// ErrSandboxEnded without any polling, and the platform's reason is kept.
func TestCreateFailsAtOnceWhenTheBootFailed(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"microvmId":"microvm-1","state":"TERMINATING","stateReason":"launch failed: no cgroups","endpoint":"x.microvms.localhost"}`)
	}))
	defer srv.Close()
	_, err := Create(t.Context(), WithBackend(BackendLocal), WithEndpoint(srv.URL))
	if !errors.Is(err, ErrSandboxEnded) || !strings.Contains(err.Error(), "no cgroups") {
		t.Fatalf("Create = %v, want ErrSandboxEnded with the reason", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d requests, want only RunMicrovm", n)
	}
}
