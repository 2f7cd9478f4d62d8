package microvms

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// secretMessage stands for what AWS puts in error messages: a signature
// error echoes the canonical request, session token included.
const secretMessage = "The request signature we calculated does not match. The Canonical String for this request should have been " +
	"'GET\\n/2025-09-09/microvms\\nx-amz-security-token:SECRET-SESSION-TOKEN'"

func errorBody(typ string) string {
	return `{"__type":"` + typ + `","message":"` + secretMessage + `","Message":"` + secretMessage + `"}`
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		header    string // X-Amzn-ErrorType
		bodyType  string // __type; "" means no body
		kind      ErrorKind
		sentinel  error
		exception string
	}{
		{"not found, header with URL", 404, "ResourceNotFoundException:http://internal.amazon.com/coral/com.amazonaws.lambda/", "", KindNotFound, ErrNotFound, "ResourceNotFoundException"},
		{"validation, namespaced body", 400, "", "com.amazonaws.lambda.microvms#ValidationException", KindInvalidArgument, ErrInvalidArgument, "ValidationException"},
		{"access denied", 403, "AccessDeniedException", "AccessDeniedException", KindAuthentication, ErrAuthentication, "AccessDeniedException"},
		{"unrecognized client, body", 403, "", "UnrecognizedClientException", KindAuthentication, ErrAuthentication, "UnrecognizedClientException"},
		{"invalid signature", 403, "InvalidSignatureException", "InvalidSignatureException", KindAuthentication, ErrAuthentication, "InvalidSignatureException"},
		{"expired token", 403, "ExpiredTokenException:http://x", "", KindAuthentication, ErrAuthentication, "ExpiredTokenException"},
		{"throttling", 429, "ThrottlingException", "", KindRateLimit, ErrRateLimit, "ThrottlingException"},
		{"conflict", 409, "ConflictException", "", KindConflict, ErrConflict, "ConflictException"},
		{"quota with 402", 402, "ServiceQuotaExceededException", "", KindQuotaExceeded, ErrQuotaExceeded, "ServiceQuotaExceededException"},
		{"quota with 402, body only", 402, "", "aws#ServiceQuotaExceededException", KindQuotaExceeded, ErrQuotaExceeded, "ServiceQuotaExceededException"},
		{"capacity", 503, "InsufficientCapacityException", "", KindCapacity, ErrCapacity, "InsufficientCapacityException"},
		{"internal", 500, "InternalServerException", "", KindInternal, ErrInternal, "InternalServerException"},
		{"header wins over body", 409, "ConflictException", "ValidationException", KindConflict, ErrConflict, "ConflictException"},
		{"name wins over status", 400, "ThrottlingException", "", KindRateLimit, ErrRateLimit, "ThrottlingException"},
		{"404 without a name", 404, "", "", KindNotFound, ErrNotFound, ""},
		{"402 without a name", 402, "", "", KindQuotaExceeded, ErrQuotaExceeded, ""},
		{"403 without a name", 403, "", "", KindAuthentication, ErrAuthentication, ""},
		{"409 without a name", 409, "", "", KindConflict, ErrConflict, ""},
		{"unknown name, known status", 404, "SomethingNewException", "", KindNotFound, ErrNotFound, "SomethingNewException"},
		{"unknown name and status", 418, "TeapotException", "", KindInternal, ErrInternal, "TeapotException"},
		{"free text is not a name", 404, "Not found: " + secretMessage, "", KindNotFound, ErrNotFound, ""},
		{"free text in __type", 400, "", "x y z SECRET", KindInvalidArgument, ErrInvalidArgument, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rep := reply{status: tt.status, header: map[string]string{"X-Amzn-RequestId": "req-123"}}
			if tt.header != "" {
				rep.header["X-Amzn-ErrorType"] = tt.header
			}
			if tt.bodyType != "" {
				rep.body = errorBody(tt.bodyType)
			} else {
				rep.body = `{"message":"` + secretMessage + `"}`
			}
			f := newFake(t, always(rep))
			c, _ := newLocal(t, f, WithMaxAttempts(1))
			_, err := c.GetMicrovm(t.Context(), "microvm-1")
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error %T %v", err, err)
			}
			if ae.Kind != tt.kind || ae.Exception != tt.exception || ae.StatusCode != tt.status ||
				ae.Operation != "GetMicrovm" || ae.RequestID != "req-123" {
				t.Errorf("got %+v", *ae)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.sentinel)
			}
			for _, other := range []error{ErrNotFound, ErrInvalidArgument, ErrAuthentication, ErrRateLimit, ErrConflict, ErrQuotaExceeded, ErrCapacity, ErrInternal} {
				if other != tt.sentinel && errors.Is(err, other) {
					t.Errorf("errors.Is(%v, %v) = true", err, other)
				}
			}
			if k, ok := KindOf(err); !ok || k != tt.kind {
				t.Errorf("KindOf = %v, %v", k, ok)
			}
			if s := err.Error(); strings.Contains(s, "SECRET") || strings.Contains(s, "signature") || strings.Contains(s, "Canonical") {
				t.Errorf("error leaks the message: %s", s)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *APIError
		want string
	}{
		{&APIError{Kind: KindNotFound, Operation: "GetMicrovm", StatusCode: 404, Exception: "ResourceNotFoundException"},
			"microvms: GetMicrovm: not found (ResourceNotFoundException, 404)"},
		{&APIError{Kind: KindQuotaExceeded, Operation: "RunMicrovm", StatusCode: 402, Exception: "ServiceQuotaExceededException"},
			"microvms: RunMicrovm: quota exceeded (ServiceQuotaExceededException, 402)"},
		{&APIError{Kind: KindInternal, Operation: "GetMicrovm", StatusCode: 502},
			"microvms: GetMicrovm: internal error (HTTP 502)"},
		{invalid(OpRunMicrovm, "imageIdentifier is required"),
			"microvms: RunMicrovm: invalid argument: imageIdentifier is required"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	status := func(codes ...int) func(int, recorded) reply {
		return func(n int, _ recorded) reply {
			if n < len(codes) {
				return reply{status: codes[n], body: `{"message":"` + secretMessage + `"}`}
			}
			return reply{body: vmJSON}
		}
	}
	tests := []struct {
		name     string
		respond  func(int, recorded) reply
		requests int
		kind     ErrorKind // "" means success
		status   int
	}{
		{"429 then 200", status(429), 2, "", 0},
		{"503 x4 then 200", status(503, 503, 503, 503), 5, "", 0},
		{"500 502 504 then 200", status(500, 502, 504), 4, "", 0},
		{"503 x5 gives up", status(503, 503, 503, 503, 503), 5, KindInternal, 503},
		{"400 not retried", status(400), 1, KindInvalidArgument, 400},
		{"404 not retried", status(404), 1, KindNotFound, 404},
		{"409 not retried", status(409), 1, KindConflict, 409},
		{"402 not retried", status(402), 1, KindQuotaExceeded, 402},
		{"403 not retried", status(403), 1, KindAuthentication, 403},
		{"501 not retried", status(501), 1, KindInternal, 501},
		{"throttling by name is retried", func(n int, _ recorded) reply {
			if n == 0 {
				return reply{status: 400, header: map[string]string{"X-Amzn-ErrorType": "ThrottlingException"}}
			}
			return reply{body: vmJSON}
		}, 2, "", 0},
		{"insufficient capacity is retried, then reported", always(reply{
			status: 503, header: map[string]string{"X-Amzn-ErrorType": "InsufficientCapacityException"},
		}), 5, KindCapacity, 503},
		{"connection reset is retried", func(n int, _ recorded) reply {
			if n < 2 {
				return reply{hangup: true}
			}
			return reply{body: vmJSON}
		}, 3, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.respond)
			c, s := newLocal(t, f)
			_, err := c.GetMicrovm(t.Context(), "microvm-1")
			if n := len(f.requests()); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
			if n := len(s.recorded()); n != tt.requests-1 {
				t.Errorf("%d waits, want %d", n, tt.requests-1)
			}
			for i, d := range s.recorded() {
				if ceil := min(DefaultBackoffBase<<i, DefaultBackoffMax); d < 0 || d >= ceil {
					t.Errorf("wait %d is %v, want in [0, %v)", i, d, ceil)
				}
			}
			if tt.kind == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ae *APIError
			if !errors.As(err, &ae) || ae.Kind != tt.kind || ae.StatusCode != tt.status {
				t.Fatalf("error %v, want kind %s status %d", err, tt.kind, tt.status)
			}
		})
	}
}

