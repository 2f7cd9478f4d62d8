package local

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ce "github.com/aws/aws-sdk-go-v2/service/costexplorer"
	cetypes "github.com/aws/aws-sdk-go-v2/service/costexplorer/types"
	"github.com/aws/smithy-go"
)

// Billed cost (Cost Explorer bills USD 0.01 per request): only with
// --cost-explorer, on the caller's own account, with the CSRF token, and
// bounded here: one answer is reused for an hour, at most BilledBudget
// paid requests per UTC day per dashboard, at most billedPages pages per
// query.
const (
	// BilledBudget is the paid Cost Explorer requests a dashboard may
	// make per UTC day.
	BilledBudget = 20
	// billedTTL is how long one billed answer is reused.
	billedTTL = time.Hour
	// billedPages bounds one query's pages.
	billedPages = 3
	// BilledBasis says what the billed figure is.
	BilledBasis = "billed: AWS Cost Explorer, UnblendedCost of this account from the first of this month (UTC) to today, by service; Cost Explorer lags by up to a day; every query costs USD 0.01 (reused for an hour, at most 20 a day)"
)

// billedClient is Cost Explorer's GetCostAndUsage.
type billedClient interface {
	GetCostAndUsage(ctx context.Context, in *ce.GetCostAndUsageInput, optFns ...func(*ce.Options)) (*ce.GetCostAndUsageOutput, error)
}

// newBilledClient is the Cost Explorer client of cfg: its endpoint is in
// us-east-1 whatever the sandboxes' region.
func newBilledClient(cfg aws.Config) billedClient {
	return ce.NewFromConfig(cfg, func(o *ce.Options) { o.Region = "us-east-1" })
}

// ServiceCost is one service's billed cost.
type ServiceCost struct {
	Service string  `json:"service"`
	USD     float64 `json:"usd"`
}

// Billed is the billed-cost answer.
type Billed struct {
	Billed    bool          `json:"billed"`
	Start     string        `json:"start"`
	End       string        `json:"end"`
	Estimated bool          `json:"estimated"`
	TotalUSD  float64       `json:"total_usd"`
	Services  []ServiceCost `json:"services"`
	At        time.Time     `json:"at"`
	Basis     string        `json:"basis"`
}

// billedState is the cache and the day's budget.
type billedState struct {
	mu     sync.Mutex
	last   *Billed
	day    string
	spent  int
	budget int
}

var errBudget = errors.New("budget exhausted")

// billed answers from the cache, or queries Cost Explorer within the
// day's budget.
func (s *Server) billed(ctx context.Context) (*Billed, error) {
	b := &s.bill
	b.mu.Lock()
	defer b.mu.Unlock()
	now := s.now().UTC()
	if b.last != nil && now.Sub(b.last.At) < billedTTL {
		return b.last, nil
	}
	if day := now.Format(time.DateOnly); day != b.day {
		b.day, b.spent = day, 0
	}
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1)
	in := &ce.GetCostAndUsageInput{
		TimePeriod:  &cetypes.DateInterval{Start: aws.String(start.Format(time.DateOnly)), End: aws.String(end.Format(time.DateOnly))},
		Granularity: cetypes.GranularityMonthly,
		Metrics:     []string{"UnblendedCost"},
		GroupBy:     []cetypes.GroupDefinition{{Type: cetypes.GroupDefinitionTypeDimension, Key: aws.String("SERVICE")}},
	}
	out := &Billed{Billed: true, Start: *in.TimePeriod.Start, End: *in.TimePeriod.End, At: now, Basis: BilledBasis, Services: []ServiceCost{}}
	byService := map[string]float64{}
	for page := 0; page < billedPages; page++ {
		if b.spent >= b.budget {
			return nil, errBudget
		}
		b.spent++
		resp, err := s.ce.GetCostAndUsage(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, r := range resp.ResultsByTime {
			out.Estimated = out.Estimated || r.Estimated
			for _, g := range r.Groups {
				m, ok := g.Metrics["UnblendedCost"]
				if !ok || m.Amount == nil || len(g.Keys) != 1 {
					continue
				}
				v, err := strconv.ParseFloat(*m.Amount, 64)
				if err != nil {
					continue
				}
				byService[g.Keys[0]] += v
			}
		}
		if resp.NextPageToken == nil || *resp.NextPageToken == "" {
			break
		}
		in.NextPageToken = resp.NextPageToken
	}
	for svc, v := range byService {
		out.Services = append(out.Services, ServiceCost{Service: svc, USD: v})
		out.TotalUSD += v
	}
	slices.SortFunc(out.Services, func(a, b ServiceCost) int {
		switch {
		case a.USD > b.USD:
			return -1
		case a.USD < b.USD:
			return 1
		}
		return 0
	})
	b.last = out
	return out, nil
}

// billedError maps a Cost Explorer failure to a code: never its message.
func billedError(w http.ResponseWriter, err error) {
	var ae smithy.APIError
	switch {
	case errors.Is(err, errBudget):
		apiError(w, http.StatusTooManyRequests, "cost_budget")
	case errors.As(err, &ae):
		switch ae.ErrorCode() {
		case "AccessDeniedException", "UnauthorizedOperation", "AccessDenied":
			apiError(w, http.StatusForbidden, "permission_denied")
		case "DataUnavailableException", "BillExpirationException":
			apiError(w, http.StatusServiceUnavailable, "cost_unavailable")
		case "LimitExceededException", "ThrottlingException", "RequestLimitExceeded":
			apiError(w, http.StatusTooManyRequests, "cost_throttled")
		case "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredTokenException", "InvalidSignatureException":
			apiError(w, http.StatusBadGateway, "unauthenticated_aws")
		default:
			apiError(w, http.StatusBadGateway, "upstream_error")
		}
	case errors.Is(err, context.DeadlineExceeded):
		apiError(w, http.StatusGatewayTimeout, "timeout")
	default:
		apiError(w, http.StatusBadGateway, "upstream_error")
	}
}
