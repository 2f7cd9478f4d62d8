package microvmstest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

func TestDefaults(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q", s.URL())
	}
	if got, want := s.ImageARN("x"), "arn:aws:lambda:us-east-1:123456789012:microvm-image:x"; got != want {
		t.Fatalf("ImageARN %q, want %q", got, want)
	}
	c := s.Credentials()
	if c.AccessKeyID != "AKIDRAYITOTEST" || c.SecretAccessKey != "rayito-test-secret" {
		t.Fatalf("credentials %+v", c)
	}
	if !strings.Contains(string(s.CACertPEM()), "BEGIN CERTIFICATE") {
		t.Fatal("CACertPEM is not a PEM certificate")
	}
	if arn := s.AddImage("img"); arn != s.ImageARN("img") {
		t.Fatalf("AddImage %q", arn)
	}
	s.Close()
	s.Close() // idempotent
}

func TestSimulatedLifecycle(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	c := newClient(t, s)
	arn := s.AddImage("app")
	ctx := ctx(t)

	m, err := c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{
		ImageIdentifier: arn, Logging: &microvmsapi.Logging{CloudWatch: &microvmsapi.CloudWatchLogging{LogGroup: "/rayito/app"}},
		MaximumDurationInSeconds: 600, ExecutionRoleArn: s.RoleARN("exec"),
		IngressNetworkConnectors: []string{s.ConnectorARN(microvmsapi.ConnectorAllIngress)},
		EgressNetworkConnectors:  []string{s.ConnectorARN(microvmsapi.ConnectorInternet)},
	})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !strings.HasPrefix(m.MicrovmID, "microvm-") || len(m.MicrovmID) != len("microvm-")+36:
		t.Fatalf("id %q", m.MicrovmID)
	case m.State != microvmsapi.StatePending:
		t.Fatalf("state %s", m.State)
	case !strings.HasPrefix(m.Endpoint, "127.0.0.1:"):
		t.Fatalf("endpoint %q", m.Endpoint)
	case m.ImageArn != arn || m.ImageVersion != "1" || m.StartedAt == nil:
		t.Fatalf("answer %+v", m)
	case m.Logging == nil || m.Logging.CloudWatch == nil || m.MaximumDurationInSeconds != 600 || m.ExecutionRoleArn != s.RoleARN("exec"):
		t.Fatalf("configuration not echoed: %+v", m)
	case len(m.IngressNetworkConnectors) != 1 || len(m.EgressNetworkConnectors) != 1:
		t.Fatalf("connectors not echoed: %+v", m)
	}

	// PENDING → RUNNING after Polls (2) Gets.
	g, err := c.GetMicrovm(ctx, m.MicrovmID)
	if err != nil || g.State != microvmsapi.StatePending {
		t.Fatalf("first Get %v %v", g, err)
	}
	g, err = c.GetMicrovm(ctx, m.MicrovmID)
	if err != nil || g.State != microvmsapi.StateRunning || g.Endpoint != m.Endpoint {
		t.Fatalf("second Get %v %v", g, err)
	}

	// Suspend → SUSPENDING → SUSPENDED; again is fine.
	if err := c.SuspendMicrovm(ctx, m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.GetMicrovm(ctx, m.MicrovmID); g.State != microvmsapi.StateSuspending {
		t.Fatalf("after suspend %s", g.State)
	}
	pollState(t, c, m.MicrovmID, microvmsapi.StateSuspended)
	if err := c.SuspendMicrovm(ctx, m.MicrovmID); err != nil {
		t.Fatalf("second suspend: %v", err)
	}
	// Resume: SUSPENDED until the resume is done, then RUNNING.
	if err := c.ResumeMicrovm(ctx, m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	pollState(t, c, m.MicrovmID, microvmsapi.StateRunning)
	if err := c.ResumeMicrovm(ctx, m.MicrovmID); err != nil {
		t.Fatalf("resume of a running microVM: %v", err)
	}

	// Terminate → TERMINATING → TERMINATED, still listed.
	if err := c.TerminateMicrovm(ctx, m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.GetMicrovm(ctx, m.MicrovmID); g.State != microvmsapi.StateTerminating {
		t.Fatalf("after terminate %s", g.State)
	}
	g = pollState(t, c, m.MicrovmID, microvmsapi.StateTerminated)
	if g.StateReason != "Success." || g.TerminatedAt == nil {
		t.Fatalf("terminated %+v", g)
	}
	if err := c.TerminateMicrovm(ctx, m.MicrovmID); err != nil {
		t.Fatalf("second terminate: %v", err)
	}
	wantErr(t, c.SuspendMicrovm(ctx, m.MicrovmID), microvmsapi.ConflictException, 409)
	wantErr(t, c.ResumeMicrovm(ctx, m.MicrovmID), microvmsapi.ConflictException, 409)
	l, err := c.ListMicrovms(ctx, microvms.ListInput{})
	if err != nil || len(l.Items) != 1 || l.Items[0].State != microvmsapi.StateTerminated || l.Items[0].MicrovmID != m.MicrovmID {
		t.Fatalf("list %+v %v", l, err)
	}

	// Suspending a PENDING microVM is a conflict; unknown ids are not found.
	p := run(t, c, arn)
	wantErr(t, c.SuspendMicrovm(ctx, p.MicrovmID), microvmsapi.ConflictException, 409)
	const unknown = "microvm-00000000-0000-4000-8000-000000000000"
	_, err = c.GetMicrovm(ctx, unknown)
	wantErr(t, err, microvmsapi.ResourceNotFoundException, 404)
	if !errors.Is(err, microvms.ErrNotFound) {
		t.Fatalf("%v is not ErrNotFound", err)
	}
	wantErr(t, c.TerminateMicrovm(ctx, unknown), microvmsapi.ResourceNotFoundException, 404)
	wantErr(t, c.SuspendMicrovm(ctx, unknown), microvmsapi.ResourceNotFoundException, 404)
	wantErr(t, c.ResumeMicrovm(ctx, unknown), microvmsapi.ResourceNotFoundException, 404)
}

func TestMaximumDuration(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	s := newServer(t, microvmstest.Options{Clock: clk.Now, Polls: 1})
	c := newClient(t, s, microvms.WithClock(clk.Now))
	m, err := c.RunMicrovm(ctx(t), &microvmsapi.RunMicrovmInput{ImageIdentifier: s.AddImage("a"), MaximumDurationInSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	pollState(t, c, m.MicrovmID, microvmsapi.StateRunning)
	clk.Advance(61 * time.Second)
	g := pollState(t, c, m.MicrovmID, microvmsapi.StateTerminated)
	if g.StateReason == "" || g.TerminatedAt == nil {
		t.Fatalf("%+v", g)
	}
}

func TestRunValidation(t *testing.T) {
	s := newServer(t, microvmstest.Options{Rates: map[microvms.Operation]float64{microvms.OpRunMicrovm: 0}})
	arn := s.AddImage("app")
	c := newClient(t, s)
	ctx := ctx(t)

	// Through the client.
	for _, tc := range []struct {
		name string
		in   microvmsapi.RunMicrovmInput
		exc  string
	}{
		{"bare name", microvmsapi.RunMicrovmInput{ImageIdentifier: "app"}, microvmsapi.ValidationException},
		{"unknown image", microvmsapi.RunMicrovmInput{ImageIdentifier: s.ImageARN("nope")}, microvmsapi.ResourceNotFoundException},
		{"other region", microvmsapi.RunMicrovmInput{ImageIdentifier: "arn:aws:lambda:eu-west-1:123456789012:microvm-image:app"}, microvmsapi.ValidationException},
		{"other account", microvmsapi.RunMicrovmInput{ImageIdentifier: "arn:aws:lambda:us-east-1:999999999999:microvm-image:app"}, microvmsapi.ValidationException},
		{"unknown version", microvmsapi.RunMicrovmInput{ImageIdentifier: arn, ImageVersion: "7"}, microvmsapi.ResourceNotFoundException},
		{"NO_EGRESS", microvmsapi.RunMicrovmInput{ImageIdentifier: arn, EgressNetworkConnectors: []string{s.ConnectorARN("NO_EGRESS")}}, microvmsapi.ValidationException},
		{"ingress as egress", microvmsapi.RunMicrovmInput{ImageIdentifier: arn, EgressNetworkConnectors: []string{s.ConnectorARN(microvmsapi.ConnectorAllIngress)}}, microvmsapi.ValidationException},
		{"connector of another region", microvmsapi.RunMicrovmInput{ImageIdentifier: arn, IngressNetworkConnectors: []string{microvmsapi.ConnectorARN("eu-west-1", microvmsapi.ConnectorAllIngress)}}, microvmsapi.ValidationException},
		{"execution role", microvmsapi.RunMicrovmInput{ImageIdentifier: arn, ExecutionRoleArn: "arn:aws:iam::123456789012:user/x"}, microvmsapi.ValidationException},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.RunMicrovm(ctx, &tc.in)
			wantErr(t, err, tc.exc, microvmsapi.StatusOf(tc.exc))
		})
	}

	// VPC connectors of the account are accepted.
	if _, err := c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: arn,
		EgressNetworkConnectors: []string{"arn:aws:lambda:us-east-1:123456789012:network-connector:my-vpc"}}); err != nil {
		t.Fatalf("VPC connector: %v", err)
	}

	// Raw bodies the client would refuse itself.
	ten := make([]string, 11)
	for i := range ten {
		ten[i] = s.ConnectorARN(microvmsapi.ConnectorAllIngress)
	}
	for _, tc := range []struct {
		name string
		body string
	}{
		{"payload", `{"imageIdentifier":"` + arn + `","runHookPayload":"` + strings.Repeat("é", 4097) + `"}`},
		{"duration 0", `{"imageIdentifier":"` + arn + `","maximumDurationInSeconds":0}`},
		{"duration 28801", `{"imageIdentifier":"` + arn + `","maximumDurationInSeconds":28801}`},
		{"idle partial", `{"imageIdentifier":"` + arn + `","idlePolicy":{"maxIdleDurationSeconds":60}}`},
		{"idle 59", `{"imageIdentifier":"` + arn + `","idlePolicy":{"maxIdleDurationSeconds":59,"suspendedDurationSeconds":0,"autoResumeEnabled":true}}`},
		{"11 connectors", string(mustJSON(t, microvmsapi.RunMicrovmInput{ImageIdentifier: arn, IngressNetworkConnectors: ten}))},
		{"logging both", `{"imageIdentifier":"` + arn + `","logging":{"disabled":{},"cloudWatch":{"logGroup":"g"}}}`},
		{"logging none", `{"imageIdentifier":"` + arn + `","logging":{}}`},
		{"no image", `{}`},
		{"bad JSON", `{"imageIdentifier":`},
		{"not an object", `[1]`},
		{"wrong type", `{"imageIdentifier":5}`},
		{"unknown field", `{"imageIdentifier":"` + arn + `","bogus":1}`},
		{"two objects", `{} {}`},
		{"token too long", `{"imageIdentifier":"` + arn + `","clientToken":"` + strings.Repeat("a", 129) + `"}`},
		{"body over 1 MiB", `{"imageIdentifier":"` + arn + `","runHookPayload":"` + strings.Repeat("a", 1<<20) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := raw(t, s, http.MethodPost, microvmsapi.PathMicrovms, []byte(tc.body), false)
			if r.status != 400 || r.exception != microvmsapi.ValidationException {
				t.Fatalf("%d %s %s", r.status, r.exception, r.body)
			}
			if !strings.Contains(string(r.body), `"message"`) {
				t.Fatalf("body %s", r.body)
			}
		})
	}

	// A valid idle policy (all three fields) is accepted.
	r := raw(t, s, http.MethodPost, microvmsapi.PathMicrovms, []byte(`{"imageIdentifier":"`+arn+`","idlePolicy":{"maxIdleDurationSeconds":60,"suspendedDurationSeconds":0,"autoResumeEnabled":false}}`), false)
	if r.status != 200 {
		t.Fatalf("idle policy: %d %s", r.status, r.body)
	}
}

