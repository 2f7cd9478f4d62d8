package store

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/rayito-dev/rayito/proto/events"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// fakeSecrets is Secrets Manager at the wire (nothing here can reach the
// real one): it records each request's operation and JSON body.
type fakeSecrets struct {
	mu      sync.Mutex
	calls   []smCall
	secrets map[string]string
	deny    string // an operation answered AccessDeniedException
}

type smCall struct {
	Op   string
	Body map[string]any
}

func (f *fakeSecrets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager.")
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, smCall{op, body})
	fail := func(code string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(400)
		json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": "no"})
	}
	if op == f.deny {
		fail("AccessDeniedException")
		return
	}
	switch op {
	case "CreateSecret":
		name, _ := body["Name"].(string)
		if _, ok := f.secrets[name]; ok {
			fail("ResourceExistsException")
			return
		}
		f.secrets[name], _ = body["SecretString"].(string)
		json.NewEncoder(w).Encode(map[string]string{"ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + name + "-AbCdEf", "Name": name})
	case "DeleteSecret":
		name, _ := body["SecretId"].(string)
		if _, ok := f.secrets[name]; !ok {
			fail("ResourceNotFoundException")
			return
		}
		delete(f.secrets, name)
		json.NewEncoder(w).Encode(map[string]string{"Name": name})
	default:
		fail("InvalidRequestException")
	}
}

func (f *fakeSecrets) ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		out = append(out, c.Op)
	}
	return out
}

