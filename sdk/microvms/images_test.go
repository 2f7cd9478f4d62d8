package microvms

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

const (
	testImageARN = "arn:aws:lambda:us-east-1:123456789012:microvm-image:demo"
	testBaseARN  = "arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1"
	testRoleARN  = "arn:aws:iam::123456789012:role/build"
	testToken1   = "11111111-2222-4333-8444-555555555555"
	// genericReply decodes into every answer of the new operations.
	genericReply = `{"imageArn":"` + testImageARN + `","name":"demo","state":"CREATING","imageVersion":"1",` +
		`"items":[],"authToken":{"X-aws-proxy-auth":"tok"},"Tags":{"team":"a"}}`
)

func fullBuildConfig() microvmsapi.ImageBuildConfig {
	return microvmsapi.ImageBuildConfig{
		BaseImageArn:             testBaseARN,
		BaseImageVersion:         "1",
		BuildRoleArn:             testRoleARN,
		Description:              "d",
		CodeArtifact:             &microvmsapi.CodeArtifact{URI: "s3://bucket/app.zip"},
		Logging:                  &microvmsapi.Logging{CloudWatch: &microvmsapi.CloudWatchLogging{LogGroup: "/rayito/demo"}},
		EgressNetworkConnectors:  []string{microvmsapi.ConnectorARN("us-east-1", microvmsapi.ConnectorInternet)},
		CPUConfigurations:        []microvmsapi.CPUConfiguration{{Architecture: "ARM_64"}},
		Resources:                []microvmsapi.Resources{{MinimumMemoryInMiB: 2048}},
		AdditionalOsCapabilities: []string{"ALL"},
		Hooks: &microvmsapi.Hooks{
			Port: 9000,
			MicrovmHooks: &microvmsapi.MicrovmHooks{
				Run: "ENABLED", RunTimeoutInSeconds: 30, Resume: "ENABLED", ResumeTimeoutInSeconds: 30,
				Suspend: "ENABLED", SuspendTimeoutInSeconds: 30, Terminate: "ENABLED", TerminateTimeoutInSeconds: 10,
			},
			MicrovmImageHooks: &microvmsapi.MicrovmImageHooks{
				Ready: "ENABLED", ReadyTimeoutInSeconds: 600, Validate: "ENABLED", ValidateTimeoutInSeconds: 600,
			},
		},
		EnvironmentVariables: map[string]string{"A": "1"},
	}
}

const fullBuildConfigJSON = `"baseImageArn":"` + testBaseARN + `","baseImageVersion":"1","buildRoleArn":"` + testRoleARN + `",` +
	`"description":"d","codeArtifact":{"uri":"s3://bucket/app.zip"},"logging":{"cloudWatch":{"logGroup":"/rayito/demo"}},` +
	`"egressNetworkConnectors":["arn:aws:lambda:us-east-1:aws:network-connector:aws-network-connector:INTERNET_EGRESS"],` +
	`"cpuConfigurations":[{"architecture":"ARM_64"}],"resources":[{"minimumMemoryInMiB":2048}],"additionalOsCapabilities":["ALL"],` +
	`"hooks":{"port":9000,"microvmHooks":{"run":"ENABLED","runTimeoutInSeconds":30,"resume":"ENABLED","resumeTimeoutInSeconds":30,` +
	`"suspend":"ENABLED","suspendTimeoutInSeconds":30,"terminate":"ENABLED","terminateTimeoutInSeconds":10},` +
	`"microvmImageHooks":{"ready":"ENABLED","readyTimeoutInSeconds":600,"validate":"ENABLED","validateTimeoutInSeconds":600}},` +
	`"environmentVariables":{"A":"1"}`

// imageOp is one call of a new operation, for the table-driven tests.
type imageOp struct {
	name   string
	call   func(ctx context.Context, c *Client) error
	method string
	path   string // escaped, as sent
	query  string // as sent (and canonical)
	body   string // exact; "" means none
}