func TestRetryRunIsIdempotent(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int, _ recorded) reply {
		if n < 2 {
			return reply{status: 503}
		}
		return reply{body: vmJSON}
	})
	c, _ := newLocal(t, f)
	if _, err := c.RunMicrovm(t.Context(), &microvmsapi.RunMicrovmInput{ImageIdentifier: "arn:img"}); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, r := range reqs[1:] {
		if string(r.Body) != string(reqs[0].Body) {
			t.Errorf("retry body %s differs from %s", r.Body, reqs[0].Body)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	throttle := func(after string) reply {
		return reply{status: 429, header: map[string]string{"X-Amzn-ErrorType": "ThrottlingException", "Retry-After": after}}
	}

	t.Run("honoured", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, func(n int, _ recorded) reply {
			if n == 0 {
				return throttle("2")
			}
			return reply{body: vmJSON}
		})
		c, s := newLocal(t, f)
		if _, err := c.GetMicrovm(t.Context(), "microvm-1"); err != nil {
			t.Fatal(err)
		}
		if w := s.recorded(); len(w) != 1 || w[0] != 2*time.Second {
			t.Errorf("waits %v, want [2s]", w)
		}
	})

	t.Run("HTTP date", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, func(n int, _ recorded) reply {
			if n == 0 {
				return throttle(time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat))
			}
			return reply{body: vmJSON}
		})
		c, s := newLocal(t, f)
		if _, err := c.GetMicrovm(t.Context(), "microvm-1"); err != nil {
			t.Fatal(err)
		}
		if w := s.recorded(); len(w) != 1 || w[0] < 8*time.Second || w[0] > 10*time.Second {
			t.Errorf("waits %v, want about [10s]", w)
		}
	})

	t.Run("too long is not waited for", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, always(throttle("120")))
		c, s := newLocal(t, f)
		_, err := c.GetMicrovm(t.Context(), "microvm-1")
		var ae *APIError
		if !errors.As(err, &ae) || ae.Kind != KindRateLimit || ae.RetryAfter != 120*time.Second {
			t.Fatalf("error %#v", err)
		}
		if len(f.requests()) != 1 || len(s.recorded()) != 0 {
			t.Errorf("%d requests, waits %v", len(f.requests()), s.recorded())
		}
	})

	t.Run("beyond the deadline is not waited for", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, always(throttle("20")))
		c, err := New(f.URL, Unsigned())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = c.GetMicrovm(ctx, "microvm-1")
		if !errors.Is(err, ErrRateLimit) || time.Since(start) > 2*time.Second {
			t.Errorf("error %v after %v", err, time.Since(start))
		}
	})

	t.Run("cancel while backing off", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, always(throttle("20")))
		c, err := New(f.URL, Unsigned())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err = c.GetMicrovm(ctx, "microvm-1")
		if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
			t.Errorf("error %v after %v", err, time.Since(start))
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("%d requests", n)
		}
	})
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := &sleeper{}
	c, err := New("http://"+addr, Unsigned(), withSleep(s.sleep))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetMicrovm(t.Context(), "microvm-1")
	var ae *APIError
	if err == nil || errors.As(err, &ae) {
		t.Fatalf("error %#v, want a transport error", err)
	}
	if _, ok := KindOf(err); ok {
		t.Error("KindOf found a kind in a transport error")
	}
	if !strings.HasPrefix(err.Error(), "microvms: GetMicrovm: ") {
		t.Errorf("error %q", err)
	}
	if n := len(s.recorded()); n != DefaultMaxAttempts-1 {
		t.Errorf("%d waits, want %d", n, DefaultMaxAttempts-1)
	}
}

