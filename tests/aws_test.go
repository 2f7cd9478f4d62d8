package tests

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

// awsTestCredentials are the scripted fake's default credentials.
var awsTestCredentials = aws.Credentials{AccessKeyID: "AKIDRAYITOTEST", SecretAccessKey: "rayito-test-secret", Source: "test"}

// awsFake is the scripted AWS fake in front of a real local platform:
// the control plane is signed and checked like the service, and the
// endpoint proxy (TLS, a test CA) forwards to the platform's sandboxes.
type awsFake struct {
	*microvmstest.Server
	p       *platform
	backend *microvms.Client // the platform's own, unsigned
	clock   *fakeNow
}

// fakeNow is the fake's clock, which a test moves forward.
type fakeNow struct{ offset atomic.Int64 }

func (c *fakeNow) now() time.Time      { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *fakeNow) set(d time.Duration) { c.offset.Store(int64(d)) }

func startAWSFake(t *testing.T) *awsFake {
	t.Helper()
	if !isRoot() {
		t.Skip("the AWS fake runs real sandboxes of the local platform: needs root")
	}
	p := startPlatform(t, "")
	t.Cleanup(func() { p.stop(true) })
	backend, err := microvms.New(p.endpoint, microvms.Unsigned(), microvms.WithoutRateLimits())
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeNow{}
	srv, err := microvmstest.New(microvmstest.Options{Backend: backend, BackendEndpoint: p.endpoint, Polls: 1, Clock: clock.now, SignatureClock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return &awsFake{Server: srv, p: p, backend: backend, clock: clock}
}

// opts are the SDK options that reach the fake as a user's program
// reaches AWS: the aws backend, a signed aws.Config, the test CA.
func (f *awsFake) opts(t *testing.T, extra ...rayito.Option) []rayito.Option {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(f.CACertPEM()) {
		t.Fatal("the fake's CA does not parse")
	}
	base := f.URL()
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: &base,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return awsTestCredentials, nil })}
	return append([]rayito.Option{rayito.WithBackend(rayito.BackendAWS), rayito.WithAWSConfig(cfg),
		rayito.WithEndpointRootCAs(pool), rayito.WithTokenStoreDir(t.TempDir())}, extra...)
}

