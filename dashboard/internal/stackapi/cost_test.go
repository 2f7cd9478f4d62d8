package stackapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	ce "github.com/aws/aws-sdk-go-v2/service/costexplorer"
	cetypes "github.com/aws/aws-sdk-go-v2/service/costexplorer/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

func TestParseWindow(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	ok := []struct{ from, to, start, end string }{
		{"2026-12", "2026-12", "2026-12-01", "2026-12-05"},
		{"2025-12", "2026-11", "2025-12-01", "2026-12-01"},
		{"2026-01", "2026-01", "2026-01-01", "2026-02-01"},
	}
	for _, c := range ok {
		w, err := ParseWindow(c.from, c.to, now)
		if err != nil || w.Start.Format(time.DateOnly) != c.start || w.End.Format(time.DateOnly) != c.end {
			t.Errorf("%s..%s = %v %v", c.from, c.to, w, err)
		}
	}
	for _, c := range [][2]string{
		{"2025-11", "2026-01"},    // 14 months back
		{"2027-01", "2027-01"},    // the future
		{"2026-05", "2026-04"},    // reversed
		{"2026-5", "2026-05"},     // not YYYY-MM
		{"2026-05-01", "2026-05"}, // days
		{"", ""},
		{"2026-13", "2026-13"},
	} {
		if _, err := ParseWindow(c[0], c[1], now); !errors.Is(err, ErrWindow) {
			t.Errorf("%s..%s = %v, want ErrWindow", c[0], c[1], err)
		}
	}
}

// fakeCE is Cost Explorer (AWS, paid, unreachable here): it counts calls
// and records the exact request.
type fakeCE struct {
	n    atomic.Int64
	last *ce.GetCostAndUsageInput
}

func (f *fakeCE) GetCostAndUsage(ctx context.Context, in *ce.GetCostAndUsageInput, _ ...func(*ce.Options)) (*ce.GetCostAndUsageOutput, error) {
	f.n.Add(1)
	f.last = in
	return &ce.GetCostAndUsageOutput{ResultsByTime: []cetypes.ResultByTime{{
		TimePeriod: &cetypes.DateInterval{Start: in.TimePeriod.Start, End: in.TimePeriod.End},
		Total:      map[string]cetypes.MetricValue{"UnblendedCost": {Amount: aws.String("12.5"), Unit: aws.String("USD")}},
	}}}, nil
}

func TestCostBudget(t *testing.T) {
	db := startDynalite(t)
	createTable(t, db, "rayito-dashboard-state")
	r := newRig(t, false, nil)
	cex := &fakeCE{}
	r.h.Config.EnableCostExplorer = true
	r.h.Cost = &Cost{State: CostStateTable{API: db, Table: "rayito-dashboard-state"}, CE: cex}
	tok := token(t, nil)
	get := func(q string) (int, map[string]any) {
		req := request("GET", "/api/v1/cost", tok, nil, "")
		req.QueryStringParameters = map[string]string{}
		for _, kv := range strings.Split(q, "&") {
			k, v, _ := strings.Cut(kv, "=")
			req.QueryStringParameters[k] = v
		}
		return do(t, r.h, req)
	}
	// Refusals spend nothing.
	for q, code := range map[string]string{
		"from=2025-11&to=2026-01&region=eu-west-1":                   "invalid_window",
		"from=2026-12&to=2026-12&region=mars-1":                      "invalid_region",
		"from=2026-12&to=2026-12":                                    "invalid_region",
		"from=2026-12&to=2026-12&region=eu-west-1&granularity=DAILY": "invalid_request",
	} {
		if st, m := get(q); st != 400 || m["code"] != code {
			t.Fatalf("%s = %d %v", q, st, m)
		}
	}
	if cex.n.Load() != 0 {
		t.Fatal("Cost Explorer called on a refused query")
	}
	// The exact request.
	st, m := get("from=2026-11&to=2026-11&region=eu-west-1")
	if st != 200 || m["metric"] != "UnblendedCost" {
		t.Fatalf("= %d %v", st, m)
	}
	in := cex.last
	if aws.ToString(in.TimePeriod.Start) != "2026-11-01" || aws.ToString(in.TimePeriod.End) != "2026-12-01" || in.Granularity != cetypes.GranularityMonthly ||
		len(in.Metrics) != 1 || in.Metrics[0] != "UnblendedCost" || in.Filter.Dimensions.Key != cetypes.DimensionRegion || in.Filter.Dimensions.Values[0] != "eu-west-1" {
		t.Fatalf("request %+v", in)
	}
	// The cached answer costs nothing.
	if st, _ := get("from=2026-11&to=2026-11&region=eu-west-1"); st != 200 || cex.n.Load() != 1 {
		t.Fatalf("cached = %d, calls %d", st, cex.n.Load())
	}
	// 19 more distinct windows spend the day's budget; the 21st is refused.
	n := 1
	for _, reg := range []string{"us-east-1", "us-west-2", "eu-central-1", "ap-south-1"} {
		for _, mo := range []string{"2026-08", "2026-09", "2026-10", "2026-11", "2026-12"} {
			if n == DailyCostBudget {
				break
			}
			if st, m := get(fmt.Sprintf("from=%s&to=%s&region=%s", mo, mo, reg)); st != 200 {
				t.Fatalf("query %d = %d %v", n+1, st, m)
			}
			n++
		}
	}
	if st, m := get("from=2026-01&to=2026-01&region=sa-east-1"); st != 429 || m["code"] != "budget_exhausted" {
		t.Fatalf("query 21 = %d %v", st, m)
	}
	if cex.n.Load() != DailyCostBudget {
		t.Fatalf("Cost Explorer called %d times, want %d", cex.n.Load(), DailyCostBudget)
	}
	// The next UTC day has a new budget.
	r.h.Now = func() time.Time { return tNow.Add(24 * time.Hour) }
	if st, _ := get("from=2026-01&to=2026-01&region=sa-east-1"); st != 200 {
		t.Fatalf("next day = %d", st)
	}
	// An unreadable budget (table missing) refuses too.
	r.h.Cost.State.Table = "missing"
	if st, m := get("from=2026-02&to=2026-02&region=sa-east-1"); st != 429 || m["code"] != "budget_exhausted" {
		t.Fatalf("unreadable budget = %d %v", st, m)
	}
	// Off: refused before anything.
	r.h.Config.EnableCostExplorer = false
	if st, m := get("from=2026-03&to=2026-03&region=sa-east-1"); st != 403 || m["code"] != "cost_disabled" {
		t.Fatalf("off = %d %v", st, m)
	}
}

