package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/smithy-go/logging"
)

// signingService is CloudWatch's SigV4 service name: its OTLP endpoint is
// https://monitoring.<region>.amazonaws.com/v1/metrics.
const signingService = "monitoring"

// imdsTimeout bounds one metadata request.
const imdsTimeout = 2 * time.Second

// ErrNoCredentials: the execution role's credentials or the region could
// not be had.
var ErrNoCredentials = errors.New("telemetry: no execution role credentials")

// RoleOptions locate the metadata service the execution role's
// credentials come from (as persistence's do).
type RoleOptions struct {
	// IMDSEndpoint is the metadata service's base URL; "" is AWS's.
	IMDSEndpoint string
	// Dial, when set, carries the metadata service's connections (the
	// local platform's socket).
	Dial func(ctx context.Context) (net.Conn, error)
}

// RoleSigner signs exports with SigV4 for CloudWatch (service
// monitoring), with the execution role's credentials from the metadata
// service, cached until they expire. The region is the endpoint's
// (monitoring.<region>.amazonaws.com), else the metadata service's. It
// never logs.
type RoleSigner struct {
	creds  aws.CredentialsProvider
	region func(ctx context.Context) (string, error)
	signer *v4.Signer
	now    func() time.Time

	mu       sync.Mutex
	imdsRegn string
}

// NewRoleSigner returns the signer of o. Nothing is asked before the
// first Sign.
func NewRoleSigner(o RoleOptions) *RoleSigner {
	tr := &http.Transport{Proxy: nil, MaxIdleConns: 2, IdleConnTimeout: 90 * time.Second}
	if o.Dial != nil {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return o.Dial(ctx) }
	} else {
		d := &net.Dialer{Timeout: imdsTimeout}
		tr.DialContext = d.DialContext
	}
	ic := imds.New(imds.Options{
		Endpoint:   o.IMDSEndpoint,
		HTTPClient: &http.Client{Transport: tr, Timeout: imdsTimeout},
		Logger:     logging.Nop{},
		Retryer:    aws.NopRetryer{},
	})
	r := &RoleSigner{
		creds:  aws.NewCredentialsCache(ec2rolecreds.New(func(eo *ec2rolecreds.Options) { eo.Client = ic })),
		signer: v4.NewSigner(),
		now:    time.Now,
	}
	r.region = func(ctx context.Context) (string, error) {
		r.mu.Lock()
		reg := r.imdsRegn
		r.mu.Unlock()
		if reg != "" {
			return reg, nil
		}
		out, err := ic.GetRegion(ctx, &imds.GetRegionInput{})
		if err != nil || !validRegion(out.Region) {
			return "", ErrNoCredentials
		}
		r.mu.Lock()
		r.imdsRegn = out.Region
		r.mu.Unlock()
		return out.Region, nil
	}
	return r
}

// Sign signs req, whose body is body. Its errors are ErrNoCredentials or
// ctx's: never a credential or an AWS message.
func (r *RoleSigner) Sign(ctx context.Context, req *http.Request, body []byte) error {
	region := endpointRegion(req.URL.Hostname())
	if region == "" {
		var err error
		if region, err = r.region(ctx); err != nil {
			return err
		}
	}
	cr, err := r.creds.Retrieve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrNoCredentials
	}
	sum := sha256.Sum256(body)
	if err := r.signer.SignHTTP(ctx, cr, req, hex.EncodeToString(sum[:]), signingService, region, r.now()); err != nil {
		return ErrNoCredentials
	}
	return nil
}

// endpointRegion is the region of monitoring.<region>.amazonaws.com (and
// .amazonaws.com.cn); "" for any other host.
func endpointRegion(host string) string {
	rest, ok := strings.CutPrefix(strings.ToLower(host), signingService+".")
	if !ok {
		return ""
	}
	for _, suffix := range []string{".amazonaws.com", ".amazonaws.com.cn"} {
		if reg, ok := strings.CutSuffix(rest, suffix); ok && validRegion(reg) {
			return reg
		}
	}
	return ""
}

// validRegion: lower-case letters, digits and dashes, 1 to 32.
func validRegion(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
