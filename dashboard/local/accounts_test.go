package local

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// fakeAWS stands in for STS and the MicroVMs API (the AWS control plane,
// which nothing here can reach) and records every request as the wire
// carried it.
type fakeAWS struct {
	mu       sync.Mutex
	reqs     []string // "STS <form>", "LIST <access key id>", "CE <target> <content type> <scope> <body>"
	ceDenied bool
}

const (
	roleProd = "arn:aws:iam::210987654321:role/rayito-dashboard-read"
	roleDeny = "arn:aws:iam::111111111111:role/nope"
)

func (f *fakeAWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == "POST" && r.Header.Get("X-Amz-Target") != "":
		auth := r.Header.Get("Authorization")
		scope := auth[strings.Index(auth, "Credential=")+len("Credential="):]
		scope, _, _ = strings.Cut(scope, ",")
		f.reqs = append(f.reqs, "CE "+r.Header.Get("X-Amz-Target")+" "+r.Header.Get("Content-Type")+" "+scope[strings.Index(scope, "/")+10:]+" "+string(body))
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if f.ceDenied {
			w.WriteHeader(400)
			io.WriteString(w, `{"__type":"AccessDeniedException","message":"User: arn:aws:iam::123456789012:user/me is not authorized to perform: ce:GetCostAndUsage"}`)
			return
		}
		if !strings.Contains(string(body), "NextPageToken") {
			io.WriteString(w, `{"GroupDefinitions":[{"Key":"SERVICE","Type":"DIMENSION"}],"NextPageToken":"p2","ResultsByTime":[{"Estimated":true,"Groups":[{"Keys":["AWS Lambda"],"Metrics":{"UnblendedCost":{"Amount":"12.5","Unit":"USD"}}},{"Keys":["Amazon S3"],"Metrics":{"UnblendedCost":{"Amount":"0.25","Unit":"USD"}}}],"TimePeriod":{"End":"2026-12-05","Start":"2026-12-01"},"Total":{}}]}`)
			return
		}
		io.WriteString(w, `{"ResultsByTime":[{"Estimated":true,"Groups":[{"Keys":["AWS Lambda"],"Metrics":{"UnblendedCost":{"Amount":"1.5","Unit":"USD"}}},{"Keys":["Tax"],"Metrics":{"UnblendedCost":{"Amount":"x","Unit":"USD"}}}],"TimePeriod":{"End":"2026-12-05","Start":"2026-12-01"},"Total":{}}]}`)
	case r.Method == "POST" && r.URL.Path == "/":
		form, _ := url.ParseQuery(string(body))
		f.reqs = append(f.reqs, "STS "+form.Encode())
		w.Header().Set("Content-Type", "text/xml")
		if form.Get("RoleArn") == roleDeny {
			w.WriteHeader(403)
			io.WriteString(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>User: arn:aws:iam::123456789012:user/me is not authorized to perform: sts:AssumeRole on resource: `+roleDeny+`</Message></Error><RequestId>r</RequestId></ErrorResponse>`)
			return
		}
		io.WriteString(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><Credentials><AccessKeyId>ASIAPRODREAD</AccessKeyId><SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken><Expiration>`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`</Expiration></Credentials><AssumedRoleUser><Arn>arn:aws:sts::210987654321:assumed-role/rayito-dashboard-read/rayito-dashboard</Arn><AssumedRoleId>AROA:rayito-dashboard</AssumedRoleId></AssumedRoleUser></AssumeRoleResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleResponse>`)
	case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/microvms"):
		auth := r.Header.Get("Authorization")
		key, _, _ := strings.Cut(strings.TrimPrefix(auth[strings.Index(auth, "Credential=")+len("Credential="):], ""), "/")
		f.reqs = append(f.reqs, "LIST "+key)
		w.Header().Set("Content-Type", "application/json")
		// The other account's sandbox runs: a read role must not reach
		// it (no GetMicrovm, no token) beyond the listing.
		state := "SUSPENDED"
		if strings.HasPrefix(key, "ASIA") {
			state = "RUNNING"
		}
		io.WriteString(w, `{"items":[{"microvmId":"microvm-`+strings.ToLower(key)+`","state":"`+state+`","imageArn":"arn:aws:lambda:us-east-1:210987654321:microvm-image:rayito-base","startedAt":"2026-01-01T00:00:00Z"}]}`)
	default:
		f.reqs = append(f.reqs, "OTHER "+r.Method+" "+r.URL.Path)
		w.WriteHeader(404)
	}
}

func (f *fakeAWS) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.reqs
	f.reqs = nil
	return out
}

