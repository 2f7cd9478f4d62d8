package microvms

import (
	"context"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Operation names an API operation; it keys [WithRateLimits] and is the
// Operation of an [*APIError].
type Operation string

// The operations of the client.
const (
	OpRunMicrovm             Operation = "RunMicrovm"
	OpGetMicrovm             Operation = "GetMicrovm"
	OpListMicrovms           Operation = "ListMicrovms"
	OpTerminateMicrovm       Operation = "TerminateMicrovm"
	OpSuspendMicrovm         Operation = "SuspendMicrovm"
	OpResumeMicrovm          Operation = "ResumeMicrovm"
	OpCreateMicrovmAuthToken Operation = "CreateMicrovmAuthToken"
)

// DefaultRateLimits returns the per-operation rates, in calls per second,
// that a client enforces unless told otherwise. They are the service's
// published TPS quotas; each bucket's burst equals its rate.
func DefaultRateLimits() map[Operation]float64 {
	return map[Operation]float64{
		OpRunMicrovm:             5,
		OpResumeMicrovm:          5,
		OpSuspendMicrovm:         2,
		OpTerminateMicrovm:       10,
		OpGetMicrovm:             100,
		OpListMicrovms:           100,
		OpCreateMicrovmAuthToken: 50,

		OpCreateMicrovmShellAuthToken: publishedRates[OpCreateMicrovmShellAuthToken],
	}
}

// Defaults of the retry policy.
const (
	DefaultMaxAttempts  = 5
	DefaultBackoffBase  = 100 * time.Millisecond
	DefaultBackoffMax   = 5 * time.Second
	defaultUserAgent    = "rayito-go-sdk-microvms/1"
	maxRetryAfter       = 30 * time.Second
	maxResponseBodySize = 1 << 20
)

// httpDoer sends HTTP requests; *http.Client and aws.HTTPClient satisfy it.
type httpDoer interface {
	Do(*http.Request) (*http.Response, error)
}

// An Option configures a [Client].
type Option func(*settings)

type settings struct {
	httpClient  httpDoer
	creds       aws.CredentialsProvider
	region      string
	unsigned    bool
	clock       func() time.Time
	maxAttempts int
	rates       map[Operation]float64
	userAgent   string
	backoffBase time.Duration
	backoffMax  time.Duration

	// Test hooks: the clock of the token buckets and the sleep used for
	// rate limiting and backoff.
	monoNow func() time.Time
	sleep   func(context.Context, time.Duration) error
}

// WithHTTPClient sets the HTTP client. The default has a 5 s connect
// timeout and a 60 s per-attempt timeout.
//
// The client uses a copy of hc that does not follow redirects: the API
// never redirects, and a redirect to another host would carry the
// X-Amz-Security-Token header there.
func WithHTTPClient(hc *http.Client) Option {
	return func(s *settings) {
		if hc != nil {
			cp := *hc
			cp.CheckRedirect = noRedirects
			s.httpClient = &cp
		}
	}
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func withDoer(d httpDoer) Option {
	return func(s *settings) { s.httpClient = d }
}

// WithCredentials makes the client sign its requests with SigV4 using
// credentials from p; [WithRegion] is then required. A provider that is not
// already an *aws.CredentialsCache is wrapped in one.
func WithCredentials(p aws.CredentialsProvider) Option {
	return func(s *settings) {
		s.creds = p
		s.unsigned = false
	}
}

// WithRegion sets the SigV4 signing region, such as "us-east-1".
func WithRegion(region string) Option {
	return func(s *settings) { s.region = region }
}

// Unsigned makes the client send requests without signing them, as localvm
// expects. It cancels an earlier [WithCredentials].
func Unsigned() Option {
	return func(s *settings) {
		s.unsigned = true
		s.creds = nil
	}
}

// WithClock sets the clock that dates signatures (X-Amz-Date); it is meant
// for tests. Rate limiting and backoff always use the real clock.
func WithClock(now func() time.Time) Option {
	return func(s *settings) {
		if now != nil {
			s.clock = now
		}
	}
}

// WithMaxAttempts sets how many times a call is attempted in all, including
// the first (default 5). Values below 1 mean 1: no retries.
func WithMaxAttempts(n int) Option {
	return func(s *settings) { s.maxAttempts = max(n, 1) }
}

// WithRateLimits overrides the client-side rates of the given operations,
// in calls per second (burst = rate, at least 1). A rate of 0 or less
// disables limiting for that operation. Operations not in the map keep
// their [DefaultRateLimits].
func WithRateLimits(rates map[Operation]float64) Option {
	return func(s *settings) {
		for op, r := range rates {
			s.rates[op] = r
		}
	}
}

// WithoutRateLimits disables client-side rate limiting. The service's own
// throttling still applies (and is retried).
func WithoutRateLimits() Option {
	return func(s *settings) { clear(s.rates) }
}

// WithUserAgent puts product (for example "rayito-cli/0.3.0") in front of
// the client's own User-Agent token.
func WithUserAgent(product string) Option {
	return func(s *settings) {
		if product != "" {
			s.userAgent = product + " " + defaultUserAgent
		}
	}
}

// WithRetryBackoff sets the base and the cap of the exponential backoff
// between attempts (defaults 100 ms and 5 s); the wait before retry n is
// uniformly random in [0, min(max, base·2ⁿ⁻¹)). A Retry-After header from
// the service overrides it. Meant for tests.
func WithRetryBackoff(base, max time.Duration) Option {
	return func(s *settings) {
		s.backoffBase = base
		s.backoffMax = max
	}
}
