package microvms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

const vmJSON = `{"microvmId":"microvm-1","state":"PENDING","endpoint":"abc.lambda-microvm.us-east-1.on.aws",` +
	`"imageArn":"arn:aws:lambda:us-east-1:123456789012:microvm-image:demo","imageVersion":"3",` +
	`"startedAt":"2026-01-02T03:04:05Z","maximumDurationInSeconds":600}`

func ptr[T any](v T) *T { return &v }

func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
}

func TestOperations(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name      string
		reply     string
		call      func(ctx context.Context, c *Client) (any, error)
		method    string
		path      string
		query     string
		body      string // JSON; "" means no body at all
		bodyCheck func(t *testing.T, body []byte)
		want      any
	}{
		{
			name:  "RunMicrovm",
			reply: vmJSON,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{
					ImageIdentifier:          "arn:aws:lambda:us-east-1:123456789012:microvm-image:demo",
					ImageVersion:             "3",
					ExecutionRoleArn:         "arn:aws:iam::123456789012:role/exec",
					IdlePolicy:               &microvmsapi.IdlePolicy{MaxIdleDurationSeconds: 60, SuspendedDurationSeconds: 0, AutoResumeEnabled: true},
					Logging:                  &microvmsapi.Logging{CloudWatch: &microvmsapi.CloudWatchLogging{LogGroup: "/rayito/demo"}},
					RunHookPayload:           `{"v":1}`,
					MaximumDurationInSeconds: 600,
					IngressNetworkConnectors: []string{microvmsapi.ConnectorARN("us-east-1", microvmsapi.ConnectorAllIngress)},
					EgressNetworkConnectors:  []string{microvmsapi.ConnectorARN("us-east-1", microvmsapi.ConnectorInternet)},
					ClientToken:              "token-1",
				})
			},
			method: "POST",
			path:   "/2025-09-09/microvms",
			body: `{"imageIdentifier":"arn:aws:lambda:us-east-1:123456789012:microvm-image:demo","imageVersion":"3",
				"executionRoleArn":"arn:aws:iam::123456789012:role/exec",
				"idlePolicy":{"maxIdleDurationSeconds":60,"suspendedDurationSeconds":0,"autoResumeEnabled":true},
				"logging":{"cloudWatch":{"logGroup":"/rayito/demo"}},"runHookPayload":"{\"v\":1}","maximumDurationInSeconds":600,
				"ingressNetworkConnectors":["arn:aws:lambda:us-east-1:aws:network-connector:aws-network-connector:ALL_INGRESS"],
				"egressNetworkConnectors":["arn:aws:lambda:us-east-1:aws:network-connector:aws-network-connector:INTERNET_EGRESS"],
				"clientToken":"token-1"}`,
			want: &microvmsapi.Microvm{
				MicrovmID: "microvm-1", State: microvmsapi.StatePending, Endpoint: "abc.lambda-microvm.us-east-1.on.aws",
				ImageArn: "arn:aws:lambda:us-east-1:123456789012:microvm-image:demo", ImageVersion: "3",
				StartedAt: &started, MaximumDurationInSeconds: 600,
			},
		},
		{
			name:  "RunMicrovm generates a clientToken",
			reply: vmJSON,
			call: func(ctx context.Context, c *Client) (any, error) {
				in := &microvmsapi.RunMicrovmInput{ImageIdentifier: "arn:img", Logging: &microvmsapi.Logging{Disabled: &struct{}{}}}
				_, err := c.RunMicrovm(ctx, in)
				if in.ClientToken != "" {
					t.Errorf("input was modified: ClientToken %q", in.ClientToken)
				}
				return nil, err
			},
			method: "POST",
			path:   "/2025-09-09/microvms",
			bodyCheck: func(t *testing.T, body []byte) {
				var m map[string]any
				if err := json.Unmarshal(body, &m); err != nil {
					t.Fatal(err)
				}
				tok, _ := m["clientToken"].(string)
				if !uuidV4.MatchString(tok) {
					t.Errorf("clientToken %q is not a UUID v4", tok)
				}
				if len(m) != 3 || m["imageIdentifier"] != "arn:img" || !reflect.DeepEqual(m["logging"], map[string]any{"disabled": map[string]any{}}) {
					t.Errorf("body %s", body)
				}
			},
		},
		{
			name:   "GetMicrovm",
			reply:  vmJSON,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetMicrovm(ctx, "microvm-1") },
			method: "GET",
			path:   "/2025-09-09/microvms/microvm-1",
			want: &microvmsapi.Microvm{
				MicrovmID: "microvm-1", State: microvmsapi.StatePending, Endpoint: "abc.lambda-microvm.us-east-1.on.aws",
				ImageArn: "arn:aws:lambda:us-east-1:123456789012:microvm-image:demo", ImageVersion: "3",
				StartedAt: &started, MaximumDurationInSeconds: 600,
			},
		},
		{
			name:   "GetMicrovm escapes the id",
			reply:  vmJSON,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetMicrovm(ctx, "a/b?c") },
			method: "GET",
			path:   "/2025-09-09/microvms/a%2Fb%3Fc",
		},
		{
			name:  "ListMicrovms",
			reply: `{"items":[{"microvmId":"microvm-1","state":"RUNNING","imageArn":"arn:img","imageVersion":"2","startedAt":"2026-01-02T03:04:05Z"}],"nextToken":"n2"}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.ListMicrovms(ctx, ListInput{MaxResults: 10, NextToken: "a+b c/=", ImageIdentifier: "arn:aws:lambda:x", ImageVersion: "2"})
			},
			method: "GET",
			path:   "/2025-09-09/microvms",
			query:  "imageIdentifier=arn%3Aaws%3Alambda%3Ax&imageVersion=2&maxResults=10&nextToken=a%2Bb%20c%2F%3D",
			want: &microvmsapi.ListMicrovmsOutput{
				Items: []microvmsapi.MicrovmSummary{{
					MicrovmID: "microvm-1", State: microvmsapi.StateRunning, ImageArn: "arn:img", ImageVersion: "2", StartedAt: &started,
				}},
				NextToken: "n2",
			},
		},
		{
			name:   "ListMicrovms without parameters",
			reply:  `{"items":[]}`,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListMicrovms(ctx, ListInput{}) },
			method: "GET",
			path:   "/2025-09-09/microvms",
			want:   &microvmsapi.ListMicrovmsOutput{Items: []microvmsapi.MicrovmSummary{}},
		},
		{
			name:   "TerminateMicrovm",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.TerminateMicrovm(ctx, "microvm-1") },
			method: "DELETE",
			path:   "/2025-09-09/microvms/microvm-1",
		},
		{
			name:   "SuspendMicrovm",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.SuspendMicrovm(ctx, "microvm-1") },
			method: "POST",
			path:   "/2025-09-09/microvms/microvm-1/suspend",
		},
		{
			name:   "ResumeMicrovm",
			reply:  `{}`,
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.ResumeMicrovm(ctx, "microvm-1") },
			method: "POST",
			path:   "/2025-09-09/microvms/microvm-1/resume",
		},
		{
			name:  "CreateMicrovmAuthToken",
			reply: `{"authToken":{"x-AWS-Proxy-Auth":"jwe.token.value"}}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateMicrovmAuthToken(ctx, "microvm-1", &microvmsapi.CreateMicrovmAuthTokenInput{
					ExpirationInMinutes: 60,
					AllowedPorts: []microvmsapi.AllowedPort{
						{Port: ptr(8080)},
						{Range: &microvmsapi.PortRange{StartPort: 9001, EndPort: 9010}},
						{Range: &microvmsapi.PortRange{StartPort: 1, EndPort: 8999}},
					},
				})
			},
			method: "POST",
			path:   "/2025-09-09/microvms/microvm-1/auth-token",
			body: `{"expirationInMinutes":60,"allowedPorts":[{"port":8080},{"range":{"startPort":9001,"endPort":9010}},
				{"range":{"startPort":1,"endPort":8999}}]}`,
			want: "jwe.token.value",
		},
		{
			name:  "CreateMicrovmAuthToken with no ports sends an empty list",
			reply: `{"authToken":{"X-aws-proxy-auth":"t"}}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateMicrovmAuthToken(ctx, "microvm-1", &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 1})
			},
			method: "POST",
			path:   "/2025-09-09/microvms/microvm-1/auth-token",
			body:   `{"expirationInMinutes":1,"allowedPorts":[]}`,
			want:   "t",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, always(reply{body: tt.reply}))
			c, _ := newLocal(t, f)
			got, err := tt.call(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != nil && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("result\n got %#v\nwant %#v", got, tt.want)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tt.method || r.Path != tt.path || r.RawQuery != tt.query {
				t.Errorf("request %s %s?%s, want %s %s?%s", r.Method, r.Path, r.RawQuery, tt.method, tt.path, tt.query)
			}
			switch {
			case tt.bodyCheck != nil:
				tt.bodyCheck(t, r.Body)
			case tt.body != "":
				jsonEqual(t, r.Body, tt.body)
			}
			hasBody := tt.body != "" || tt.bodyCheck != nil
			if !hasBody && len(r.Body) != 0 {
				t.Errorf("unexpected body %q", r.Body)
			}
			if ct := r.Header.Get("Content-Type"); hasBody != (ct == "application/json") {
				t.Errorf("Content-Type %q with body %v", ct, hasBody)
			}
			// Unsigned mode: nothing of SigV4.
			for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"} {
				if v := r.Header.Get(h); v != "" {
					t.Errorf("unsigned request has %s: %q", h, v)
				}
			}
			if ua := r.Header.Get("User-Agent"); ua != defaultUserAgent {
				t.Errorf("User-Agent %q", ua)
			}
		})
	}
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewUUID(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		u := newUUID()
		if !uuidV4.MatchString(u) || seen[u] {
			t.Fatalf("bad or repeated uuid %q", u)
		}
		seen[u] = true
	}
}

func TestUserAgent(t *testing.T) {
	t.Parallel()
	f := newFake(t, always(reply{body: vmJSON}))
	c, _ := newLocal(t, f, WithUserAgent("rayito-cli/0.3.0"))
	if _, err := c.GetMicrovm(t.Context(), "microvm-1"); err != nil {
		t.Fatal(err)
	}
	if ua := f.requests()[0].Header.Get("User-Agent"); ua != "rayito-cli/0.3.0 "+defaultUserAgent {
		t.Errorf("User-Agent %q", ua)
	}
}

func TestEndpointPrefix(t *testing.T) {
	t.Parallel()
	f := newFake(t, always(reply{body: vmJSON}))
	s := &sleeper{}
	c, err := New(f.URL+"/prefix/", Unsigned(), withSleep(s.sleep))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetMicrovm(t.Context(), "microvm-1"); err != nil {
		t.Fatal(err)
	}
	if p := f.requests()[0].Path; p != "/prefix/2025-09-09/microvms/microvm-1" {
		t.Errorf("path %q", p)
	}
}

func TestListAll(t *testing.T) {
	t.Parallel()
	pages := map[string]string{
		"":   `{"items":[{"microvmId":"m1","state":"RUNNING"},{"microvmId":"m2","state":"SUSPENDED"}],"nextToken":"p2"}`,
		"p2": `{"items":[],"nextToken":"p3"}`,
		"p3": `{"items":[{"microvmId":"m3","state":"TERMINATED"}]}`,
	}
	serve := func(_ int, r recorded) reply {
		tok := ""
		if _, after, ok := strings.Cut(r.RawQuery, "nextToken="); ok {
			tok, _, _ = strings.Cut(after, "&")
		}
		return reply{body: pages[tok]}
	}

	t.Run("all pages", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, serve)
		c, _ := newLocal(t, f)
		var ids []string
		for vm, err := range c.ListAll(t.Context(), ListInput{MaxResults: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, vm.MicrovmID)
		}
		if want := []string{"m1", "m2", "m3"}; !reflect.DeepEqual(ids, want) {
			t.Errorf("ids %v, want %v", ids, want)
		}
		var queries []string
		for _, r := range f.requests() {
			queries = append(queries, r.RawQuery)
		}
		if want := []string{"maxResults=2", "maxResults=2&nextToken=p2", "maxResults=2&nextToken=p3"}; !reflect.DeepEqual(queries, want) {
			t.Errorf("queries %v, want %v", queries, want)
		}
	})

	t.Run("break stops fetching", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, serve)
		c, _ := newLocal(t, f)
		for range c.ListAll(t.Context(), ListInput{}) {
			break
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})

	t.Run("error ends the iteration", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, func(n int, r recorded) reply {
			if n == 0 {
				return serve(n, r)
			}
			return reply{status: 400, header: map[string]string{"X-Amzn-ErrorType": "ValidationException"}}
		})
		c, _ := newLocal(t, f)
		var n int
		var last error
		for _, err := range c.ListAll(t.Context(), ListInput{}) {
			n++
			last = err
		}
		if n != 3 || !errors.Is(last, ErrInvalidArgument) {
			t.Errorf("%d yields, last error %v", n, last)
		}
	})

	t.Run("a repeated nextToken is an error", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, always(reply{body: `{"items":[],"nextToken":"same"}`}))
		c, _ := newLocal(t, f)
		var last error
		for _, err := range c.ListAll(t.Context(), ListInput{}) {
			last = err
		}
		if !errors.Is(last, ErrInternal) || len(f.requests()) != 2 {
			t.Errorf("error %v after %d requests", last, len(f.requests()))
		}
	})

	t.Run("invalid input", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, serve)
		c, _ := newLocal(t, f)
		for _, err := range c.ListAll(t.Context(), ListInput{MaxResults: 51}) {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("error %v", err)
			}
		}
		if n := len(f.requests()); n != 0 {
			t.Errorf("%d requests", n)
		}
	})
}

func TestBadResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rep  reply
		call func(ctx context.Context, c *Client) error
	}{
		{"undecodable", reply{body: `{"microvmId":`}, func(ctx context.Context, c *Client) error {
			_, err := c.GetMicrovm(ctx, "m")
			return err
		}},
		{"no id", reply{body: `{}`}, func(ctx context.Context, c *Client) error {
			_, err := c.GetMicrovm(ctx, "m")
			return err
		}},
		{"no auth token", reply{body: `{"authToken":{"other":"x"}}`}, func(ctx context.Context, c *Client) error {
			_, err := c.CreateMicrovmAuthToken(ctx, "m", &microvmsapi.CreateMicrovmAuthTokenInput{ExpirationInMinutes: 5})
			return err
		}},
		{"too large", reply{body: `{"microvmId":"m","x":"` + strings.Repeat("a", maxResponseBodySize) + `"}`}, func(ctx context.Context, c *Client) error {
			_, err := c.GetMicrovm(ctx, "m")
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, always(tt.rep))
			c, _ := newLocal(t, f)
			err := tt.call(t.Context(), c)
			var ae *APIError
			if !errors.As(err, &ae) || ae.Kind != KindInternal || ae.Reason == "" {
				t.Fatalf("error %#v", err)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests, want 1 (not retried)", n)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}, nil
	})
	tests := []struct {
		name     string
		endpoint string
		opts     []Option
		ok       bool
		signed   bool
	}{
		{"unsigned local", "http://127.0.0.1:7450", []Option{Unsigned()}, true, false},
		{"signed aws", "https://lambda.us-east-1.amazonaws.com", []Option{WithCredentials(creds), WithRegion("us-east-1")}, true, true},
		{"signed loopback http", "http://localhost:7450", []Option{WithCredentials(creds), WithRegion("us-east-1")}, true, true},
		{"later Unsigned wins", "http://127.0.0.1:7450", []Option{WithCredentials(creds), WithRegion("us-east-1"), Unsigned()}, true, false},
		{"no mode", "http://127.0.0.1:7450", nil, false, false},
		{"credentials without region", "https://lambda.us-east-1.amazonaws.com", []Option{WithCredentials(creds)}, false, false},
		{"bad region", "https://lambda.us-east-1.amazonaws.com", []Option{WithCredentials(creds), WithRegion("us-east-1.evil.com/")}, false, false},
		{"signed over plain http", "http://lambda.us-east-1.amazonaws.com", []Option{WithCredentials(creds), WithRegion("us-east-1")}, false, false},
		{"not a URL", "127.0.0.1:7450", []Option{Unsigned()}, false, false},
		{"ftp", "ftp://127.0.0.1", []Option{Unsigned()}, false, false},
		{"query", "http://127.0.0.1:7450/?a=b", []Option{Unsigned()}, false, false},
		{"user info", "https://u:p@127.0.0.1", []Option{Unsigned()}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(tt.endpoint, tt.opts...)
			if (err == nil) != tt.ok {
				t.Fatalf("New: %v, want ok=%v", err, tt.ok)
			}
			if err == nil && c.Signed() != tt.signed {
				t.Errorf("Signed() = %v", c.Signed())
			}
		})
	}
}

func TestNewFromConfig(t *testing.T) {
	t.Parallel()
	capture := &captureTransport{reply: vmJSON}
	creds := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}, nil
	})
	c, err := NewFromConfig(aws.Config{Region: "eu-west-1", Credentials: creds, HTTPClient: capture, RetryMaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if c.Endpoint() != "https://lambda.eu-west-1.amazonaws.com" || !c.Signed() || c.maxAttempts != 2 {
		t.Errorf("endpoint %q signed %v attempts %d", c.Endpoint(), c.Signed(), c.maxAttempts)
	}
	if _, err := c.GetMicrovm(t.Context(), "microvm-1"); err != nil {
		t.Fatal(err)
	}
	r := capture.last()
	if r.URL.String() != "https://lambda.eu-west-1.amazonaws.com/2025-09-09/microvms/microvm-1" {
		t.Errorf("URL %s", r.URL)
	}
	if a := r.Header.Get("Authorization"); !strings.Contains(a, "/eu-west-1/lambda/aws4_request") {
		t.Errorf("Authorization %q", a)
	}

	base := "http://127.0.0.1:7450"
	c, err = NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: &base}, Unsigned())
	if err != nil || c.Endpoint() != base || c.Signed() {
		t.Errorf("BaseEndpoint: %v %v", c, err)
	}
	if _, err := NewFromConfig(aws.Config{Region: "us-east-1"}); err == nil {
		t.Error("no credentials accepted")
	}
	if _, err := NewFromConfig(aws.Config{Credentials: creds}); err == nil {
		t.Error("no region accepted")
	}
}

func TestCredentialsError(t *testing.T) {
	t.Parallel()
	f := newFake(t, always(reply{body: vmJSON}))
	boom := errors.New("no credentials here")
	c, err := New(f.URL, WithRegion("us-east-1"), WithoutRateLimits(),
		WithCredentials(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, boom
		})))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetMicrovm(t.Context(), "microvm-1")
	if !errors.Is(err, ErrAuthentication) || !errors.Is(err, boom) {
		t.Errorf("error %v", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests", n)
	}
}

func TestConcurrentSafe(t *testing.T) {
	t.Parallel()
	// Every microVM's first request fails with 503, its retry succeeds.
	var mu sync.Mutex
	seen := map[string]bool{}
	f := newFake(t, func(_ int, r recorded) reply {
		mu.Lock()
		defer mu.Unlock()
		if !seen[r.Path] {
			seen[r.Path] = true
			return reply{status: 503}
		}
		return reply{body: vmJSON}
	})
	c, err := New(f.URL, Unsigned(), WithRetryBackoff(time.Microsecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Go(func() {
			for i := range 5 {
				if _, err := c.GetMicrovm(t.Context(), fmt.Sprintf("microvm-%d-%d", g, i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := len(f.requests()); n != 200 {
		t.Errorf("%d requests, want 200", n)
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	elsewhere := newFake(t, always(reply{body: vmJSON}))
	f := newFake(t, always(reply{status: 307, header: map[string]string{"Location": elsewhere.URL + "/steal"}}))
	for _, opts := range [][]Option{nil, {WithHTTPClient(&http.Client{})}} {
		c, _ := newLocal(t, f, opts...)
		_, err := c.GetMicrovm(t.Context(), "microvm-1")
		var ae *APIError
		if !errors.As(err, &ae) || ae.StatusCode != 307 || ae.Kind != KindInternal {
			t.Errorf("error %v", err)
		}
	}
	if n := len(elsewhere.requests()); n != 0 {
		t.Errorf("redirect followed %d times", n)
	}
}