func TestNotLaunchable(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	c := newClient(t, s)
	ctx := ctx(t)
	img, err := c.CreateMicrovmImage(ctx, imageInput(s, "building"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: img.ImageArn})
	wantErr(t, err, microvmsapi.ValidationException, 400)

	arn := s.AddImage("app")
	if _, err := c.UpdateMicrovmImageVersion(ctx, arn, "1", microvmsapi.VersionInactive); err != nil {
		t.Fatal(err)
	}
	_, err = c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: arn})
	wantErr(t, err, microvmsapi.ValidationException, 400)
	_, err = c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: arn, ImageVersion: "1"})
	wantErr(t, err, microvmsapi.ValidationException, 400)
}

func TestClientToken(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	c := newClient(t, s)
	arn := s.AddImage("app")
	ctx := ctx(t)
	in := &microvmsapi.RunMicrovmInput{ImageIdentifier: arn, ClientToken: "tok-1", RunHookPayload: "a"}
	a, err := c.RunMicrovm(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.RunMicrovm(ctx, in)
	if err != nil || b.MicrovmID != a.MicrovmID {
		t.Fatalf("repeat: %v %v, want %s", b, err, a.MicrovmID)
	}
	_, err = c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: arn, ClientToken: "tok-1", RunHookPayload: "b"})
	wantErr(t, err, microvmsapi.ConflictException, 409)
	l, _ := c.ListMicrovms(ctx, microvms.ListInput{})
	if len(l.Items) != 1 {
		t.Fatalf("%d microVMs, want 1", len(l.Items))
	}
}

