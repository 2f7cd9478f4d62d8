package rayito

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/events"
)

// TestEventsCallsOffline: what is refused before any call: a short secret,
// a URL that is not https or names a blocked address (on AWS; the local
// platform decides about loopback itself), a bad limit or order, a bad
// webhook id, an unknown type, a secret past 1024 bytes; on AWS a call
// without the events table (or with an invalid name), GetEvents without a
// sandbox id. The AWS calls themselves are tested against dynalite in the
// events module (events/internal/store/sdk_test.go).
func TestEventsCallsOffline(t *testing.T) {
	ctx := context.Background()
	noEnv := withGetenv(func(string) string { return "" })
	local := []Option{WithBackend(BackendLocal), WithEndpoint("http://127.0.0.1:1"), noEnv}
	aws := []Option{WithBackend(BackendAWS), noEnv}
	awsTable := append([]Option{WithEventsTable("rayito-events-EventsTable-X")}, aws...)
	for name, err := range map[string]error{
		"short secret": func() error {
			_, _, err := RegisterWebhook(ctx, WebhookRegistration{URL: "https://hooks.example.com/x", Secret: "short"}, local...)
			return err
		}(),
		"http": func() error {
			_, _, err := RegisterWebhook(ctx, WebhookRegistration{URL: "http://hooks.example.com/x"}, local...)
			return err
		}(),
		"blocked on aws": func() error {
			_, _, err := RegisterWebhook(ctx, WebhookRegistration{URL: "https://10.0.0.1/x"}, aws...)
			return err
		}(),
		"limit":    func() error { _, err := GetEvents(ctx, EventsQuery{Limit: 101}, local...); return err }(),
		"order":    func() error { _, err := GetEvents(ctx, EventsQuery{Order: "up"}, local...); return err }(),
		"id":       DeleteWebhook(ctx, "../x", local...),
		"id shape": DeleteWebhook(ctx, "wh_1", awsTable...),
		"type": func() error {
			_, _, err := RegisterWebhook(ctx, WebhookRegistration{URL: "https://hooks.example.com/x", Types: []EventType{"exploded"}}, local...)
			return err
		}(),
		"long secret": func() error {
			_, _, err := RegisterWebhook(ctx, WebhookRegistration{URL: "https://hooks.example.com/x", Secret: strings.Repeat("s", 1025)}, awsTable...)
			return err
		}(),
		"no table": func() error {
			_, _, err := RegisterWebhook(ctx, WebhookRegistration{URL: "https://hooks.example.com/x"}, aws...)
			if err == nil || !strings.Contains(err.Error(), "RAYITO_EVENTS_TABLE") {
				return errors.New("no RAYITO_EVENTS_TABLE in the error")
			}
			return err
		}(),
		"bad table": func() error {
			_, err := ListWebhooks(ctx, append([]Option{WithEventsTable("a/b")}, aws...)...)
			return err
		}(),
		"no table list":   func() error { _, err := ListWebhooks(ctx, aws...); return err }(),
		"no table delete": DeleteWebhook(ctx, "wh_0123456789abcdef01234567", aws...),
		"events no id":    func() error { _, err := GetEvents(ctx, EventsQuery{}, awsTable...); return err }(),
		"events bad id":   func() error { _, err := GetEvents(ctx, EventsQuery{SandboxID: "../x"}, awsTable...); return err }(),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	// No platform: a clear error naming what to do.
	if _, err := ListWebhooks(ctx, local...); ReasonOf(err) != ReasonPlatformUnavailable {
		t.Errorf("no platform: %v", err)
	}
}

// TestSandboxEventsKeyAWS: on AWS the stack key is read with one
// GetSecretValue of the ARN given (the exact wire request), and the key
// pushed is the sandbox's derived key; a refusal is a permission error
// that carries no key; without an ARN nothing is called.
func TestSandboxEventsKeyAWS(t *testing.T) {
	ctx := context.Background()
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:rayito/events/stack-key-AbCdEf"
	stackKey := strings.Repeat("k", 64)
	var (
		mu   sync.Mutex
		deny bool
		wire []awsCall
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(data, &body)
		mu.Lock()
		defer mu.Unlock()
		wire = append(wire, awsCall{r.Header.Get("X-Amz-Target"), body})
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if deny {
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"__type":"AccessDeniedException","message":"no"}`)
			return
		}
		_, _ = io.WriteString(w, `{"ARN":"`+arn+`","SecretString":"`+stackKey+`"}`)
	}))
	defer srv.Close()
	calls := func() []awsCall { mu.Lock(); defer mu.Unlock(); return append([]awsCall(nil), wire...) }
	awsCfg := aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), HTTPClient: srv.Client(),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}, nil
		}),
	}
	cfg := newConfig([]Option{WithBackend(BackendAWS), WithAWSConfig(awsCfg), WithEvents(LifecycleEvents{StackKeySecretARN: arn})})
	id := "microvm-11111111-2222-4333-8444-555555555555"
	key, err := sandboxEventsKey(ctx, cfg, id)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key, events.SandboxKey([]byte(stackKey), id)) {
		t.Fatal("not the sandbox's derived key")
	}
	got := calls()
	if len(got) != 1 || got[0].target != "secretsmanager.GetSecretValue" || len(got[0].body) != 1 || got[0].body["SecretId"] != arn {
		t.Fatalf("wire: %+v", got)
	}
	mu.Lock()
	deny = true
	mu.Unlock()
	_, err = sandboxEventsKey(ctx, cfg, id)
	if !errors.Is(err, ErrPermissionDenied) || strings.Contains(err.Error(), stackKey) {
		t.Fatalf("denied: %v", err)
	}
	cfg = newConfig([]Option{WithBackend(BackendAWS), WithAWSConfig(awsCfg), WithEvents(LifecycleEvents{})})
	if _, err := sandboxEventsKey(ctx, cfg, id); !errors.Is(err, ErrInvalidArgument) || len(calls()) != 2 {
		t.Fatalf("no ARN: %v, %d calls", err, len(calls()))
	}
}

// awsCall is one JSON call a fake AWS service received.
type awsCall struct {
	target string
	body   map[string]any
}
