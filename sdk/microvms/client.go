package microvms

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/internal/backoff"
)

// Client calls the MicroVMs API. It is safe for concurrent use; its rate
// limits are per Client, so share one Client per account and region.
type Client struct {
	endpoint    string // scheme://host[:port][/prefix], no trailing slash
	http        httpDoer
	creds       aws.CredentialsProvider // nil: unsigned
	region      string
	signer      *v4.Signer
	clock       func() time.Time
	maxAttempts int
	backoffBase time.Duration
	backoffMax  time.Duration
	userAgent   string
	buckets     map[Operation]*bucket // read-only after New; missing: unlimited
	monoNow     func() time.Time
	sleep       func(context.Context, time.Duration) error
}

// New returns a client for the API at endpoint, such as
// "https://lambda.us-east-1.amazonaws.com" or "http://127.0.0.1:7450"
// (localvm).
//
// The client either signs, given [WithCredentials] and [WithRegion], or
// does not, given [Unsigned]; New refuses to guess. A signing client
// refuses plain http except to a loopback address, since the signed headers
// carry the session token.
func New(endpoint string, opts ...Option) (*Client, error) {
	s := settings{
		clock:       time.Now,
		maxAttempts: DefaultMaxAttempts,
		rates:       DefaultRateLimits(),
		userAgent:   defaultUserAgent,
		backoffBase: DefaultBackoffBase,
		backoffMax:  DefaultBackoffMax,
		monoNow:     time.Now,
		sleep:       backoff.Sleep,
	}
	for _, o := range opts {
		o(&s)
	}

	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("microvms: endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("microvms: endpoint %q: want http(s)://host[:port]", endpoint)
	}

	switch {
	case s.unsigned:
	case s.creds == nil:
		return nil, errors.New("microvms: no credentials: pass WithCredentials and WithRegion for AWS, or Unsigned for localvm")
	case s.region == "":
		return nil, errors.New("microvms: WithCredentials needs WithRegion")
	case !validRegion(s.region):
		return nil, fmt.Errorf("microvms: invalid region %q", s.region)
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		return nil, fmt.Errorf("microvms: endpoint %q: refusing to send signed requests over plain http", endpoint)
	}

	c := &Client{
		endpoint:    strings.TrimSuffix(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"),
		http:        s.httpClient,
		region:      s.region,
		clock:       s.clock,
		maxAttempts: s.maxAttempts,
		backoffBase: max(s.backoffBase, 0),
		backoffMax:  max(s.backoffMax, 0),
		userAgent:   s.userAgent,
		buckets:     make(map[Operation]*bucket),
		monoNow:     s.monoNow,
		sleep:       s.sleep,
	}
	if c.http == nil {
		c.http = sharedHTTPClient()
	}
	if !s.unsigned {
		c.creds = s.creds
		if _, ok := s.creds.(*aws.CredentialsCache); !ok {
			c.creds = aws.NewCredentialsCache(s.creds)
		}
		c.signer = v4.NewSigner()
	}
	start := c.monoNow()
	for op, r := range s.rates {
		if r > 0 {
			c.buckets[op] = newBucket(r, start)
		}
	}
	return c, nil
}

// NewFromConfig returns a signing client for the region and credentials of
// cfg, typically from config.LoadDefaultConfig. It also takes cfg's HTTP
// client and, when set, RetryMaxAttempts and BaseEndpoint; opts apply
// after them.
//
// The endpoint is https://lambda.<region>.amazonaws.com. That host is
// assumed from the service's endpoint prefix ("lambda") and must still be
// verified against the service's published endpoints.
func NewFromConfig(cfg aws.Config, opts ...Option) (*Client, error) {
	if cfg.Region == "" {
		return nil, errors.New("microvms: aws.Config has no region")
	}
	if !validRegion(cfg.Region) {
		return nil, fmt.Errorf("microvms: invalid region %q", cfg.Region)
	}
	endpoint := "https://" + microvmsapi.SigningName + "." + cfg.Region + ".amazonaws.com"
	if cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != "" {
		endpoint = *cfg.BaseEndpoint
	}
	pre := []Option{WithRegion(cfg.Region)}
	if cfg.Credentials != nil {
		pre = append(pre, WithCredentials(cfg.Credentials))
	}
	if cfg.HTTPClient != nil {
		pre = append(pre, withDoer(cfg.HTTPClient))
	}
	if cfg.RetryMaxAttempts > 0 {
		pre = append(pre, WithMaxAttempts(cfg.RetryMaxAttempts))
	}
	return New(endpoint, append(pre, opts...)...)
}

// Endpoint returns the endpoint the client talks to.
func (c *Client) Endpoint() string { return c.endpoint }

// Signed reports whether the client signs its requests.
func (c *Client) Signed() bool { return c.creds != nil }

// sharedHTTPClient is the HTTP client of every Client made without
// WithHTTPClient in this process: one pool of connections to each
// endpoint, however many Clients (a program that made one per sandbox kept
// one idle connection per sandbox for 90 s).
var sharedHTTPClient = sync.OnceValue(func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Transport: t, Timeout: 60 * time.Second, CheckRedirect: noRedirects}
})

func validRegion(r string) bool {
	if r == "" || len(r) > 64 {
		return false
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