func TestListPagination(t *testing.T) {
	s := newServer(t, microvmstest.Options{Rates: map[microvms.Operation]float64{microvms.OpRunMicrovm: 0}})
	c := newClient(t, s)
	a, b := s.AddImage("a"), s.AddImage("b")
	ctx := ctx(t)
	var ids []string
	for range 5 {
		ids = append(ids, run(t, c, a).MicrovmID)
	}
	other := run(t, c, b).MicrovmID

	var got []string
	var sizes []int
	in := microvms.ListInput{MaxResults: 2, ImageIdentifier: a}
	for {
		out, err := c.ListMicrovms(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(out.Items))
		for _, it := range out.Items {
			if it.ImageArn != a || it.StartedAt == nil || it.ImageVersion != "1" {
				t.Fatalf("item %+v", it)
			}
			got = append(got, it.MicrovmID)
		}
		if out.NextToken == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	if fmt.Sprint(sizes) != "[2 2 1]" {
		t.Fatalf("page sizes %v", sizes)
	}
	for i, id := range got { // newest first
		if id != ids[len(ids)-1-i] {
			t.Fatalf("order %v, want the reverse of %v", got, ids)
		}
	}
	// ListAll, the image filter by name, and the version filter.
	n := 0
	for it, err := range c.ListAll(ctx, microvms.ListInput{MaxResults: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		_ = it
	}
	if n != 6 {
		t.Fatalf("ListAll: %d", n)
	}
	out, err := c.ListMicrovms(ctx, microvms.ListInput{ImageIdentifier: "b"})
	if err != nil || len(out.Items) != 1 || out.Items[0].MicrovmID != other {
		t.Fatalf("filter by name: %+v %v", out, err)
	}
	out, err = c.ListMicrovms(ctx, microvms.ListInput{ImageIdentifier: a, ImageVersion: "2"})
	if err != nil || len(out.Items) != 0 {
		t.Fatalf("version filter: %+v %v", out, err)
	}

	// Bad tokens and page sizes.
	_, err = c.ListMicrovms(ctx, microvms.ListInput{NextToken: "bogus"})
	wantErr(t, err, microvmsapi.ValidationException, 400)
	first, _ := c.ListMicrovms(ctx, microvms.ListInput{MaxResults: 1})
	_, err = c.ListMicrovms(ctx, microvms.ListInput{NextToken: first.NextToken, ImageIdentifier: a})
	wantErr(t, err, microvmsapi.ValidationException, 400) // a token of another listing
	for _, q := range []string{"maxResults=0", "maxResults=51", "maxResults=x", "maxResults=-1", "nextToken="} {
		r := raw(t, s, http.MethodGet, microvmsapi.PathMicrovms+"?"+q, nil, false)
		if r.status != 400 || r.exception != microvmsapi.ValidationException {
			t.Fatalf("%s: %d %s", q, r.status, r.exception)
		}
	}
}

func TestSignature(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	ctx := ctx(t)
	good := newClient(t, s)
	if _, err := good.ListMicrovms(ctx, microvms.ListInput{}); err != nil {
		t.Fatal(err)
	}

	creds := func(id, secret string) microvms.Option {
		return microvms.WithCredentials(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}, nil
		}))
	}
	for _, tc := range []struct {
		name string
		opts []microvms.Option
		exc  string
	}{
		{"wrong secret", []microvms.Option{creds("AKIDRAYITOTEST", "wrong-secret")}, "InvalidSignatureException"},
		{"unknown key", []microvms.Option{creds("AKIDOTHER", "rayito-test-secret")}, "UnrecognizedClientException"},
		{"wrong region", []microvms.Option{microvms.WithRegion("eu-west-1")}, "InvalidSignatureException"},
		{"expired", []microvms.Option{microvms.WithClock(func() time.Time { return time.Now().Add(-6 * time.Minute) })}, "InvalidSignatureException"},
		{"future", []microvms.Option{microvms.WithClock(func() time.Time { return time.Now().Add(6 * time.Minute) })}, "InvalidSignatureException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, s, tc.opts...)
			_, err := c.GetMicrovm(ctx, "microvm-x")
			wantErr(t, err, tc.exc, 403)
			if k, _ := microvms.KindOf(err); k != microvms.KindAuthentication {
				t.Fatalf("kind %s", k)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "signature we calculated") {
				t.Fatalf("error text leaks the message: %v", err)
			}
		})
	}

	r := raw(t, s, http.MethodGet, microvmsapi.PathMicrovms, nil, true)
	if r.status != 403 || r.exception != "UnrecognizedClientException" {
		t.Fatalf("unsigned: %d %s", r.status, r.exception)
	}
	if strings.Contains(string(r.body), "rayito-test-secret") {
		t.Fatal("the message holds the secret")
	}
	// A tampered body breaks the signature.
	req, _ := http.NewRequest(http.MethodPost, s.URL()+microvmsapi.PathMicrovms, strings.NewReader(`{"imageIdentifier":"a"}`))
	if err := s.SignRequest(req, []byte(`{"imageIdentifier":"a"}`)); err != nil {
		t.Fatal(err)
	}
	req.Body = io.NopCloser(strings.NewReader(`{"imageIdentifier":"b"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get(microvmsapi.ErrorTypeHeader) != "InvalidSignatureException" {
		t.Fatalf("tampered: %d %s", resp.StatusCode, resp.Header.Get(microvmsapi.ErrorTypeHeader))
	}

	reqs := s.Requests()
	if !reqs[0].Signed || reqs[0].Op != microvms.OpListMicrovms || reqs[0].Method != http.MethodGet || reqs[0].Status != 200 {
		t.Fatalf("first request %+v", reqs[0])
	}
	for _, r := range reqs[1:] {
		if r.Signed {
			t.Fatalf("request %+v recorded as signed", r)
		}
	}

	// A session token must be sent and signed.
	st := newServer(t, microvmstest.Options{Credentials: aws.Credentials{AccessKeyID: "AKID2", SecretAccessKey: "s2", SessionToken: "sess"}})
	c, err := st.Client(microvms.WithoutRateLimits())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListMicrovms(ctx, microvms.ListInput{}); err != nil {
		t.Fatalf("with session token: %v", err)
	}
	bad := newClient(t, st, microvms.WithCredentials(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKID2", SecretAccessKey: "s2", SessionToken: "other"}, nil
	})))
	_, err = bad.ListMicrovms(ctx, microvms.ListInput{})
	wantErr(t, err, "InvalidSignatureException", 403)
}

func TestFailScript(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	arn := s.AddImage("app")
	ctx := ctx(t)
	once := newClient(t, s, microvms.WithMaxAttempts(1))

	s.Fail(microvms.OpRunMicrovm, 1, 402, microvmsapi.ServiceQuotaExceededException, "")
	_, err := once.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: arn})
	wantErr(t, err, microvmsapi.ServiceQuotaExceededException, 402)
	if !errors.Is(err, microvms.ErrQuotaExceeded) {
		t.Fatalf("%v is not ErrQuotaExceeded", err)
	}

	s.Fail(microvms.OpGetMicrovm, 1, 429, microvmsapi.ThrottlingException, "1")
	_, err = once.GetMicrovm(ctx, "microvm-x")
	wantErr(t, err, microvmsapi.ThrottlingException, 429)
	var ae *microvms.APIError
	if errors.As(err, &ae); ae.RetryAfter != time.Second || ae.Kind != microvms.KindRateLimit {
		t.Fatalf("%+v", ae)
	}
	// The script is used up: the next call answers as usual.
	_, err = once.GetMicrovm(ctx, "microvm-x")
	wantErr(t, err, microvmsapi.ResourceNotFoundException, 404)

	// Two 500s, then success: the client's retries get through.
	retrying := newClient(t, s)
	s.Fail(microvms.OpListMicrovms, 2, 500, microvmsapi.InternalServerException, "")
	n := len(s.Requests())
	if _, err := retrying.ListMicrovms(ctx, microvms.ListInput{}); err != nil {
		t.Fatal(err)
	}
	if got := len(s.Requests()) - n; got != 3 {
		t.Fatalf("%d attempts, want 3", got)
	}
}

func TestThrottling(t *testing.T) {
	clk := &fakeClock{t: time.Now()}
	s := newServer(t, microvmstest.Options{Clock: clk.Now})
	c := newClient(t, s, microvms.WithMaxAttempts(1), microvms.WithClock(clk.Now))
	ctx := ctx(t)
	for op, rate := range map[microvms.Operation]int{microvms.OpSuspendMicrovm: 2, microvms.OpRunMicrovm: 5, microvms.OpTerminateMicrovm: 10} {
		call := func() error {
			switch op {
			case microvms.OpSuspendMicrovm:
				return c.SuspendMicrovm(ctx, "microvm-x")
			case microvms.OpTerminateMicrovm:
				return c.TerminateMicrovm(ctx, "microvm-x")
			}
			_, err := c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: "x"})
			return err
		}
		for i := range rate {
			if err := call(); errors.Is(err, microvms.ErrRateLimit) {
				t.Fatalf("%s call %d throttled", op, i+1)
			}
		}
		err := call()
		wantErr(t, err, microvmsapi.ThrottlingException, 429)
	}
	// The buckets refill with the clock.
	clk.Advance(time.Second)
	if err := c.SuspendMicrovm(ctx, "microvm-x"); errors.Is(err, microvms.ErrRateLimit) {
		t.Fatal("still throttled after a second")
	}
}

func TestUnknownRoutes(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/", 404},
		{http.MethodGet, "/2025-09-09/nothing", 404},
		{http.MethodPut, "/2025-09-09/microvms", 405},
		{http.MethodPost, "/2025-09-09/microvms/x/y", 404},
		{http.MethodGet, "/2025-09-09/microvms/x/suspend", 405},
		{http.MethodPatch, "/2017-03-31/tags/arn", 405},
		{http.MethodGet, "/2025-09-09//x", 404},
	} {
		r := raw(t, s, tc.method, tc.path, nil, false)
		if r.status != tc.status || r.exception != "UnknownOperationException" {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, r.status, r.exception)
		}
	}
}

// TestNoPanics sends odd bodies and queries to every operation: every
// answer is a proper response below 500.
func TestNoPanics(t *testing.T) {
	rates := map[microvms.Operation]float64{}
	for _, op := range allOps {
		rates[op] = 0
	}
	s := newServer(t, microvmstest.Options{Rates: rates})
	arn := s.AddImage("app")
	bodies := []string{"", "{", "[]", "null", "1", `"x"`, `{"x":1}`, `{"tags":null}`, `{"allowedPorts":[{}]}`,
		`{"allowedPorts":[{"port":1,"range":{"startPort":2,"endPort":1}}],"expirationInMinutes":5}`,
		`{"imageIdentifier":"` + arn + `","imageVersion":"1","idlePolicy":null}`, `{"Tags":{"":"x"}}`, `{"status":"BOGUS"}`,
		`{"name":"x","codeArtifact":null,"hooks":{"microvmHooks":{"run":"ENABLED"}}}`, strings.Repeat("[", 10000)}
	paths := []string{
		"/2025-09-09/microvms", "/2025-09-09/microvms/microvm-x", "/2025-09-09/microvms/microvm-x/suspend",
		"/2025-09-09/microvms/microvm-x/resume", "/2025-09-09/microvms/microvm-x/auth-token",
		"/2025-09-09/microvms/microvm-x/shell-auth-token", "/2025-09-09/microvm-images", "/2025-09-09/microvm-images/app",
		"/2025-09-09/microvm-images/app/versions", "/2025-09-09/microvm-images/app/versions/1",
		"/2025-09-09/microvm-images/app/versions/1/builds", "/2025-09-09/microvm-images/app/versions/1/builds/b",
		"/2025-09-09/managed-microvm-images", "/2025-09-09/managed-microvm-images/al2023-1/versions",
		"/2017-03-31/tags/" + arn, "/2017-03-31/tags/x",
	}
	for _, p := range paths {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			for _, b := range bodies {
				for _, q := range []string{"", "?maxResults=1&nextToken=%00", "?tagKeys=&nameFilter=%FF"} {
					r := raw(t, s, m, p+q, []byte(b), false)
					if r.status >= 500 || r.status == 0 {
						t.Fatalf("%s %s%s %q: %d %s", m, p, q, b, r.status, r.body)
					}
				}
			}
		}
	}
}

var allOps = []microvms.Operation{
	microvms.OpRunMicrovm, microvms.OpGetMicrovm, microvms.OpListMicrovms, microvms.OpTerminateMicrovm,
	microvms.OpSuspendMicrovm, microvms.OpResumeMicrovm, microvms.OpCreateMicrovmAuthToken,
	microvms.OpCreateMicrovmImage, microvms.OpListMicrovmImages, microvms.OpGetMicrovmImage,
	microvms.OpUpdateMicrovmImage, microvms.OpDeleteMicrovmImage, microvms.OpListMicrovmImageVersions,
	microvms.OpGetMicrovmImageVersion, microvms.OpUpdateMicrovmImageVersion, microvms.OpDeleteMicrovmImageVersion,
	microvms.OpListMicrovmImageBuilds, microvms.OpGetMicrovmImageBuild, microvms.OpListManagedMicrovmImages,
	microvms.OpListManagedMicrovmImageVersions, microvms.OpCreateMicrovmShellAuthToken, microvms.OpTagResource,
	microvms.OpUntagResource, microvms.OpListTags,
}

func TestRequestsRecordOps(t *testing.T) {
	s := newServer(t, microvmstest.Options{})
	c := newClient(t, s)
	arn := s.AddImage("app")
	ctx := ctx(t)
	m := run(t, c, arn)
	_, _ = c.GetMicrovm(ctx, m.MicrovmID)
	_ = c.TerminateMicrovm(ctx, m.MicrovmID)
	var ops []string
	for _, r := range s.Requests() {
		ops = append(ops, string(r.Op)+" "+r.Method+" "+r.Path+" "+strconv.FormatBool(r.Signed))
	}
	want := []string{
		"RunMicrovm POST /2025-09-09/microvms true",
		"GetMicrovm GET /2025-09-09/microvms/" + m.MicrovmID + " true",
		"TerminateMicrovm DELETE /2025-09-09/microvms/" + m.MicrovmID + " true",
	}
	if fmt.Sprint(ops) != fmt.Sprint(want) {
		t.Fatalf("requests\n%v\nwant\n%v", ops, want)
	}
	if b := s.Requests()[0].Body; !strings.Contains(string(b), `"clientToken"`) {
		t.Fatalf("body %s", b)
	}
}

func TestSignatureClock(t *testing.T) {
	clk := &fakeClock{t: time.Now().Add(61 * time.Minute)}
	// The client signs with the real time: with Clock alone the fake
	// sees an old date.
	s := newServer(t, microvmstest.Options{Clock: clk.Now})
	_, err := newClient(t, s).ListMicrovms(ctx(t), microvms.ListInput{})
	wantErr(t, err, "InvalidSignatureException", 403)
	s = newServer(t, microvmstest.Options{Clock: clk.Now, SignatureClock: time.Now})
	if _, err := newClient(t, s).ListMicrovms(ctx(t), microvms.ListInput{}); err != nil {
		t.Fatal(err)
	}
}