// The SDK on the aws backend, end to end through the fake: a template by
// name, the run input as AWS needs it, one auth token per port, RPCs over
// h2 and file uploads over HTTP/1.1, the proxy's 403 on an expired token
// re-minted once, port 9000 refused before any call.
func TestAWSBackendSDK(t *testing.T) {
	f := startAWSFake(t)
	arn := f.AddImage("rayito-python")
	ctx := t.Context()

	sbx, err := rayito.Create(ctx, f.opts(t, rayito.WithTemplate("rayito-python"), rayito.WithMetadata(map[string]string{"team": "a"}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sbx.Kill(context.WithoutCancel(ctx)) }()
	res, err := sbx.Commands.Run(ctx, "echo hello; id -un")
	if err != nil || res.Stdout != "hello\nuser\n" {
		t.Fatalf("run: %+v %v", res, err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	if _, err := sbx.Files.Write(ctx, "big.bin", big); err != nil {
		t.Fatal(err)
	}
	if got, err := sbx.Files.Read(ctx, "big.bin"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}

	// The proxy's own 403 (an expired token) is re-minted once.
	f.clock.set(61 * time.Minute)
	if res, err := sbx.Commands.Run(ctx, "echo again"); err != nil || res.Stdout != "again\n" {
		t.Fatalf("after the token expired: %+v %v", res, err)
	}
	f.clock.set(0)

	before := len(f.Requests())
	if _, err := sbx.Port(microvmsapi.HooksPort); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Fatalf("Port(9000) = %v", err)
	}
	if len(f.Requests()) != before {
		t.Fatal("Port(9000) made a call")
	}

	var runs, tokens int
	for _, r := range f.Requests() {
		if !r.Signed {
			t.Errorf("%s was not signed", r.Op)
		}
		switch r.Op {
		case microvms.OpRunMicrovm:
			runs++
			var in microvmsapi.RunMicrovmInput
			if err := json.Unmarshal(r.Body, &in); err != nil {
				t.Fatal(err)
			}
			if in.ImageIdentifier != arn || in.Logging == nil || in.Logging.Disabled == nil || in.ExecutionRoleArn != "" ||
				len(in.EgressNetworkConnectors) != 1 || in.EgressNetworkConnectors[0] != microvmsapi.ConnectorARN("us-east-1", "INTERNET_EGRESS") ||
				len(in.RunHookPayload) > microvmsapi.MaxRunHookPayload || strings.Contains(in.RunHookPayload, sbx.AccessToken()) {
				t.Errorf("RunMicrovm input: %+v", in)
			}
		case microvms.OpCreateMicrovmAuthToken:
			tokens++
			var in microvmsapi.CreateMicrovmAuthTokenInput
			if err := json.Unmarshal(r.Body, &in); err != nil {
				t.Fatal(err)
			}
			if len(in.AllowedPorts) != 1 || in.AllowedPorts[0].Port == nil || *in.AllowedPorts[0].Port != microvmsapi.DefaultProxyPort {
				t.Errorf("auth token for %s: want exactly port 8080", r.Body)
			}
		}
	}
	if runs != 1 || tokens != 2 {
		t.Errorf("%d RunMicrovm, %d CreateMicrovmAuthToken (want 1 and 2: one, then one after the 403)", runs, tokens)
	}
	var h1Files, h2RPCs int
	for _, pr := range f.ProxyRequests() {
		switch {
		case strings.HasPrefix(pr.Path, "/files"):
			if pr.Proto != "HTTP/1.1" {
				t.Errorf("a file transfer went over %s", pr.Proto)
			}
			h1Files++
		case pr.Proto == "HTTP/2.0" && pr.ForceH2:
			h2RPCs++
		}
	}
	// The upload over HTTP/1.1; reads may stay on h2, whose downloads are
	// not held back.
	if h1Files < 1 || h2RPCs == 0 {
		t.Errorf("%d file transfers over HTTP/1.1, %d RPCs over h2 with force-h2", h1Files, h2RPCs)
	}

	// A user port: its own token, covering it alone.
	port, err := sbx.Port(3000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Commands.Start(ctx, "python3 -m http.server 3000"); err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	for i := 0; i < 100; i++ {
		resp, err = port.Client().Get(port.URL() + "/")
		if err == nil && resp.StatusCode == 200 {
			break
		}
		if resp != nil {
			resp.Body.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("port 3000: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var port3000 bool
	for _, r := range f.Requests() {
		if r.Op == microvms.OpCreateMicrovmAuthToken && strings.Contains(string(r.Body), `"port":3000`) {
			port3000 = true
		}
		if strings.Contains(string(r.Body), "allPorts") || strings.Contains(string(r.Body), `"port":9000`) {
			t.Errorf("an auth token was asked for all ports or 9000: %s", r.Body)
		}
	}
	if !port3000 {
		t.Error("no auth token for port 3000")
	}

	if err := sbx.Kill(ctx); err != nil {
		t.Fatal(err)
	}
}

// Bad AWS-mode input is refused before any call.
func TestAWSBackendRefusesBeforeAnyCall(t *testing.T) {
	f := startAWSFake(t)
	f.AddImage("rayito-python")
	for name, opts := range map[string][]rayito.Option{
		"payload over 4096": {rayito.WithTemplate("rayito-python"), rayito.WithMetadata(map[string]string{"k": strings.Repeat("x", 5000)})},
		"NO_EGRESS":         {rayito.WithTemplate("rayito-python"), rayito.WithEgressConnectors("NO_EGRESS")},
		"a bad role":        {rayito.WithTemplate("rayito-python"), rayito.WithExecutionRole("root")},
		"a bad template":    {rayito.WithTemplate("../x")},
	} {
		before := len(f.Requests())
		_, err := rayito.Create(t.Context(), f.opts(t, opts...)...)
		if !errors.Is(err, rayito.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
		if n := len(f.Requests()) - before; n != 0 {
			t.Errorf("%s: %d calls made", name, n)
		}
	}
	_, err := rayito.Create(t.Context(), f.opts(t, rayito.WithTemplate("rayito-missing"))...)
	if !errors.Is(err, rayito.ErrNotFound) || !strings.Contains(err.Error(), "rayito-missing") {
		t.Errorf("an unknown template: %v", err)
	}
}