func imageOps() []imageOp {
	return []imageOp{
		{
			name: "CreateMicrovmImage",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.CreateMicrovmImage(ctx, &microvmsapi.CreateMicrovmImageInput{
					Name: "demo_1-x", ImageBuildConfig: fullBuildConfig(), Tags: map[string]string{"team": "a"}, ClientToken: testToken1,
				})
				return err
			},
			method: "POST", path: "/2025-09-09/microvm-images",
			body: `{"name":"demo_1-x",` + fullBuildConfigJSON + `,"tags":{"team":"a"},"clientToken":"` + testToken1 + `"}`,
		},
		{
			name: "ListMicrovmImages",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.ListMicrovmImages(ctx, ListImagesInput{PageInput: PageInput{MaxResults: 10, NextToken: "a b+c/d"}, NameFilter: "demo x"})
				return err
			},
			method: "GET", path: "/2025-09-09/microvm-images", query: "maxResults=10&nameFilter=demo%20x&nextToken=a%20b%2Bc%2Fd",
		},
		{
			name:   "GetMicrovmImage by ARN",
			call:   func(ctx context.Context, c *Client) error { _, err := c.GetMicrovmImage(ctx, testImageARN); return err },
			method: "GET", path: "/2025-09-09/microvm-images/arn:aws:lambda:us-east-1:123456789012:microvm-image:demo",
		},
		{
			name: "UpdateMicrovmImage",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.UpdateMicrovmImage(ctx, "demo", &microvmsapi.UpdateMicrovmImageInput{
					ImageBuildConfig: microvmsapi.ImageBuildConfig{
						BaseImageArn: testBaseARN, BuildRoleArn: testRoleARN,
						CodeArtifact: &microvmsapi.CodeArtifact{URI: "s3://bucket/app2.zip"},
						Logging:      &microvmsapi.Logging{Disabled: &struct{}{}},
					},
					ClientToken: testToken1,
				})
				return err
			},
			method: "PUT", path: "/2025-09-09/microvm-images/demo",
			body: `{"baseImageArn":"` + testBaseARN + `","buildRoleArn":"` + testRoleARN + `","codeArtifact":{"uri":"s3://bucket/app2.zip"},` +
				`"logging":{"disabled":{}},"clientToken":"` + testToken1 + `"}`,
		},
		{
			name:   "DeleteMicrovmImage",
			call:   func(ctx context.Context, c *Client) error { _, err := c.DeleteMicrovmImage(ctx, "demo"); return err },
			method: "DELETE", path: "/2025-09-09/microvm-images/demo",
		},
		{
			name: "ListMicrovmImageVersions",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.ListMicrovmImageVersions(ctx, "demo", PageInput{MaxResults: 5, NextToken: "t"})
				return err
			},
			method: "GET", path: "/2025-09-09/microvm-images/demo/versions", query: "maxResults=5&nextToken=t",
		},
		{
			name: "GetMicrovmImageVersion",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.GetMicrovmImageVersion(ctx, "demo", "1.0")
				return err
			},
			method: "GET", path: "/2025-09-09/microvm-images/demo/versions/1.0",
		},
		{
			name: "UpdateMicrovmImageVersion",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.UpdateMicrovmImageVersion(ctx, "demo", "2", microvmsapi.VersionInactive)
				return err
			},
			method: "PATCH", path: "/2025-09-09/microvm-images/demo/versions/2", body: `{"status":"INACTIVE"}`,
		},
		{
			name: "DeleteMicrovmImageVersion",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.DeleteMicrovmImageVersion(ctx, "demo", "2")
				return err
			},
			method: "DELETE", path: "/2025-09-09/microvm-images/demo/versions/2",
		},
		{
			name: "ListMicrovmImageBuilds",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.ListMicrovmImageBuilds(ctx, "demo", "2", ListBuildsInput{
					PageInput: PageInput{MaxResults: 3}, Architecture: "ARM_64", Chipset: "GRAVITON", ChipsetGeneration: "4",
				})
				return err
			},
			method: "GET", path: "/2025-09-09/microvm-images/demo/versions/2/builds",
			query: "architecture=ARM_64&chipset=GRAVITON&chipsetGeneration=4&maxResults=3",
		},
		{
			name: "GetMicrovmImageBuild, escaped",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.GetMicrovmImageBuild(ctx, "a/b", "2", "b/1")
				return err
			},
			method: "GET", path: "/2025-09-09/microvm-images/a%2Fb/versions/2/builds/b%2F1",
		},
		{
			name: "ListManagedMicrovmImages",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.ListManagedMicrovmImages(ctx, PageInput{NextToken: "n"})
				return err
			},
			method: "GET", path: "/2025-09-09/managed-microvm-images", query: "nextToken=n",
		},
		{
			name: "ListManagedMicrovmImageVersions",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.ListManagedMicrovmImageVersions(ctx, testBaseARN, PageInput{MaxResults: 2})
				return err
			},
			method: "GET", path: "/2025-09-09/managed-microvm-images/arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1/versions",
			query: "maxResults=2",
		},
		{
			name: "CreateMicrovmShellAuthToken",
			call: func(ctx context.Context, c *Client) error {
				_, err := c.CreateMicrovmShellAuthToken(ctx, "microvm-1", &microvmsapi.CreateMicrovmShellAuthTokenInput{ExpirationInMinutes: 15})
				return err
			},
			method: "POST", path: "/2025-09-09/microvms/microvm-1/shell-auth-token", body: `{"expirationInMinutes":15}`,
		},
		{
			name: "TagResource",
			call: func(ctx context.Context, c *Client) error {
				return c.TagResource(ctx, testImageARN, map[string]string{"team": "a", "env": "dev"})
			},
			method: "POST", path: "/2017-03-31/tags/arn:aws:lambda:us-east-1:123456789012:microvm-image:demo",
			body: `{"Tags":{"env":"dev","team":"a"}}`,
		},
		{
			name: "UntagResource",
			call: func(ctx context.Context, c *Client) error {
				return c.UntagResource(ctx, testImageARN, []string{"team", "a b"})
			},
			method: "DELETE", path: "/2017-03-31/tags/arn:aws:lambda:us-east-1:123456789012:microvm-image:demo",
			query: "tagKeys=a%20b&tagKeys=team", // the signer sorts the query canonically
		},
		{
			name:   "ListTags",
			call:   func(ctx context.Context, c *Client) error { _, err := c.ListTags(ctx, testImageARN); return err },
			method: "GET", path: "/2017-03-31/tags/arn:aws:lambda:us-east-1:123456789012:microvm-image:demo",
		},
	}
}