// TestSDKOnTheTable: the SDK's webhook and event calls on AWS and the
// stack's store agree on the table (the contract of proto/events' layout):
// a webhook the SDK registers is what the deliverer lists, with its secret
// in Secrets Manager under rayito/webhooks/<id> (the exact requests); the
// events the forwarder stores are what GetEvents returns, in order; a
// delete removes the item and then the secret, at once; a failed item
// write takes the secret back; a denied call names the stack's policy.
func TestSDKOnTheTable(t *testing.T) {
	ddb := startDynalite(t)
	const table = "rayito-events-EventsTable-1"
	createTable(t, ddb, table)
	dyn, err := url.Parse(*ddb.Options().BaseEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	sm := &fakeSecrets{secrets: map[string]string{}}
	proxy := httputil.NewSingleHostReverseProxy(dyn)
	var denyDynamo sync.Map // operation -> true: answered AccessDeniedException
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.Header.Get("X-Amz-Target")
		switch {
		case strings.HasPrefix(target, "secretsmanager."):
			sm.ServeHTTP(w, r)
		case strings.HasPrefix(target, "DynamoDB_20120810."):
			if _, ok := denyDynamo.Load(strings.TrimPrefix(target, "DynamoDB_20120810.")); ok {
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.WriteHeader(400)
				io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#AccessDeniedException","message":"no"}`)
				return
			}
			proxy.ServeHTTP(w, r)
		default:
			http.Error(w, "unknown service", 400)
		}
	}))
	defer router.Close()
	awsCfg := aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
		BaseEndpoint: aws.String(router.URL),
	}
	opts := []rayito.Option{rayito.WithBackend(rayito.BackendAWS), rayito.WithAWSConfig(awsCfg), rayito.WithEventsTable(table)}
	ctx := context.Background()
	st := &Dynamo{API: ddb, Table: table}

	// Register: the secret first, then the item the store reads.
	secret := strings.Repeat("s", 40)
	hook, got, err := rayito.RegisterWebhook(ctx, rayito.WebhookRegistration{URL: "https://hooks.example.com/rayito?x=1", Secret: secret, Types: []rayito.EventType{rayito.EventKilled, rayito.EventCreated, rayito.EventKilled}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if got != secret || !events.ValidWebhookID(hook.ID) || hook.URL != "https://hooks.example.com/rayito?x=1" {
		t.Fatalf("registered %+v", hook)
	}
	name := events.WebhookSecretPrefix + hook.ID
	if sm.secrets[name] != secret {
		t.Fatalf("secret stored under %v", sm.calls)
	}
	if c := sm.calls[0]; c.Op != "CreateSecret" || c.Body["Name"] != name || c.Body["SecretString"] != secret {
		t.Fatalf("CreateSecret request %v", c.Op)
	}
	hooks, err := st.ListWebhooks(ctx)
	if err != nil || len(hooks) != 1 {
		t.Fatalf("store lists %v, %v", hooks, err)
	}
	if h := hooks[0]; h.WebhookID != hook.ID || h.URL != hook.URL || h.SecretRef != name ||
		len(h.Types) != 2 || h.Types[0] != events.Created || h.Types[1] != events.Killed || !h.CreatedAt.Equal(hook.CreatedAt) {
		t.Fatalf("store reads %+v, SDK registered %+v", h, hook)
	}
	// A generated secret: 64 hex digits.
	hook2, secret2, err := rayito.RegisterWebhook(ctx, rayito.WebhookRegistration{URL: "https://hooks2.example.com/"}, opts...)
	if err != nil || len(secret2) != 64 || sm.secrets[events.WebhookSecretPrefix+hook2.ID] != secret2 {
		t.Fatalf("generated secret: %v", err)
	}
	// A webhook the store writes (the local platform's way) lists too.
	if err := st.PutWebhook(ctx, Webhook{WebhookID: events.NewWebhookID(), URL: "https://hooks3.example.com/", SecretRef: "rayito/webhooks/x", CreatedAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	list, err := rayito.ListWebhooks(ctx, opts...)
	if err != nil || len(list) != 3 || list[0].ID != hook.ID || list[1].ID != hook2.ID || list[2].URL != "https://hooks3.example.com/" {
		t.Fatalf("ListWebhooks: %+v, %v", list, err)
	}
	if len(list[0].Types) != 2 || len(list[1].Types) != 0 {
		t.Fatalf("types: %+v", list)
	}

	// Delete: the item, then the secret, without a recovery window.
	sm.calls = nil
	if err := rayito.DeleteWebhook(ctx, hook2.ID, opts...); err != nil {
		t.Fatal(err)
	}
	if c := sm.calls; len(c) != 1 || c[0].Op != "DeleteSecret" || c[0].Body["SecretId"] != events.WebhookSecretPrefix+hook2.ID || c[0].Body["ForceDeleteWithoutRecovery"] != true {
		t.Fatalf("DeleteSecret requests: %v", c)
	}
	if _, ok := sm.secrets[events.WebhookSecretPrefix+hook2.ID]; ok {
		t.Fatal("the secret outlived its webhook")
	}
	if hooks, _ := st.ListWebhooks(ctx); len(hooks) != 2 {
		t.Fatalf("store still lists %d webhooks", len(hooks))
	}
	if err := rayito.DeleteWebhook(ctx, hook2.ID, opts...); !errors.Is(err, rayito.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}

	// A failed item write takes the secret back.
	denyDynamo.Store("PutItem", true)
	sm.calls = nil
	_, _, err = rayito.RegisterWebhook(ctx, rayito.WebhookRegistration{URL: "https://hooks4.example.com/"}, opts...)
	if !errors.Is(err, rayito.ErrPermissionDenied) || !strings.Contains(err.Error(), "EventsWebhookAdminPolicy") {
		t.Fatalf("denied PutItem: %v", err)
	}
	if ops := sm.ops(); len(ops) != 2 || ops[0] != "CreateSecret" || ops[1] != "DeleteSecret" || len(sm.secrets) != 1 {
		t.Fatalf("after a failed PutItem: %v, %d secrets", ops, len(sm.secrets))
	}
	denyDynamo.Delete("PutItem")
	// A denied secret: nothing written.
	sm.deny = "CreateSecret"
	if _, _, err = rayito.RegisterWebhook(ctx, rayito.WebhookRegistration{URL: "https://hooks5.example.com/"}, opts...); !errors.Is(err, rayito.ErrPermissionDenied) {
		t.Fatalf("denied CreateSecret: %v", err)
	}
	sm.deny = ""
	if hooks, _ := st.ListWebhooks(ctx); len(hooks) != 2 {
		t.Fatalf("store lists %d webhooks after the refusals", len(hooks))
	}

	// Events: what the store holds, in generation order.
	for i, typ := range []events.Type{events.Created, events.Paused, events.Resumed, events.Killed} {
		ev := mkEvent("sbx-sdk", 10+i, typ, uint64(i+1))
		if err := st.PutEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutEvent(ctx, mkEvent("sbx-other", 20, events.Created, 1)); err != nil {
		t.Fatal(err)
	}
	evs, err := rayito.GetEvents(ctx, rayito.EventsQuery{SandboxID: "sbx-sdk", Order: "asc"}, opts...)
	if err != nil || len(evs) != 4 {
		t.Fatalf("GetEvents: %v, %v", evs, err)
	}
	for i, want := range []rayito.EventType{rayito.EventCreated, rayito.EventPaused, rayito.EventResumed, rayito.EventKilled} {
		if evs[i].Type != want || evs[i].Generation != uint64(i+1) || evs[i].SandboxID != "sbx-sdk" {
			t.Fatalf("event %d: %+v", i, evs[i])
		}
	}
	if evs[3].KillReason != string(events.KillUnknown) {
		t.Fatalf("kill reason %q", evs[3].KillReason)
	}
	desc, err := rayito.GetEvents(ctx, rayito.EventsQuery{SandboxID: "sbx-sdk", Limit: 2}, opts...)
	if err != nil || len(desc) != 2 || desc[0].Type != rayito.EventKilled || desc[1].Type != rayito.EventResumed {
		t.Fatalf("newest two: %+v, %v", desc, err)
	}
	none, err := rayito.GetEvents(ctx, rayito.EventsQuery{SandboxID: "sbx-none"}, opts...)
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("no events: %v, %v", none, err)
	}
	// The reader's policy missing: the error names it.
	denyDynamo.Store("Query", true)
	if _, err := rayito.GetEvents(ctx, rayito.EventsQuery{SandboxID: "sbx-sdk"}, opts...); !errors.Is(err, rayito.ErrPermissionDenied) || !strings.Contains(err.Error(), "EventsReaderPolicy") {
		t.Fatalf("denied Query: %v", err)
	}
	denyDynamo.Delete("Query")
	// A table that does not exist: ErrNotFound saying to deploy the stack.
	missing := append(opts[:len(opts):len(opts)], rayito.WithEventsTable("no-such-table"))
	if _, err := rayito.ListWebhooks(ctx, missing...); !errors.Is(err, rayito.ErrNotFound) || !strings.Contains(err.Error(), "stack deploy events") {
		t.Fatalf("missing table: %v", err)
	}
}
