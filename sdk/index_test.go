package rayito

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/sdk/awstest"
	"github.com/rayito-dev/rayito/sdk/microvms"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

// The metadata index against dynalite (a real DynamoDB API on Node.js),
// with the AWS control plane played by microvmstest (simulated microVMs,
// SigV4 checked) and a data plane that answers Health as rayd does.

// readyHealth answers Health like a ready rayd of the microVM the fake's
// proxy names, and counts the calls per microVM.
type readyHealth struct {
	raydv1connect.UnimplementedHealthServiceHandler
	mu    sync.Mutex
	calls map[string]int
}

func (h *readyHealth) Health(_ context.Context, req *connect.Request[raydv1.HealthRequest]) (*connect.Response[raydv1.HealthResponse], error) {
	id := req.Header().Get("X-Rayito-Microvm-Id")
	h.mu.Lock()
	h.calls[id]++
	h.mu.Unlock()
	return connect.NewResponse(&raydv1.HealthResponse{AgentReady: true, SandboxId: id, AgentVersion: Version}), nil
}

func (h *readyHealth) count(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[id]
}

// countingTransport counts DynamoDB requests by operation (X-Amz-Target).
type countingTransport struct {
	mu  sync.Mutex
	ops map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		c.mu.Lock()
		c.ops[t[strings.LastIndexByte(t, '.')+1:]]++
		c.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}

type indexWorld struct {
	srv    *microvmstest.Server
	db     *dynamodb.Client
	health *readyHealth
	ddb    *countingTransport
	table  string
	dbURL  string
	image  string // the template's image ARN
	logs   *bytes.Buffer
	logMu  *sync.Mutex
}