// TestImageOpsWire checks every new operation's exact signed request
// against an httptest server, at a fixed clock and with fixed credentials;
// the Authorization header is recomputed by the independent reference
// signer of sigv4_test.go.
func TestImageOpsWire(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range imageOps() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, always(reply{body: genericReply}))
			c, err := New(f.URL,
				WithCredentials(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
					return aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: testToken}, nil
				})),
				WithRegion("us-east-1"), WithClock(func() time.Time { return at }), WithoutRateLimits())
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.call(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			r := reqs[0]
			if r.Method != tt.method || r.Path != tt.path || r.RawQuery != tt.query {
				t.Errorf("request %s %s?%s\n   want %s %s?%s", r.Method, r.Path, r.RawQuery, tt.method, tt.path, tt.query)
			}
			if string(r.Body) != tt.body {
				t.Errorf("body\n got %s\nwant %s", r.Body, tt.body)
			}
			want := map[string]string{
				"x-amz-date":           "20260102T030405Z",
				"x-amz-content-sha256": sha256Hex([]byte(tt.body)),
				"x-amz-security-token": testToken,
			}
			if tt.body != "" {
				want["content-type"] = "application/json"
			} else if ct := r.Header.Get("Content-Type"); ct != "" {
				t.Errorf("Content-Type %q on a request without a body", ct)
			}
			for k, v := range want {
				if got := r.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			signed := map[string]string{}
			for k, v := range want {
				signed[k] = v
			}
			if tt.body != "" {
				signed["content-length"] = strconv.Itoa(len(tt.body))
			}
			u, _ := url.Parse(f.URL)
			ref := referenceSign(sigv4Request{
				method: tt.method, host: u.Host, path: tt.path, query: tt.query, headers: signed, body: []byte(tt.body),
			}, testAKID, testSecret, "us-east-1", "lambda", at)
			if got := r.Header.Get("Authorization"); got != ref {
				t.Errorf("Authorization\n got %s\n ref %s", got, ref)
			}
		})
	}
}

