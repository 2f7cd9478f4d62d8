package microvms

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// recorded is one request as the fake server saw it.
type recorded struct {
	Method   string
	Path     string // escaped
	RawQuery string
	Header   http.Header
	Body     []byte
}

// reply is what the fake server answers.
type reply struct {
	status int
	header map[string]string
	body   string
	hangup bool // close the connection without answering
}

// fakeServer speaks just enough of the API: every request is recorded and
// answered by respond (n counts requests from 0).
type fakeServer struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []recorded
	respond func(n int, r recorded) reply
}

func newFake(t *testing.T, respond func(n int, r recorded) reply) *fakeServer {
	t.Helper()
	f := &fakeServer{respond: respond}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := recorded{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, rec)
		f.mu.Unlock()
		rep := f.respond(n, rec)
		if rep.hangup {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		if rep.body != "" && w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		if rep.status == 0 {
			rep.status = http.StatusOK
		}
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func always(rep reply) func(int, recorded) reply {
	return func(int, recorded) reply { return rep }
}

// sleeper records the waits of a client instead of sleeping.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
	clock *fakeClock // advanced by each wait, if set
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	if s.clock != nil {
		s.clock.advance(d)
	}
	return nil
}

func (s *sleeper) recorded() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// withSleep replaces the client's sleep (rate limiting and backoff).
func withSleep(f func(context.Context, time.Duration) error) Option {
	return func(s *settings) { s.sleep = f }
}

// withMonoNow replaces the token buckets' clock.
func withMonoNow(f func() time.Time) Option {
	return func(s *settings) { s.monoNow = f }
}

// newLocal returns an unsigned client for the fake server, without rate
// limits and with recorded, instant backoff.
func newLocal(t *testing.T, f *fakeServer, opts ...Option) (*Client, *sleeper) {
	t.Helper()
	s := &sleeper{}
	base := []Option{Unsigned(), WithoutRateLimits(), withSleep(s.sleep)}
	c, err := New(f.URL, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}