func newIndexWorld(t *testing.T) *indexWorld {
	t.Helper()
	db := awstest.Dynalite(t)
	h := &readyHealth{calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle(raydv1connect.NewHealthServiceHandler(h))
	srv, err := microvmstest.New(microvmstest.Options{Polls: 1, App: mux})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	w := &indexWorld{srv: srv, db: db, health: h, ddb: &countingTransport{ops: map[string]int{}},
		table: "rayito-index", dbURL: *db.Options().BaseEndpoint, image: srv.AddImage("tpl"),
		logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	_, err = db.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(w.table),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (w *indexWorld) log() string {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	return w.logs.String()
}

// opts reach the fake as a program reaches AWS, with the index on
// dynalite (DynamoDbIndex.Endpoint: the AWS configuration's endpoint is the
// fake control plane's).
func (w *indexWorld) opts(t *testing.T, idx *DynamoDbIndex, extra ...Option) []Option {
	base := w.srv.URL()
	cfg := aws.Config{Region: w.srv.Region(), BaseEndpoint: &base, Credentials: w.srv.CredentialsProvider(),
		HTTPClient: &http.Client{Transport: w.ddb}}
	o := []Option{WithBackend(BackendAWS), WithAWSConfig(cfg), WithEndpointRootCAs(w.srv.CertPool()),
		WithTokenStoreDir(t.TempDir()), WithTemplate("tpl"),
		WithLogger(slog.New(slog.NewTextHandler(lockedWriter{w.logMu, w.logs}, nil)))}
	if idx != nil {
		if idx.Table == "" {
			idx.Table = w.table
		}
		idx.Endpoint = w.dbURL
		o = append(o, WithIndex(*idx))
	}
	return append(o, extra...)
}

func (w *indexWorld) put(t *testing.T, item map[string]ddbtypes.AttributeValue) {
	t.Helper()
	if _, err := w.db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(w.table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func (w *indexWorld) get(t *testing.T, id string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := w.db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(w.table),
		Key: map[string]ddbtypes.AttributeValue{"pk": ddbS(id)}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func ddbN(v int64) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func ddbM(md map[string]string) ddbtypes.AttributeValue {
	m := map[string]ddbtypes.AttributeValue{}
	for k, v := range md {
		m[k] = ddbS(v)
	}
	return &ddbtypes.AttributeValueMemberM{Value: m}
}

func infosByID(infos []Info) map[string]Info {
	m := map[string]Info{}
	for _, i := range infos {
		m[i.ID] = i
	}
	return m
}

func TestIndexCreateListAndIntegrity(t *testing.T) {
	w := newIndexWorld(t)
	ctx := t.Context()
	const envValue = "env-value-never-stored-7f3a"
	a, err := Create(ctx, w.opts(t, &DynamoDbIndex{},
		WithMetadata(map[string]string{"team": "a", "job": "1"}), WithEnvs(map[string]string{"API_KEY": envValue}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill(context.WithoutCancel(ctx))
	b, err := Create(ctx, w.opts(t, &DynamoDbIndex{TTLMargin: 2 * time.Hour},
		WithMetadata(map[string]string{"team": "b"}), WithTimeout(10*time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Kill(context.WithoutCancel(ctx))
	if n := w.ddb.count("PutItem"); n != 2 {
		t.Errorf("%d PutItem, want one per create", n)
	}

	// The row: what docs/index.md says, nothing more.
	row := w.get(t, b.ID())
	info, err := b.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"pk": true, "image_arn": true, "started_at": true, "metadata": true, "sdk_version": true, "expires_at": true, "image_version": true}
	for k := range row {
		if !want[k] {
			t.Errorf("row attribute %q is not one of the documented ones", k)
		}
	}
	if got := row["image_arn"].(*ddbtypes.AttributeValueMemberS).Value; got != w.image {
		t.Errorf("image_arn %q, want %q", got, w.image)
	}
	if got := row["sdk_version"].(*ddbtypes.AttributeValueMemberS).Value; got != Version {
		t.Errorf("sdk_version %q", got)
	}
	ms, _ := strconv.ParseInt(row["started_at"].(*ddbtypes.AttributeValueMemberN).Value, 10, 64)
	if d := time.UnixMilli(ms).Sub(info.StartedAt); d > time.Second || d < -time.Second {
		t.Errorf("started_at %d is %v from the platform's start", ms, d)
	}
	exp, _ := strconv.ParseInt(row["expires_at"].(*ddbtypes.AttributeValueMemberN).Value, 10, 64)
	if !info.ExpiresAt.IsZero() {
		if d := time.Unix(exp, 0).Sub(info.ExpiresAt.Add(2 * time.Hour)); d > time.Second || d < -time.Second {
			t.Errorf("expires_at %d: %v from max lifetime + TTLMargin", exp, d)
		}
	} else if exp < time.Now().Add(2*time.Hour).Unix() {
		t.Errorf("expires_at %d is before now + TTLMargin", exp)
	}

	// Nothing secret anywhere in the table: not the tokens, their hashes,
	// nor the envs.
	scan, err := w.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(w.table)})
	if err != nil {
		t.Fatal(err)
	}
	dump := fmt.Sprintf("%#v", scan.Items)
	for _, m := range scan.Items {
		for _, v := range m {
			dump += fmt.Sprintf("%v", v)
			if mm, ok := v.(*ddbtypes.AttributeValueMemberM); ok {
				for k, vv := range mm.Value {
					dump += k + fmt.Sprintf("%v", vv)
				}
			}
		}
	}
	for _, s := range []*Sandbox{a, b} {
		dg, _ := accesstoken.Digest(s.AccessToken())
		for _, secret := range []string{s.AccessToken(), dg, envValue, "API_KEY"} {
			if strings.Contains(dump, secret) {
				t.Errorf("the table holds a secret (%d bytes)", len(secret))
			}
		}
	}

	// Pause b; a metadata query finds it from its row, without waking it
	// (no Health call reaches it) and with the listing's state.
	if err := b.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	before := w.health.count(b.ID())
	batches := w.ddb.count("BatchGetItem")
	got, err := List(ctx, w.opts(t, &DynamoDbIndex{}, WithMetadataFilter(map[string]string{"team": "b"}))...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != b.ID() || got[0].Metadata["team"] != "b" {
		t.Fatalf("listed %+v, want b alone with its metadata", got)
	}
	if got[0].State != "SUSPENDING" && got[0].State != "SUSPENDED" {
		t.Errorf("state %s, want the listing's (paused)", got[0].State)
	}
	if n := w.health.count(b.ID()); n != before {
		t.Errorf("%d Health calls reached the paused sandbox", n-before)
	}
	if n := w.ddb.count("BatchGetItem") - batches; n != 1 {
		t.Errorf("%d BatchGetItem for one listing page, want 1", n)
	}
	// Without the index, the same query cannot see a paused sandbox.
	plain, err := List(ctx, w.opts(t, nil, WithMetadataFilter(map[string]string{"team": "b"}))...)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != 0 {
		t.Errorf("without the index: %+v", plain)
	}
	// An indexed listing fills Metadata of every verified sandbox.
	all, err := List(ctx, w.opts(t, &DynamoDbIndex{})...)
	if err != nil {
		t.Fatal(err)
	}
	if m := infosByID(all); m[a.ID()].Metadata["job"] != "1" || m[b.ID()].Metadata["team"] != "b" {
		t.Errorf("metadata not filled from the rows: %+v", all)
	}

	// Forged rows: a sandbox that does not exist, a's row with another
	// image, and with a start 5 s off. None creates a sandbox, changes a
	// state or lends metadata.
	startA := a.platformInfo(t)
	w.put(t, map[string]ddbtypes.AttributeValue{"pk": ddbS("microvm-00000000-0000-4000-8000-000000000000"),
		"image_arn": ddbS(w.image), "started_at": ddbN(time.Now().UnixMilli()), "metadata": ddbM(map[string]string{"team": "b"})})
	for name, item := range map[string]map[string]ddbtypes.AttributeValue{
		"other image": {"pk": ddbS(a.ID()), "image_arn": ddbS(w.srv.ImageARN("evil")),
			"started_at": ddbN(startA.StartedAt.UnixMilli()), "metadata": ddbM(map[string]string{"team": "b"})},
		"start 5 s off": {"pk": ddbS(a.ID()), "image_arn": ddbS(w.image),
			"started_at": ddbN(startA.StartedAt.Add(5 * time.Second).UnixMilli()), "metadata": ddbM(map[string]string{"team": "b"})},
		"garbage": {"pk": ddbS(a.ID()), "image_arn": ddbN(1), "started_at": ddbS("x"), "metadata": ddbS("team=b")},
	} {
		w.put(t, item)
		got, err := List(ctx, w.opts(t, &DynamoDbIndex{}, WithMetadataFilter(map[string]string{"team": "b"}))...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != 1 || got[0].ID != b.ID() {
			t.Errorf("%s: listed %+v, want b alone", name, got)
		}
		all, err := List(ctx, w.opts(t, &DynamoDbIndex{})...)
		if err != nil {
			t.Fatal(err)
		}
		m := infosByID(all)
		if len(all) != 2 || m[a.ID()].State != "RUNNING" || m[a.ID()].Metadata != nil {
			t.Errorf("%s: listing %+v, want a and b, a RUNNING without metadata", name, all)
		}
	}
}

// platformInfo is the platform's view of the sandbox.
func (s *Sandbox) platformInfo(t *testing.T) *Info {
	t.Helper()
	i, err := GetInfo(t.Context(), s.id, s.createOpts...)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func TestIndexWriteFailure(t *testing.T) {
	w := newIndexWorld(t)
	ctx := t.Context()
	// No such table: the write fails.
	_, err := Create(ctx, w.opts(t, &DynamoDbIndex{Table: "no-such-table"})...)
	if !errors.Is(err, ErrIndexWrite) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("err %v, want ErrIndexWrite (and ErrNotFound)", err)
	}
	terminated := 0
	for _, r := range w.srv.Requests() {
		if r.Op == microvms.OpTerminateMicrovm && r.Status == http.StatusOK {
			terminated++
		}
	}
	if terminated != 1 {
		t.Errorf("%d terminations, want the new sandbox terminated", terminated)
	}
	// IndexWarn: the sandbox is handed out, with a warning that names no
	// value.
	s, err := Create(ctx, w.opts(t, &DynamoDbIndex{Table: "no-such-table", OnWriteFailure: IndexWarn},
		WithMetadata(map[string]string{"secretish": "label-value-9"}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill(context.WithoutCancel(ctx))
	if l := w.log(); !strings.Contains(l, "metadata index row was not written") || strings.Contains(l, "label-value-9") || strings.Contains(l, "no-such-table") {
		t.Errorf("warning %q", l)
	}
	// Bad settings are refused before any sandbox is made.
	runs := 0
	for _, r := range w.srv.Requests() {
		if r.Op == microvms.OpRunMicrovm {
			runs++
		}
	}
	for _, idx := range []DynamoDbIndex{{Table: "x"}, {Table: "ok-table", OnWriteFailure: 7}, {Table: "ok-table", TTLMargin: -time.Second}} {
		if _, err := Create(ctx, WithBackend(BackendAWS), WithTemplate("tpl"), WithIndex(idx)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", idx, err)
		}
	}
	after := 0
	for _, r := range w.srv.Requests() {
		if r.Op == microvms.OpRunMicrovm {
			after++
		}
	}
	if after != runs {
		t.Errorf("a refused index setting still ran %d sandboxes", after-runs)
	}
}

func TestParseIndexRow(t *testing.T) {
	t.Parallel()
	good := func() map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": ddbS("microvm-1"), "image_arn": ddbS("arn:img"),
			"started_at": ddbN(1700000000000), "metadata": ddbM(map[string]string{"k": "v"}), "extra": ddbS("ignored")}
	}
	r, err := parseIndexRow(good())
	if err != nil || r.ID != "microvm-1" || r.ImageARN != "arn:img" || r.StartedAt.UnixMilli() != 1700000000000 || r.Metadata["k"] != "v" {
		t.Fatalf("%+v %v", r, err)
	}
	long := strings.Repeat("x", 2000)
	for name, mut := range map[string]func(m map[string]ddbtypes.AttributeValue){
		"no pk":          func(m map[string]ddbtypes.AttributeValue) { delete(m, "pk") },
		"pk number":      func(m map[string]ddbtypes.AttributeValue) { m["pk"] = ddbN(1) },
		"pk with space":  func(m map[string]ddbtypes.AttributeValue) { m["pk"] = ddbS("a b") },
		"no image":       func(m map[string]ddbtypes.AttributeValue) { delete(m, "image_arn") },
		"empty image":    func(m map[string]ddbtypes.AttributeValue) { m["image_arn"] = ddbS("") },
		"started string": func(m map[string]ddbtypes.AttributeValue) { m["started_at"] = ddbS("1") },
		"started float": func(m map[string]ddbtypes.AttributeValue) {
			m["started_at"] = &ddbtypes.AttributeValueMemberN{Value: "1.5"}
		},
		"started negative": func(m map[string]ddbtypes.AttributeValue) { m["started_at"] = ddbN(-1) },
		"metadata list":    func(m map[string]ddbtypes.AttributeValue) { m["metadata"] = &ddbtypes.AttributeValueMemberL{} },
		"metadata number": func(m map[string]ddbtypes.AttributeValue) {
			m["metadata"] = &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{"k": ddbN(1)}}
		},
		"metadata long value": func(m map[string]ddbtypes.AttributeValue) { m["metadata"] = ddbM(map[string]string{"k": long}) },
		"metadata long key":   func(m map[string]ddbtypes.AttributeValue) { m["metadata"] = ddbM(map[string]string{long: "v"}) },
	} {
		m := good()
		mut(m)
		if _, err := parseIndexRow(m); !errors.Is(err, errIndexRow) {
			t.Errorf("%s: %v, want errIndexRow", name, err)
		}
	}
}

// FuzzParseIndexRow: rows are written by whoever can write the table;
// parsing never panics and what it accepts is within the limits.
func FuzzParseIndexRow(f *testing.F) {
	f.Add("microvm-1", "arn:img", "1700000000000", "k", "v", byte(0))
	f.Add("", "", "-1", "", "", byte(7))
	f.Add("a b", "arn", "1e3", "k", "\xff", byte(3))
	f.Fuzz(func(t *testing.T, pk, arn, started, key, val string, kinds byte) {
		item := map[string]ddbtypes.AttributeValue{}
		pick := func(bit int, s string) ddbtypes.AttributeValue {
			if kinds&(1<<bit) != 0 {
				return &ddbtypes.AttributeValueMemberN{Value: s}
			}
			return ddbS(s)
		}
		item["pk"] = pick(0, pk)
		item["image_arn"] = pick(1, arn)
		if kinds&(1<<2) != 0 {
			item["started_at"] = ddbS(started)
		} else {
			item["started_at"] = &ddbtypes.AttributeValueMemberN{Value: started}
		}
		if kinds&(1<<3) == 0 {
			item["metadata"] = &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{key: pick(4, val)}}
		}
		r, err := parseIndexRow(item)
		if err != nil {
			if !errors.Is(err, errIndexRow) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if r.ID != pk || r.ImageARN != arn || r.StartedAt.UnixMilli() <= 0 || len(r.Metadata) > 1 {
			t.Fatalf("accepted %+v", r)
		}
		for k, v := range r.Metadata {
			if len(k) > 128 || len(v) > 1024 {
				t.Fatalf("accepted metadata over the limits")
			}
		}
	})
}

// holdBack is dynalite behind a throttle: each BatchGetItem answers only
// its first key and hands the rest back as UnprocessedKeys, as DynamoDB
// does under load.
type holdBack struct {
	db    *dynamodb.Client
	calls int
}

func (h *holdBack) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return h.db.PutItem(ctx, in, o...)
}

func (h *holdBack) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	h.calls++
	first := map[string]ddbtypes.KeysAndAttributes{}
	rest := map[string]ddbtypes.KeysAndAttributes{}
	for table, ka := range in.RequestItems {
		f := ka
		f.Keys = ka.Keys[:1]
		first[table] = f
		if len(ka.Keys) > 1 {
			r := ka
			r.Keys = ka.Keys[1:]
			rest[table] = r
		}
	}
	out, err := h.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: first}, o...)
	if err != nil {
		return nil, err
	}
	out.UnprocessedKeys = rest
	return out, nil
}

func TestIndexUnprocessedKeysRetried(t *testing.T) {
	w := newIndexWorld(t)
	ctx := t.Context()
	var ids []string
	for i := range 5 {
		id := fmt.Sprintf("microvm-%d", i)
		ids = append(ids, id)
		w.put(t, map[string]ddbtypes.AttributeValue{"pk": ddbS(id), "image_arn": ddbS("arn:img"), "started_at": ddbN(1700000000000 + int64(i))})
	}
	// A forged-looking row that does not parse is left out, not an error.
	w.put(t, map[string]ddbtypes.AttributeValue{"pk": ddbS("microvm-bad"), "image_arn": ddbN(3), "started_at": ddbN(1)})
	h := &holdBack{db: w.db}
	ic := &indexClient{db: h, idx: DynamoDbIndex{Table: w.table}}
	rows, err := ic.getRows(ctx, append(append([]string{}, ids...), "microvm-bad", "microvm-absent", ids[0]))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 || h.calls != 7 { // 7 distinct keys, one per call
		t.Errorf("%d rows in %d calls, want 5 rows in 7", len(rows), h.calls)
	}
	// Keys never processed: the listing fails, typed, after the attempts.
	stuck := &stuckDB{}
	ic = &indexClient{db: stuck, idx: DynamoDbIndex{Table: w.table}}
	if _, err := ic.getRows(ctx, ids); !errors.Is(err, ErrResourceExhausted) || stuck.calls != idxBatchAttempts {
		t.Errorf("err %v after %d calls, want ErrResourceExhausted after %d", err, stuck.calls, idxBatchAttempts)
	}
}

// stuckDB never processes a key.
type stuckDB struct{ calls int }

func (s *stuckDB) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, nil
}

func (s *stuckDB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	s.calls++
	return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
}