// TestImageErrorsAreSanitised: for every new operation a service error
// maps by exception name, and its message never reaches the error.
func TestImageErrorsAreSanitised(t *testing.T) {
	t.Parallel()
	for _, tt := range imageOps() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, always(reply{
				status: 409, header: map[string]string{"X-Amzn-ErrorType": "ConflictException:http://internal/"},
				body: errorBody("ConflictException"),
			}))
			c, _ := newLocal(t, f)
			err := tt.call(t.Context(), c)
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("error %v, want a conflict", err)
			}
			var ae *APIError
			if !errors.As(err, &ae) || ae.Exception != "ConflictException" || ae.StatusCode != 409 {
				t.Errorf("got %+v", ae)
			}
			if s := err.Error(); strings.Contains(s, "SECRET") || strings.Contains(s, "signature") || strings.Contains(s, "Canonical") {
				t.Errorf("error leaks the message: %s", s)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests, want 1 (409 is not retried)", n)
			}
		})
	}
}

func TestImageQuota402(t *testing.T) {
	t.Parallel()
	f := newFake(t, always(reply{
		status: 402, header: map[string]string{"X-Amzn-ErrorType": "ServiceQuotaExceededException"},
		body: errorBody("ServiceQuotaExceededException"),
	}))
	c, _ := newLocal(t, f)
	_, err := c.CreateMicrovmImage(t.Context(), &microvmsapi.CreateMicrovmImageInput{Name: "demo", ImageBuildConfig: fullBuildConfig()})
	if !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("error %v", err)
	}
	if k, _ := KindOf(err); k != KindQuotaExceeded {
		t.Errorf("kind %s", k)
	}
	if s := err.Error(); s != "microvms: CreateMicrovmImage: quota exceeded (ServiceQuotaExceededException, 402)" {
		t.Errorf("error string %q", s)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestImageRetry429 retries a throttled create with the same generated
// clientToken, and a throttled get.
func TestImageRetry429(t *testing.T) {
	t.Parallel()
	respond := func(n int, _ recorded) reply {
		if n == 0 {
			return reply{status: 429, header: map[string]string{"X-Amzn-ErrorType": "ThrottlingException"}, body: errorBody("ThrottlingException")}
		}
		return reply{body: genericReply}
	}
	t.Run("create", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, respond)
		c, s := newLocal(t, f)
		in := &microvmsapi.CreateMicrovmImageInput{Name: "demo", ImageBuildConfig: fullBuildConfig()}
		img, err := c.CreateMicrovmImage(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		if img.ImageArn != testImageARN || img.State != microvmsapi.ImageCreating || img.ImageVersion != "1" {
			t.Errorf("image %+v", img)
		}
		reqs := f.requests()
		if len(reqs) != 2 || len(s.recorded()) != 1 {
			t.Fatalf("%d requests, %d waits", len(reqs), len(s.recorded()))
		}
		if string(reqs[0].Body) != string(reqs[1].Body) {
			t.Error("the retry's body differs")
		}
		if !strings.Contains(string(reqs[0].Body), `"clientToken":"`) || in.ClientToken != "" {
			t.Errorf("clientToken not generated, or input modified: %s", reqs[0].Body)
		}
	})
	t.Run("get", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, respond)
		c, _ := newLocal(t, f)
		if _, err := c.GetMicrovmImageVersion(t.Context(), "demo", "1"); err != nil {
			t.Fatal(err)
		}
		if n := len(f.requests()); n != 2 {
			t.Errorf("%d requests", n)
		}
	})
}