func TestMaxAttempts(t *testing.T) {
	t.Parallel()
	f := newFake(t, always(reply{status: 503}))
	c, _ := newLocal(t, f, WithMaxAttempts(2))
	if _, err := c.GetMicrovm(t.Context(), "microvm-1"); err == nil {
		t.Fatal("no error")
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests", n)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	c := &Client{backoffBase: 100 * time.Millisecond, backoffMax: 5 * time.Second}
	for attempt := 1; attempt <= 20; attempt++ {
		ceil := min(100*time.Millisecond<<min(attempt-1, 10), 5*time.Second)
		for range 50 {
			if d := c.backoff(attempt); d < 0 || d >= ceil {
				t.Fatalf("backoff(%d) = %v, want in [0, %v)", attempt, d, ceil)
			}
		}
	}
	if d := (&Client{}).backoff(3); d != 0 {
		t.Errorf("zero base: %v", d)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	okRun := func() *microvmsapi.RunMicrovmInput {
		return &microvmsapi.RunMicrovmInput{ImageIdentifier: "arn:img"}
	}
	run := func(mod func(*microvmsapi.RunMicrovmInput)) func(context.Context, *Client) error {
		return func(ctx context.Context, c *Client) error {
			in := okRun()
			mod(in)
			_, err := c.RunMicrovm(ctx, in)
			return err
		}
	}
	token := func(ports ...microvmsapi.AllowedPort) func(context.Context, *Client) error {
		return func(ctx context.Context, c *Client) error {
			_, err := c.CreateMicrovmAuthToken(ctx, "microvm-1", &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5, AllowedPorts: ports})
			return err
		}
	}
	get := func(id string) func(context.Context, *Client) error {
		return func(ctx context.Context, c *Client) error {
			_, err := c.GetMicrovm(ctx, id)
			return err
		}
	}
	rng := func(a, b int) microvmsapi.AllowedPort {
		return microvmsapi.AllowedPort{Range: &microvmsapi.PortRange{StartPort: a, EndPort: b}}
	}
	port := func(p int) microvmsapi.AllowedPort { return microvmsapi.AllowedPort{Port: ptr(p)} }

	refused := map[string]func(context.Context, *Client) error{
		"get empty id":          get(""),
		"get long id":           get(strings.Repeat("a", 257)),
		"get id with space":     get("a b"),
		"get id with NUL":       get("a\x00"),
		"get id with non-ASCII": get("microvm-ü"),
		"terminate empty id":    func(ctx context.Context, c *Client) error { return c.TerminateMicrovm(ctx, "") },
		"suspend empty id":      func(ctx context.Context, c *Client) error { return c.SuspendMicrovm(ctx, "") },
		"resume empty id":       func(ctx context.Context, c *Client) error { return c.ResumeMicrovm(ctx, "") },
		"run nil":               func(ctx context.Context, c *Client) error { _, err := c.RunMicrovm(ctx, nil); return err },
		"run no image":          run(func(in *microvmsapi.RunMicrovmInput) { in.ImageIdentifier = "" }),
		"run payload 4097":      run(func(in *microvmsapi.RunMicrovmInput) { in.RunHookPayload = strings.Repeat("x", 4097) }),
		"run duration -1":       run(func(in *microvmsapi.RunMicrovmInput) { in.MaximumDurationInSeconds = -1 }),
		"run duration 28801":    run(func(in *microvmsapi.RunMicrovmInput) { in.MaximumDurationInSeconds = 28801 }),
		"run 11 ingress":        run(func(in *microvmsapi.RunMicrovmInput) { in.IngressNetworkConnectors = make([]string, 11) }),
		"run 11 egress":         run(func(in *microvmsapi.RunMicrovmInput) { in.EgressNetworkConnectors = make([]string, 11) }),
		"run clientToken 129":   run(func(in *microvmsapi.RunMicrovmInput) { in.ClientToken = strings.Repeat("t", 129) }),
		"run idle 59": run(func(in *microvmsapi.RunMicrovmInput) {
			in.IdlePolicy = &microvmsapi.IdlePolicy{MaxIdleDurationSeconds: 59}
		}),
		"run suspended -1": run(func(in *microvmsapi.RunMicrovmInput) {
			in.IdlePolicy = &microvmsapi.IdlePolicy{MaxIdleDurationSeconds: 60, SuspendedDurationSeconds: -1}
		}),
		"run logging neither": run(func(in *microvmsapi.RunMicrovmInput) { in.Logging = &microvmsapi.Logging{} }),
		"run logging both": run(func(in *microvmsapi.RunMicrovmInput) {
			in.Logging = &microvmsapi.Logging{Disabled: &struct{}{}, CloudWatch: &microvmsapi.CloudWatchLogging{LogGroup: "g"}}
		}),
		"list maxResults 51": func(ctx context.Context, c *Client) error {
			_, err := c.ListMicrovms(ctx, ListInput{MaxResults: 51})
			return err
		},
		"list maxResults -1": func(ctx context.Context, c *Client) error {
			_, err := c.ListMicrovms(ctx, ListInput{MaxResults: -1})
			return err
		},
		"token nil input": func(ctx context.Context, c *Client) error {
			_, err := c.CreateMicrovmAuthToken(ctx, "microvm-1", nil)
			return err
		},
		"token empty id": func(ctx context.Context, c *Client) error {
			_, err := c.CreateMicrovmAuthToken(ctx, "", &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5})
			return err
		},
		"token expiration 0": func(ctx context.Context, c *Client) error {
			_, err := c.CreateMicrovmAuthToken(ctx, "microvm-1", &microvmsapi.CreateMicrovmAuthTokenInput{})
			return err
		},
		"token expiration 61": func(ctx context.Context, c *Client) error {
			_, err := c.CreateMicrovmAuthToken(ctx, "microvm-1", &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 61})
			return err
		},
		"token allPorts":          token(port(8080), microvmsapi.AllowedPort{AllPorts: &struct{}{}}),
		"token port 9000":         token(port(9000)),
		"token range ending 9000": token(rng(8000, 9000)),
		"token range at 9000":     token(rng(9000, 9000)),
		"token range over 9000":   token(rng(8999, 9001)),
		"token range all":         token(rng(1, 65535)),
		"token port 0":            token(port(0)),
		"token port 65536":        token(port(65536)),
		"token reversed range":    token(rng(9010, 9001)),
		"token empty entry":       token(microvmsapi.AllowedPort{}),
		"token two fields":        token(microvmsapi.AllowedPort{Port: ptr(8080), Range: &microvmsapi.PortRange{StartPort: 1, EndPort: 2}}),
	}
	accepted := map[string]func(context.Context, *Client) error{
		"get 256-char id":             get(strings.Repeat("a", 256)),
		"get ARN id":                  get("arn:aws:lambda:us-east-1:123456789012:microvm/microvm-1"),
		"run payload 4096 characters": run(func(in *microvmsapi.RunMicrovmInput) { in.RunHookPayload = strings.Repeat("é", 4096) }),
		"run duration 1":              run(func(in *microvmsapi.RunMicrovmInput) { in.MaximumDurationInSeconds = 1 }),
		"run duration 28800":          run(func(in *microvmsapi.RunMicrovmInput) { in.MaximumDurationInSeconds = 28800 }),
		"run 10 connectors": run(func(in *microvmsapi.RunMicrovmInput) {
			in.IngressNetworkConnectors = make([]string, 10)
			in.EgressNetworkConnectors = make([]string, 10)
		}),
		"run clientToken 128": run(func(in *microvmsapi.RunMicrovmInput) { in.ClientToken = strings.Repeat("t", 128) }),
		"run idle 60": run(func(in *microvmsapi.RunMicrovmInput) {
			in.IdlePolicy = &microvmsapi.IdlePolicy{MaxIdleDurationSeconds: 60}
		}),
		"list maxResults 50": func(ctx context.Context, c *Client) error {
			_, err := c.ListMicrovms(ctx, ListInput{MaxResults: 50})
			return err
		},
		"list maxResults 1": func(ctx context.Context, c *Client) error {
			_, err := c.ListMicrovms(ctx, ListInput{MaxResults: 1})
			return err
		},
		"token ranges around 9000": token(rng(1, 8999), rng(9001, 65535), port(8999), port(9001)),
		"token expiration 60": func(ctx context.Context, c *Client) error {
			_, err := c.CreateMicrovmAuthToken(ctx, "microvm-1", &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 60, AllowedPorts: []microvmsapi.AllowedPort{port(8080)}})
			return err
		},
	}

	for name, call := range refused {
		t.Run("refused/"+name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, always(reply{status: 500}))
			c, _ := newLocal(t, f)
			err := call(t.Context(), c)
			var ae *APIError
			if !errors.As(err, &ae) || ae.Kind != KindInvalidArgument || ae.StatusCode != 0 || ae.Reason == "" {
				t.Fatalf("error %#v", err)
			}
			if !errors.Is(err, ErrInvalidArgument) {
				t.Error("not ErrInvalidArgument")
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("%d requests reached the server", n)
			}
		})
	}
	for name, call := range accepted {
		t.Run("accepted/"+name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(_ int, r recorded) reply {
				switch {
				case strings.HasSuffix(r.Path, "/auth-token"):
					return reply{body: `{"authToken":{"X-aws-proxy-auth":"t"}}`}
				case r.Method == "GET" && r.Path == microvmsapi.PathMicrovms:
					return reply{body: `{"items":[]}`}
				}
				return reply{body: vmJSON}
			})
			c, _ := newLocal(t, f)
			if err := call(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests", n)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"0":                             0,
		"-3":                            0,
		"1":                             time.Second,
		" 7 ":                           7 * time.Second,
		"soon":                          0,
		"Fri, 02 Jan 2026 03:04:15 GMT": 10 * time.Second,
		"Fri, 02 Jan 2026 03:04:00 GMT": 0,
		"99999999999":                   24 * time.Hour,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// FuzzResponseError checks that whatever a server answers, the error holds
// no free text from it.
func FuzzResponseError(f *testing.F) {
	f.Add(404, "ResourceNotFoundException:http://x", []byte(`{"message":"m"}`), "req-1", "3")
	f.Add(400, "", []byte(`{"__type":"a.b#ValidationException","message":"SECRET"}`), "", "")
	f.Add(402, "Service Quota", []byte(`not json`), "id with spaces", "Fri, 02 Jan 2026 03:04:15 GMT")
	f.Fuzz(func(t *testing.T, status int, typ string, body []byte, reqID, retryAfter string) {
		h := http.Header{}
		h.Set("X-Amzn-ErrorType", typ)
		h.Set("X-Amzn-RequestId", reqID)
		h.Set("Retry-After", retryAfter)
		e := responseError(OpGetMicrovm, status, h, body, time.Now())
		if e.Exception != "" && !isIdentifier(e.Exception, 128) {
			t.Errorf("exception %q", e.Exception)
		}
		if e.RequestID != "" && !isIdentifier(e.RequestID, 128) {
			t.Errorf("request id %q", e.RequestID)
		}
		if e.RetryAfter < 0 || e.RetryAfter > 24*time.Hour {
			t.Errorf("retry after %v", e.RetryAfter)
		}
		if e.Reason != "" {
			t.Errorf("reason %q", e.Reason)
		}
		_ = e.Error()
	})
}
