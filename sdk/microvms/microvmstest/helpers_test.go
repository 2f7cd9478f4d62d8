package microvmstest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

func newServer(t *testing.T, opts microvmstest.Options) *microvmstest.Server {
	t.Helper()
	s, err := microvmstest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newClient returns a signed client of s without client-side rate limits
// and with fast retries.
func newClient(t *testing.T, s *microvmstest.Server, opts ...microvms.Option) *microvms.Client {
	t.Helper()
	base := []microvms.Option{microvms.WithoutRateLimits(), microvms.WithRetryBackoff(time.Millisecond, 5*time.Millisecond)}
	c, err := s.Client(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rawResult is the answer of a raw request.
type rawResult struct {
	status    int
	exception string
	header    http.Header
	body      []byte
}

// raw sends a request signed with s's credentials (unless unsigned).
func raw(t *testing.T, s *microvmstest.Server, method, pathAndQuery string, body []byte, unsigned bool) rawResult {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL()+pathAndQuery, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if !unsigned {
		if err := s.SignRequest(req, body); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResult{status: resp.StatusCode, exception: resp.Header.Get(microvmsapi.ErrorTypeHeader), header: resp.Header, body: b}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantErr checks that err is an *APIError from the service with the
// exception and status.
func wantErr(t *testing.T, err error, exception string, status int) {
	t.Helper()
	var ae *microvms.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v, want %s (%d)", err, exception, status)
	}
	if ae.Exception != exception || ae.StatusCode != status {
		t.Fatalf("error %v, want %s (%d)", err, exception, status)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// pollState calls GetMicrovm until the state is want (at most 20 times).
func pollState(t *testing.T, c *microvms.Client, id string, want microvmsapi.State) *microvmsapi.Microvm {
	t.Helper()
	var last microvmsapi.State
	for range 20 {
		m, err := c.GetMicrovm(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if m.State == want {
			return m
		}
		last = m.State
	}
	t.Fatalf("microVM %s still %s, want %s", id, last, want)
	return nil
}

func run(t *testing.T, c *microvms.Client, imageArn string) *microvmsapi.Microvm {
	t.Helper()
	m, err := c.RunMicrovm(context.Background(), &microvmsapi.RunMicrovmInput{
		ImageIdentifier: imageArn, Logging: &microvmsapi.Logging{Disabled: &struct{}{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// endpointClient is an HTTPS client trusting s's CA; h2 picks HTTP/2 or
// HTTP/1.1.
func endpointClient(s *microvmstest.Server, h2 bool) *http.Client {
	var p http.Protocols
	if h2 {
		p.SetHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	cfg := s.TLSClientConfig()
	if !h2 {
		cfg.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, Protocols: &p, ForceAttemptHTTP2: h2}}
}

// get sends GET path to endpoint with the given headers.
func get(t *testing.T, hc *http.Client, endpoint, path string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+endpoint+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func isPlainRejection(resp *http.Response) bool {
	ct := resp.Header.Get("Content-Type")
	return resp.Header.Get("grpc-status") == "" && !strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/connect")
}