// TestImagePaginators follows nextToken across two pages for every new
// listing.
func TestImagePaginators(t *testing.T) {
	t.Parallel()
	pages := map[string]string{
		"":      `{"items":[{"imageArn":"a1","imageVersion":"1","buildId":"b1","name":"n1"},{"imageArn":"a2","imageVersion":"2","buildId":"b2","name":"n2"}],"nextToken":"p 2"}`,
		"p%202": `{"items":[{"imageArn":"a3","imageVersion":"3","buildId":"b3","name":"n3"}]}`,
	}
	serve := func(_ int, r recorded) reply {
		tok := ""
		if _, after, ok := strings.Cut(r.RawQuery, "nextToken="); ok {
			tok, _, _ = strings.Cut(after, "&")
		}
		return reply{body: pages[tok]}
	}
	collect := func(seq func(yield func(string, error) bool)) ([]string, error) {
		var got []string
		var last error
		seq(func(s string, err error) bool {
			if err != nil {
				last = err
				return false
			}
			got = append(got, s)
			return true
		})
		return got, last
	}
	tests := []struct {
		name    string
		list    func(ctx context.Context, c *Client) func(yield func(string, error) bool)
		path    string
		queries []string
	}{
		{"images", func(ctx context.Context, c *Client) func(func(string, error) bool) {
			return mapSeq(c.ListAllMicrovmImages(ctx, ListImagesInput{PageInput: PageInput{MaxResults: 2}, NameFilter: "n"}),
				func(v microvmsapi.MicrovmImageSummary) string { return v.ImageArn })
		}, "/2025-09-09/microvm-images", []string{"maxResults=2&nameFilter=n", "maxResults=2&nameFilter=n&nextToken=p%202"}},
		{"versions", func(ctx context.Context, c *Client) func(func(string, error) bool) {
			return mapSeq(c.ListAllMicrovmImageVersions(ctx, "demo", PageInput{}),
				func(v microvmsapi.MicrovmImageVersion) string { return v.ImageArn })
		}, "/2025-09-09/microvm-images/demo/versions", []string{"", "nextToken=p%202"}},
		{"builds", func(ctx context.Context, c *Client) func(func(string, error) bool) {
			return mapSeq(c.ListAllMicrovmImageBuilds(ctx, "demo", "1", ListBuildsInput{Architecture: "ARM_64"}),
				func(v microvmsapi.MicrovmImageBuild) string { return v.ImageArn })
		}, "/2025-09-09/microvm-images/demo/versions/1/builds", []string{"architecture=ARM_64", "architecture=ARM_64&nextToken=p%202"}},
		{"managed images", func(ctx context.Context, c *Client) func(func(string, error) bool) {
			return mapSeq(c.ListAllManagedMicrovmImages(ctx, PageInput{MaxResults: 2}),
				func(v microvmsapi.ManagedMicrovmImage) string { return v.ImageArn })
		}, "/2025-09-09/managed-microvm-images", []string{"maxResults=2", "maxResults=2&nextToken=p%202"}},
		{"managed versions", func(ctx context.Context, c *Client) func(func(string, error) bool) {
			return mapSeq(c.ListAllManagedMicrovmImageVersions(ctx, "base", PageInput{}),
				func(v microvmsapi.ManagedMicrovmImageVersion) string { return v.ImageArn })
		}, "/2025-09-09/managed-microvm-images/base/versions", []string{"", "nextToken=p%202"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, serve)
			c, _ := newLocal(t, f)
			got, err := collect(tt.list(t.Context(), c))
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"a1", "a2", "a3"}; !reflect.DeepEqual(got, want) {
				t.Errorf("items %v, want %v", got, want)
			}
			var queries []string
			for _, r := range f.requests() {
				if r.Path != tt.path || r.Method != "GET" {
					t.Errorf("request %s %s", r.Method, r.Path)
				}
				queries = append(queries, r.RawQuery)
			}
			if !reflect.DeepEqual(queries, tt.queries) {
				t.Errorf("queries %q, want %q", queries, tt.queries)
			}
		})
	}

	t.Run("break stops fetching", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, serve)
		c, _ := newLocal(t, f)
		for range c.ListAllMicrovmImages(t.Context(), ListImagesInput{}) {
			break
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("%d requests", n)
		}
	})
	t.Run("a repeated nextToken is an error", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, always(reply{body: `{"items":[],"nextToken":"same"}`}))
		c, _ := newLocal(t, f)
		var last error
		for _, err := range c.ListAllMicrovmImageVersions(t.Context(), "demo", PageInput{}) {
			last = err
		}
		if !errors.Is(last, ErrInternal) || len(f.requests()) != 2 {
			t.Errorf("error %v after %d requests", last, len(f.requests()))
		}
	})
	t.Run("error ends the iteration", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, func(n int, r recorded) reply {
			if n == 0 {
				return serve(n, r)
			}
			return reply{status: 404, header: map[string]string{"X-Amzn-ErrorType": "ResourceNotFoundException"}, body: errorBody("ResourceNotFoundException")}
		})
		c, _ := newLocal(t, f)
		var n int
		var last error
		for _, err := range c.ListAllMicrovmImageBuilds(t.Context(), "demo", "1", ListBuildsInput{}) {
			n++
			last = err
		}
		if n != 3 || !errors.Is(last, ErrNotFound) {
			t.Errorf("%d yields, last %v", n, last)
		}
	})
}