func TestAccounts(t *testing.T) {
	fake := &fakeAWS{}
	ts := httptest.NewServer(fake)
	defer ts.Close()
	base := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDCALLER", "s", ""), BaseEndpoint: aws.String(ts.URL)}
	srv, err := New(Options{
		Backend: "aws", AllowActions: true,
		SDK:       []rayito.Option{rayito.WithBackend(rayito.BackendAWS), rayito.WithAWSConfig(base), rayito.WithoutTokenStore()},
		AWSConfig: &base,
		Accounts:  []Account{{Label: "prod", RoleARN: roleProd, ExternalID: "ext-123"}, {Label: "deny", RoleARN: roleDeny}},
		ListTTL:   time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := serveForTest(t, srv)
	cookie := h.login()
	// Nothing is assumed before an account is used.
	if got := fake.take(); len(got) != 0 {
		t.Fatalf("before any request: %q", got)
	}
	_, b := h.do("GET", "/api/v1/session", map[string]string{"Cookie": cookie}, "")
	if !strings.Contains(b, `"accounts":["default","prod","deny"]`) || strings.Contains(b, "arn:") || strings.Contains(b, "ext-123") {
		t.Fatalf("session: %s", b)
	}
	// The caller's own account: its own credentials, no STS.
	if resp, b := h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": cookie}, ""); resp.StatusCode != 200 || !strings.Contains(b, "microvm-akidcaller") {
		t.Fatalf("default: %d %s", resp.StatusCode, b)
	}
	if got := fake.take(); len(got) != 1 || got[0] != "LIST AKIDCALLER" {
		t.Fatalf("default listing: %q", got)
	}
	// prod: one AssumeRole, exactly this form, then the listing signed
	// with the assumed credentials; the next refresh reuses it.
	for range 2 {
		if resp, b := h.do("GET", "/api/v1/sandboxes?account=prod", map[string]string{"Cookie": cookie}, ""); resp.StatusCode != 200 || !strings.Contains(b, "microvm-asiaprodread") {
			t.Fatalf("prod: %d %s", resp.StatusCode, b)
		}
	}
	want := url.Values{"Action": {"AssumeRole"}, "Version": {"2011-06-15"}, "RoleArn": {roleProd}, "RoleSessionName": {"rayito-dashboard"}, "DurationSeconds": {"3600"}, "ExternalId": {"ext-123"}}
	if got := fake.take(); len(got) != 2 || got[0] != "STS "+want.Encode() || got[1] != "LIST ASIAPRODREAD" {
		t.Fatalf("prod: %q\nwant STS %s", got, want.Encode())
	}
	// Always read-only, no logs, events or billed cost; nothing called.
	csrf := h.csrf(cookie)
	resp, b := h.do("POST", "/api/v1/actions?account=prod", map[string]string{"Cookie": cookie, "Content-Type": "application/json", CSRFHeader: csrf}, `{"action":"kill","ids":["microvm-asiaprodread"],"confirm":true}`)
	wantError(t, "action on prod", resp, b, 403, "read_only_account")
	resp, b = h.do("GET", "/api/v1/sandboxes/microvm-asiaprodread/logs?account=prod", map[string]string{"Cookie": cookie}, "")
	wantError(t, "logs on prod", resp, b, 501, "not_in_read_role")
	resp, b = h.do("GET", "/api/v1/events?account=prod&sandbox=microvm-asiaprodread", map[string]string{"Cookie": cookie}, "")
	wantError(t, "events on prod", resp, b, 501, "not_in_read_role")
	resp, b = h.do("GET", "/api/v1/cost?billed=true&account=prod", map[string]string{"Cookie": cookie, CSRFHeader: csrf}, "")
	wantError(t, "billed on prod", resp, b, 501, "not_in_read_role")
	// Unknown labels: 400, no call.
	for _, q := range []string{"?account=staging", "?account=PROD", "?account=prod&account=deny", "?account=" + url.QueryEscape(roleProd)} {
		resp, b := h.do("GET", "/api/v1/sandboxes"+q, map[string]string{"Cookie": cookie}, "")
		wantError(t, "account "+q, resp, b, 400, "unknown_account")
	}
	if got := fake.take(); len(got) != 0 {
		t.Fatalf("refused requests called AWS: %q", got)
	}
	// An STS refusal is a code, without its message or any ARN.
	resp, b = h.do("GET", "/api/v1/sandboxes?account=deny", map[string]string{"Cookie": cookie}, "")
	t.Logf("an STS denial: %d %s", resp.StatusCode, b)
	if resp.StatusCode < 400 || strings.Contains(b, "arn:") || strings.Contains(b, "not authorized") || strings.Contains(b, "AccessDenied") {
		t.Fatalf("denied: %d %s", resp.StatusCode, b)
	}
	if got := fake.take(); len(got) == 0 || !strings.HasPrefix(got[0], "STS ") || !strings.Contains(got[0], "RoleArn="+url.QueryEscape(roleDeny)) || strings.Contains(got[0], "ExternalId") {
		t.Fatalf("deny: %q", got)
	}
}

func TestAccountOptions(t *testing.T) {
	good := Account{Label: "prod", RoleARN: roleProd}
	for name, c := range map[string]struct {
		backend  string
		accounts []Account
	}{
		"local backend":  {"local", []Account{good}},
		"default label":  {"aws", []Account{{Label: "default", RoleARN: roleProd}}},
		"bad label":      {"aws", []Account{{Label: "Prod!", RoleARN: roleProd}}},
		"repeated label": {"aws", []Account{good, good}},
		"user arn":       {"aws", []Account{{Label: "p", RoleARN: "arn:aws:iam::210987654321:user/me"}}},
		"account root":   {"aws", []Account{{Label: "p", RoleARN: "arn:aws:iam::210987654321:root"}}},
		"short account":  {"aws", []Account{{Label: "p", RoleARN: "arn:aws:iam::2109:role/r"}}},
		"bad external":   {"aws", []Account{{Label: "p", RoleARN: roleProd, ExternalID: "a b"}}},
	} {
		if _, err := New(Options{Backend: c.backend, Accounts: c.accounts}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
}

// TestBilled: the billed cost goes to Cost Explorer exactly once per hour
// (both pages of one query), signed for ce in us-east-1, month to date by
// service; it needs the CSRF token, answers by code when refused, and
// stops at the day's budget.
func TestBilled(t *testing.T) {
	fake := &fakeAWS{}
	ts := httptest.NewServer(fake)
	defer ts.Close()
	base := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDCALLER", "s", ""), BaseEndpoint: aws.String(ts.URL)}
	srv, err := New(Options{
		Backend: "aws", CostExplorer: true, AWSConfig: &base,
		SDK: []rayito.Option{rayito.WithBackend(rayito.BackendAWS), rayito.WithAWSConfig(base), rayito.WithoutTokenStore()},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	srv.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := serveForTest(t, srv)
	cookie := h.login()
	csrf := h.csrf(cookie)
	resp, b := h.do("GET", "/api/v1/cost?billed=true", map[string]string{"Cookie": cookie}, "")
	wantError(t, "billed without csrf", resp, b, 403, "csrf")
	if got := fake.take(); len(got) != 0 {
		t.Fatalf("without csrf: %q", got)
	}
	hdr := map[string]string{"Cookie": cookie, CSRFHeader: csrf}
	var bill Billed
	for range 2 {
		resp, b = h.do("GET", "/api/v1/cost?billed=true", hdr, "")
		if resp.StatusCode != 200 || json.Unmarshal([]byte(b), &bill) != nil {
			t.Fatalf("billed: %d %s", resp.StatusCode, b)
		}
	}
	want1 := `{"Granularity":"MONTHLY","GroupBy":[{"Key":"SERVICE","Type":"DIMENSION"}],"Metrics":["UnblendedCost"],"TimePeriod":{"End":"2026-12-05","Start":"2026-12-01"}}`
	want2 := `{"Granularity":"MONTHLY","GroupBy":[{"Key":"SERVICE","Type":"DIMENSION"}],"Metrics":["UnblendedCost"],"NextPageToken":"p2","TimePeriod":{"End":"2026-12-05","Start":"2026-12-01"}}`
	prefix := "CE AWSInsightsIndexService.GetCostAndUsage application/x-amz-json-1.1 us-east-1/ce/aws4_request "
	if got := fake.take(); len(got) != 2 || got[0] != prefix+want1 || got[1] != prefix+want2 {
		t.Fatalf("Cost Explorer requests:\n%q\nwant\n%q", got, []string{prefix + want1, prefix + want2})
	}
	if !bill.Billed || !bill.Estimated || bill.Start != "2026-12-01" || bill.End != "2026-12-05" || bill.TotalUSD != 14.25 ||
		len(bill.Services) != 2 || bill.Services[0] != (ServiceCost{"AWS Lambda", 14}) || bill.Services[1] != (ServiceCost{"Amazon S3", 0.25}) {
		t.Fatalf("billed: %+v", bill)
	}
	// An hour later: a new query; refused: a code, not its message.
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	fake.mu.Lock()
	fake.ceDenied = true
	fake.mu.Unlock()
	resp, b = h.do("GET", "/api/v1/cost?billed=true", hdr, "")
	wantError(t, "denied", resp, b, 403, "permission_denied")
	if strings.Contains(b, "arn:") || strings.Contains(b, "not authorized") {
		t.Fatal(b)
	}
	// The day's budget: 2 + 1 spent; the rest, then 429 with no call.
	for range BilledBudget - 3 {
		h.do("GET", "/api/v1/cost?billed=true", hdr, "")
	}
	if n := len(fake.take()); n != BilledBudget-2 {
		t.Fatalf("%d Cost Explorer requests, want %d", n, BilledBudget-2)
	}
	resp, b = h.do("GET", "/api/v1/cost?billed=true", hdr, "")
	wantError(t, "over budget", resp, b, 429, "cost_budget")
	if got := fake.take(); len(got) != 0 {
		t.Fatalf("over budget: %q", got)
	}
}