type fakeSNS struct {
	msgs []string
	fail bool
}

func (f *fakeSNS) Publish(ctx context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	if f.fail {
		return nil, errors.New("sns down")
	}
	f.msgs = append(f.msgs, aws.ToString(in.Subject)+"\n"+aws.ToString(in.Message))
	return &sns.PublishOutput{}, nil
}

type fakeMetrics struct {
	n   int
	ins []*cloudwatch.PutMetricDataInput
}

func (f *fakeMetrics) PutMetricData(ctx context.Context, in *cloudwatch.PutMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error) {
	f.n++
	f.ins = append(f.ins, in)
	return &cloudwatch.PutMetricDataOutput{}, nil
}

type manyVMs struct{ n int }

func (m *manyVMs) ListMicrovms(ctx context.Context, in microvms.ListInput) (*microvmsapi.ListMicrovmsOutput, error) {
	out := &microvmsapi.ListMicrovmsOutput{}
	for i := range m.n {
		out.Items = append(out.Items, microvmsapi.MicrovmSummary{MicrovmID: fmt.Sprintf("secret-sandbox-%d", i), State: microvmsapi.StateRunning, ImageArn: "arn:aws:microvms:eu-west-1:123456789012:image/private-name"})
	}
	out.Items = append(out.Items, microvmsapi.MicrovmSummary{MicrovmID: "gone", State: microvmsapi.StateTerminated})
	return out, nil
}

func TestQuotaAlert(t *testing.T) {
	db := startDynalite(t)
	createTable(t, db, "rayito-dashboard-state")
	now := tNow
	vms := &manyVMs{n: 9}
	pub := &fakeSNS{fail: true}
	met := &fakeMetrics{}
	q := &QuotaAlert{Metrics: met, Lister: vms, State: db, Table: "rayito-dashboard-state", SNS: pub, TopicArn: "arn:aws:sns:eu-west-1:123456789012:t", Region: "eu-west-1", Limit: 10, Percent: 80, Now: func() time.Time { return now }}
	// SNS failing: not counted as sent.
	if s, err := q.Run(context.Background()); err == nil || s.Sent {
		t.Fatalf("SNS down: %+v %v", s, err)
	}
	pub.fail = false
	s, err := q.Run(context.Background())
	if err != nil || !s.Sent || s.InUse != 9 || s.Threshold != 8 || len(pub.msgs) != 1 {
		t.Fatalf("= %+v %v (%d messages)", s, err, len(pub.msgs))
	}
	for _, bad := range []string{"secret-sandbox", "private-name", "123456789012", "arn:"} {
		if strings.Contains(pub.msgs[0], bad) {
			t.Fatalf("message carries %q: %q", bad, pub.msgs[0])
		}
	}
	// The metrics: the namespace, counts only, no dimension (no id or name).
	in := met.ins[len(met.ins)-1]
	if aws.ToString(in.Namespace) != MetricsNamespace || len(in.MetricData) != 2 || aws.ToString(in.MetricData[0].MetricName) != "MicrovmsInUse" || *in.MetricData[0].Value != 9 || len(in.MetricData[0].Dimensions)+len(in.MetricData[1].Dimensions) != 0 {
		t.Fatalf("metrics %+v", in)
	}
	// Quiet for 6 h, then again; under the threshold it resets.
	now = now.Add(time.Hour)
	if s, _ := q.Run(context.Background()); s.Sent {
		t.Fatal("sent again within the quiet period")
	}
	vms.n = 2
	if s, err := q.Run(context.Background()); s.Sent || err != nil {
		t.Fatalf("under: %+v %v", s, err)
	}
	vms.n = 8
	now = now.Add(time.Minute)
	if s, _ := q.Run(context.Background()); !s.Sent || len(pub.msgs) != 2 {
		t.Fatalf("after a reset: %+v", s)
	}
	// State unreadable: no message.
	q.Table = "missing"
	now = now.Add(7 * time.Hour)
	if s, err := q.Run(context.Background()); err == nil || s.Sent || len(pub.msgs) != 2 {
		t.Fatalf("state unreadable: %+v %v", s, err)
	}
	var _ QuotaStateAPI = (*dynamodb.Client)(nil)
}
