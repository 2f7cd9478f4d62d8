package awsx

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/rayito-dev/rayito/events/internal/deliverer"
)

// wire is an AWS JSON-protocol endpoint on loopback that records each
// request's target and body and answers from a table.
type wire struct {
	mu     sync.Mutex
	calls  []call
	answer func(target string, body map[string]any) (int, string)
}

type call struct {
	Target string
	Body   map[string]any
}

func (w *wire) start(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(raw, &body)
		target := r.Header.Get("X-Amz-Target")
		if r.Method != http.MethodPost || r.URL.Path != "/" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			t.Errorf("request %s %s unsigned or misrouted", r.Method, r.URL.Path)
		}
		w.mu.Lock()
		w.calls = append(w.calls, call{target, body})
		w.mu.Unlock()
		code, out := w.answer(target, body)
		rw.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if code != 200 {
			rw.Header().Set("X-Amzn-ErrorType", out)
			rw.WriteHeader(code)
			rw.Write([]byte(`{"__type":"` + out + `","message":"the request for secret-name-in-message failed"}`))
			return
		}
		rw.Write([]byte(out))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

var creds = credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")

func secretsClient(url string) *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(url), RetryMaxAttempts: 1})
}

func TestStackKey(t *testing.T) {
	key := strings.Repeat("k", 64)
	w := &wire{answer: func(target string, body map[string]any) (int, string) {
		switch body["SecretId"] {
		case "arn:stack-key":
			return 200, `{"SecretString":"` + key + `"}`
		case "arn:short":
			return 200, `{"SecretString":"short"}`
		case "arn:binary":
			return 200, `{"SecretBinary":"` + "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" + `"}`
		}
		return 400, "ResourceNotFoundException"
	}}
	c := secretsClient(w.start(t))
	ctx := context.Background()
	got, err := StackKey{API: c, SecretID: "arn:stack-key"}.StackKey(ctx)
	if err != nil || string(got) != key {
		t.Fatalf("%q %v", got, err)
	}
	if got, err := (StackKey{API: c, SecretID: "arn:binary"}).StackKey(ctx); err != nil || len(got) != 32 || got[31] != 31 {
		t.Fatalf("binary %v %v", got, err)
	}
	if _, err := (StackKey{API: c, SecretID: "arn:short"}).StackKey(ctx); !errors.Is(err, ErrSecret) {
		t.Fatalf("short key: %v", err)
	}
	_, err = StackKey{API: c, SecretID: "arn:gone"}.StackKey(ctx)
	if err == nil || !strings.Contains(err.Error(), "ResourceNotFoundException") || strings.Contains(err.Error(), "secret-name-in-message") {
		t.Fatalf("missing: %v", err)
	}
	want := []call{
		{"secretsmanager.GetSecretValue", map[string]any{"SecretId": "arn:stack-key"}},
		{"secretsmanager.GetSecretValue", map[string]any{"SecretId": "arn:binary"}},
		{"secretsmanager.GetSecretValue", map[string]any{"SecretId": "arn:short"}},
		{"secretsmanager.GetSecretValue", map[string]any{"SecretId": "arn:gone"}},
	}
	if len(w.calls) != len(want) {
		t.Fatalf("calls %+v", w.calls)
	}
	for i := range want {
		if w.calls[i].Target != want[i].Target || len(w.calls[i].Body) != 1 || w.calls[i].Body["SecretId"] != want[i].Body["SecretId"] {
			t.Fatalf("call %d = %+v, want %+v", i, w.calls[i], want[i])
		}
	}
}

func TestWebhookSecrets(t *testing.T) {
	w := &wire{answer: func(target string, body map[string]any) (int, string) {
		if body["SecretId"] == "rayito/webhooks/wh-1" {
			return 200, `{"SecretString":"whsec-1"}`
		}
		return 200, `{"SecretString":""}`
	}}
	s := WebhookSecrets{API: secretsClient(w.start(t))}
	ctx := context.Background()
	if v, err := s.Secret(ctx, "rayito/webhooks/wh-1"); err != nil || v != "whsec-1" {
		t.Fatalf("%q %v", v, err)
	}
	if _, err := s.Secret(ctx, "rayito/webhooks/empty"); !errors.Is(err, ErrSecret) {
		t.Fatalf("empty: %v", err)
	}
	// Names outside the prefix are never asked for.
	for _, ref := range []string{"rayito/stack-key", "rayito/webhooks/", "arn:aws:secretsmanager:us-east-1:1:secret:other", ""} {
		if _, err := s.Secret(ctx, ref); !errors.Is(err, ErrSecret) {
			t.Fatalf("%q: %v", ref, err)
		}
	}
	if len(w.calls) != 2 {
		t.Fatalf("calls %+v", w.calls)
	}
}

func TestFailureQueue(t *testing.T) {
	w := &wire{answer: func(target string, body map[string]any) (int, string) {
		sum := md5.Sum([]byte(body["MessageBody"].(string)))
		return 200, `{"MessageId":"m-1","MD5OfMessageBody":"` + hex.EncodeToString(sum[:]) + `"}`
	}}
	url := w.start(t)
	c := sqs.New(sqs.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(url), RetryMaxAttempts: 1})
	q := FailureQueue{API: c, QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/rayito-events-failures"}
	f := deliverer.Failure{EventID: "e1", SandboxID: "sbx", WebhookID: "wh", Type: "sandbox.lifecycle.killed", Reason: "status", Status: 502, Attempts: 3}
	if err := q.SendFailure(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if len(w.calls) != 1 || w.calls[0].Target != "AmazonSQS.SendMessage" {
		t.Fatalf("calls %+v", w.calls)
	}
	b := w.calls[0].Body
	if len(b) != 2 || b["QueueUrl"] != q.QueueURL {
		t.Fatalf("body %v", b)
	}
	if b["MessageBody"] != `{"event_id":"e1","sandbox_id":"sbx","webhook_id":"wh","type":"sandbox.lifecycle.killed","reason":"status","status":502,"attempts":3}` {
		t.Fatalf("message %v", b["MessageBody"])
	}
}