func mapSeq[T any](seq func(func(T, error) bool), f func(T) string) func(func(string, error) bool) {
	return func(yield func(string, error) bool) {
		seq(func(v T, err error) bool {
			if err != nil {
				return yield("", err)
			}
			return yield(f(v), nil)
		})
	}
}

func TestImageDecode(t *testing.T) {
	t.Parallel()
	f := newFake(t, always(reply{body: `{"imageArn":"` + testImageARN + `","imageVersion":"2","state":"SUCCESSFUL","status":"ACTIVE",` +
		`"createdAt":1767323045.5,"updatedAt":"2026-01-02T03:04:06Z","baseImageArn":"` + testBaseARN + `","buildRoleArn":"` + testRoleARN + `",` +
		`"codeArtifact":{"uri":"s3://b/k.zip"},"resources":[{"minimumMemoryInMiB":1024}],"stateReason":"ok"}`}))
	c, _ := newLocal(t, f)
	v, err := c.GetMicrovmImageVersion(t.Context(), "demo", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Launchable() || v.ImageVersion != "2" || v.BaseImageArn != testBaseARN || v.CodeArtifact.URI != "s3://b/k.zip" ||
		v.Resources[0].MinimumMemoryInMiB != 1024 || v.StateReason != "ok" {
		t.Errorf("version %+v", v)
	}
	if want := time.Unix(1767323045, 5e8).UTC(); !v.CreatedAt.Equal(want) {
		t.Errorf("createdAt %v, want %v", v.CreatedAt, want)
	}
	if want := time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC); !v.UpdatedAt.Equal(want) {
		t.Errorf("updatedAt %v", v.UpdatedAt)
	}

	f2 := newFake(t, always(reply{body: `{"Tags":{"a":"b"}}`}))
	c2, _ := newLocal(t, f2)
	tags, err := c2.ListTags(t.Context(), testImageARN)
	if err != nil || !reflect.DeepEqual(tags, map[string]string{"a": "b"}) {
		t.Errorf("tags %v, %v", tags, err)
	}

	f3 := newFake(t, always(reply{body: `{"authToken":{}}`}))
	c3, _ := newLocal(t, f3)
	if _, err := c3.CreateMicrovmShellAuthToken(t.Context(), "microvm-1", &microvmsapi.CreateMicrovmShellAuthTokenInput{ExpirationInMinutes: 5}); !errors.Is(err, ErrInternal) {
		t.Errorf("empty authToken: %v", err)
	}
}

func TestImageValidation(t *testing.T) {
	t.Parallel()
	create := func(mod func(*microvmsapi.CreateMicrovmImageInput)) func(context.Context, *Client) error {
		return func(ctx context.Context, c *Client) error {
			in := &microvmsapi.CreateMicrovmImageInput{Name: "demo", ImageBuildConfig: fullBuildConfig()}
			mod(in)
			_, err := c.CreateMicrovmImage(ctx, in)
			return err
		}
	}
	update := func(mod func(*microvmsapi.UpdateMicrovmImageInput)) func(context.Context, *Client) error {
		return func(ctx context.Context, c *Client) error {
			in := &microvmsapi.UpdateMicrovmImageInput{ImageBuildConfig: fullBuildConfig()}
			mod(in)
			_, err := c.UpdateMicrovmImage(ctx, "demo", in)
			return err
		}
	}
	tests := []struct {
		name string
		call func(context.Context, *Client) error
	}{
		{"create nil", func(ctx context.Context, c *Client) error { _, err := c.CreateMicrovmImage(ctx, nil); return err }},
		{"name empty", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.Name = "" })},
		{"name with a dot", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.Name = "a.b" })},
		{"name 65 long", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.Name = strings.Repeat("a", 65) })},
		{"no base image", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.BaseImageArn = "" })},
		{"base image by name", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.BaseImageArn = "al2023-1" })},
		{"no build role", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.BuildRoleArn = "" })},
		{"build role not a role", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.BuildRoleArn = "arn:aws:iam::1:user/x" })},
		{"no code artifact", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.CodeArtifact = nil })},
		{"ECR artifact", create(func(in *microvmsapi.CreateMicrovmImageInput) {
			in.CodeArtifact = &microvmsapi.CodeArtifact{URI: "123456789012.dkr.ecr.us-east-1.amazonaws.com/r:latest"}
		})},
		{"memory 3000", create(func(in *microvmsapi.CreateMicrovmImageInput) {
			in.Resources = []microvmsapi.Resources{{MinimumMemoryInMiB: 3000}}
		})},
		{"two resources", create(func(in *microvmsapi.CreateMicrovmImageInput) {
			in.Resources = []microvmsapi.Resources{{MinimumMemoryInMiB: 512}, {MinimumMemoryInMiB: 512}}
		})},
		{"x86", create(func(in *microvmsapi.CreateMicrovmImageInput) {
			in.CPUConfigurations = []microvmsapi.CPUConfiguration{{Architecture: "X86_64"}}
		})},
		{"capability", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.AdditionalOsCapabilities = []string{"NET_ADMIN"} })},
		{"run hook 61 s", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.Hooks.MicrovmHooks.RunTimeoutInSeconds = 61 })},
		{"terminate hook -1 s", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.Hooks.MicrovmHooks.TerminateTimeoutInSeconds = -1 })},
		{"ready hook 3601 s", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.Hooks.MicrovmImageHooks.ReadyTimeoutInSeconds = 3601 })},
		{"hook state", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.Hooks.MicrovmHooks.Suspend = "ON" })},
		{"hook port", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.Hooks.Port = 70000 })},
		{"51 env vars", create(func(in *microvmsapi.CreateMicrovmImageInput) {
			for i := range 51 {
				in.EnvironmentVariables["K"+strconv.Itoa(i)] = "v"
			}
		})},
		{"11 egress connectors", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.EgressNetworkConnectors = make([]string, 11) })},
		{"both loggings", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.Logging.Disabled = &struct{}{} })},
		{"client token 129", create(func(in *microvmsapi.CreateMicrovmImageInput) { in.ClientToken = strings.Repeat("t", 129) })},
		{"update without artifact", update(func(in *microvmsapi.UpdateMicrovmImageInput) { in.CodeArtifact = nil })},
		{"update without base image", update(func(in *microvmsapi.UpdateMicrovmImageInput) { in.BaseImageArn = "" })},
		{"update without build role", update(func(in *microvmsapi.UpdateMicrovmImageInput) { in.BuildRoleArn = "" })},
		{"update nil", func(ctx context.Context, c *Client) error {
			_, err := c.UpdateMicrovmImage(ctx, "demo", nil)
			return err
		}},
		{"update empty image", func(ctx context.Context, c *Client) error {
			_, err := c.UpdateMicrovmImage(ctx, "", &microvmsapi.UpdateMicrovmImageInput{ImageBuildConfig: fullBuildConfig()})
			return err
		}},
		{"get image with a space", func(ctx context.Context, c *Client) error { _, err := c.GetMicrovmImage(ctx, "a b"); return err }},
		{"version empty", func(ctx context.Context, c *Client) error {
			_, err := c.GetMicrovmImageVersion(ctx, "demo", "")
			return err
		}},
		{"status bogus", func(ctx context.Context, c *Client) error {
			_, err := c.UpdateMicrovmImageVersion(ctx, "demo", "1", "ENABLED")
			return err
		}},
		{"build id empty", func(ctx context.Context, c *Client) error {
			_, err := c.GetMicrovmImageBuild(ctx, "demo", "1", "")
			return err
		}},
		{"negative maxResults", func(ctx context.Context, c *Client) error {
			_, err := c.ListMicrovmImages(ctx, ListImagesInput{PageInput: PageInput{MaxResults: -1}})
			return err
		}},
		{"shell token 0 minutes", func(ctx context.Context, c *Client) error {
			_, err := c.CreateMicrovmShellAuthToken(ctx, "microvm-1", &microvmsapi.CreateMicrovmShellAuthTokenInput{})
			return err
		}},
		{"shell token nil", func(ctx context.Context, c *Client) error {
			_, err := c.CreateMicrovmShellAuthToken(ctx, "microvm-1", nil)
			return err
		}},
		{"tag by name", func(ctx context.Context, c *Client) error {
			return c.TagResource(ctx, "demo", map[string]string{"a": "b"})
		}},
		{"tag a microVM", func(ctx context.Context, c *Client) error {
			return c.TagResource(ctx, "arn:aws:lambda:us-east-1:123456789012:microvm/microvm-1", map[string]string{"a": "b"})
		}},
		{"no tags", func(ctx context.Context, c *Client) error { return c.TagResource(ctx, testImageARN, nil) }},
		{"no tag keys", func(ctx context.Context, c *Client) error { return c.UntagResource(ctx, testImageARN, nil) }},
		{"empty tag key", func(ctx context.Context, c *Client) error { return c.UntagResource(ctx, testImageARN, []string{""}) }},
		{"list tags by name", func(ctx context.Context, c *Client) error { _, err := c.ListTags(ctx, "demo"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, always(reply{body: genericReply}))
			c, _ := newLocal(t, f)
			err := tt.call(t.Context(), c)
			var ae *APIError
			if !errors.As(err, &ae) || ae.Kind != KindInvalidArgument || ae.StatusCode != 0 || ae.Reason == "" {
				t.Fatalf("error %v, want a client-side refusal", err)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}

	t.Run("the full configuration is accepted", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, always(reply{body: genericReply}))
		c, _ := newLocal(t, f)
		for _, mem := range microvmsapi.MemorySizesMiB {
			in := &microvmsapi.CreateMicrovmImageInput{Name: strings.Repeat("a", 64), ImageBuildConfig: fullBuildConfig()}
			in.Resources[0].MinimumMemoryInMiB = mem
			in.Hooks.MicrovmHooks.RunTimeoutInSeconds = 60
			in.Hooks.MicrovmImageHooks.ValidateTimeoutInSeconds = 3600
			if _, err := c.CreateMicrovmImage(t.Context(), in); err != nil {
				t.Errorf("%d MiB: %v", mem, err)
			}
		}
	})
}

func TestShellTokenRateLimit(t *testing.T) {
	t.Parallel()
	c, err := New("http://127.0.0.1:7450", Unsigned())
	if err != nil {
		t.Fatal(err)
	}
	if b := c.buckets[OpCreateMicrovmShellAuthToken]; b == nil || b.rate != 5 || b.burst != 5 {
		t.Errorf("shell token bucket %+v", b)
	}
	if b := c.buckets[OpCreateMicrovmImage]; b != nil {
		t.Errorf("CreateMicrovmImage has a default bucket (%v/s) though no quota is published", b.rate)
	}
	c, err = New("http://127.0.0.1:7450", Unsigned(), WithRateLimits(map[Operation]float64{OpListMicrovmImages: 3}))
	if err != nil || c.buckets[OpListMicrovmImages] == nil || c.buckets[OpListMicrovmImages].rate != 3 {
		t.Errorf("override: %v", err)
	}
}
