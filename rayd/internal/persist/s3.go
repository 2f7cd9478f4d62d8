package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
)

// S3Config says where rayd finds its credentials and S3.
//
// On AWS (the zero value) the credentials are the execution role's, from
// the instance metadata service at its usual address (which the sandbox's
// users cannot reach: rayd's network rules block it for uids 1000 and
// up), the region is the sandbox's own, and S3 is the region's endpoint.
// The local platform gives rayd the same two services on a Unix socket
// only rayd can reach (Dial): a metadata service with the platform's
// credentials, and its S3-compatible store (Endpoint, path-style).
type S3Config struct {
	// Endpoint is S3's base URL; "" is AWS's regional endpoint.
	Endpoint string
	// IMDSEndpoint is the metadata service's base URL; "" is AWS's.
	IMDSEndpoint string
	// Dial, when set, carries every connection (the platform's socket).
	Dial func(ctx context.Context) (net.Conn, error)
	// Region is the sandbox's region; "" asks the metadata service.
	Region string
}

// S3Stores is the Stores of S3, one client per region, sharing one
// credentials cache. It never logs.
type S3Stores struct {
	cfg     S3Config
	http    *http.Client
	imds    *imds.Client
	creds   aws.CredentialsProvider
	mu      sync.Mutex
	region  string
	clients map[string]*s3.Client
}

// imdsTimeout bounds one metadata request: on a machine without the
// service, a restore must fail fast (no credentials), not hang.
const imdsTimeout = 2 * time.Second

// NewS3Stores returns the Stores of cfg. Nothing is asked before the
// first Store call.
func NewS3Stores(cfg S3Config) *S3Stores {
	tr := &http.Transport{
		Proxy:                 nil, // rayd's own traffic never goes through a proxy of the environment
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if cfg.Dial != nil {
		tr.ForceAttemptHTTP2 = false
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return cfg.Dial(ctx) }
	} else {
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		tr.DialContext = d.DialContext
	}
	hc := &http.Client{Transport: tr}
	ic := imds.New(imds.Options{
		Endpoint:   cfg.IMDSEndpoint,
		HTTPClient: &http.Client{Transport: tr, Timeout: imdsTimeout},
		Logger:     logging.Nop{},
		Retryer:    aws.NopRetryer{},
	})
	provider := ec2rolecreds.New(func(o *ec2rolecreds.Options) { o.Client = ic })
	return &S3Stores{
		cfg:     cfg,
		http:    hc,
		imds:    ic,
		creds:   aws.NewCredentialsCache(credsOrNone{provider}),
		region:  cfg.Region,
		clients: map[string]*s3.Client{},
	}
}

// credsOrNone turns a failed retrieval into ErrNoCredentials.
type credsOrNone struct{ p aws.CredentialsProvider }

func (c credsOrNone) Retrieve(ctx context.Context) (aws.Credentials, error) {
	cr, err := c.p.Retrieve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return cr, ctx.Err()
		}
		return cr, ErrNoCredentials
	}
	return cr, nil
}

// Store returns the region's client (region "" is the sandbox's, asked
// once from the metadata service).
func (s *S3Stores) Store(ctx context.Context, region string) (Store, error) {
	if region == "" {
		r, err := s.ownRegion(ctx)
		if err != nil {
			return nil, err
		}
		region = r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[region]
	if !ok {
		opts := s3.Options{
			Region:      region,
			Credentials: s.creds,
			HTTPClient:  s.http,
			Logger:      logging.Nop{},
			// The checksum of every part and object in a header, never
			// as an aws-chunked trailer: S3-compatible stores read
			// both, older ones only the first.
			RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
			ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		}
		if s.cfg.Endpoint != "" {
			opts.BaseEndpoint = aws.String(s.cfg.Endpoint)
			opts.UsePathStyle = true
		}
		c = s3.New(opts)
		s.clients[region] = c
	}
	return s3Store{c}, nil
}

func (s *S3Stores) ownRegion(ctx context.Context) (string, error) {
	s.mu.Lock()
	r := s.region
	s.mu.Unlock()
	if r != "" {
		return r, nil
	}
	out, err := s.imds.GetRegion(ctx, &imds.GetRegionInput{})
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", ErrNoCredentials
	}
	if !validRegion(out.Region) || out.Region == "" {
		return "", ErrStorageUnavailable
	}
	s.mu.Lock()
	s.region = out.Region
	s.mu.Unlock()
	return out.Region, nil
}

type s3Store struct{ c *s3.Client }

func (s s3Store) Get(ctx context.Context, bucket, key string) (io.ReadCloser, int64, error) {
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, 0, storeErr(err)
	}
	return out.Body, aws.ToInt64(out.ContentLength), nil
}

func (s s3Store) Put(ctx context.Context, bucket, key string, body []byte, contentType string) error {
	_, err := s.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &bucket, Key: &key, Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: &contentType,
	})
	return storeErr(err)
}

func (s s3Store) CreateMultipart(ctx context.Context, bucket, key, contentType string) (string, error) {
	out, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key, ContentType: &contentType})
	if err != nil {
		return "", storeErr(err)
	}
	if aws.ToString(out.UploadId) == "" {
		return "", ErrStorageUnavailable
	}
	return *out.UploadId, nil
}

func (s s3Store) UploadPart(ctx context.Context, bucket, key, uploadID string, n int32, body []byte) (Part, error) {
	out, err := s.c.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &bucket, Key: &key, UploadId: &uploadID, PartNumber: &n,
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return Part{}, storeErr(err)
	}
	return Part{Number: n, ETag: aws.ToString(out.ETag)}, nil
}

func (s s3Store) CompleteMultipart(ctx context.Context, bucket, key, uploadID string, parts []Part) error {
	cp := make([]types.CompletedPart, len(parts))
	for i, p := range parts {
		cp[i] = types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag)}
	}
	_, err := s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &bucket, Key: &key, UploadId: &uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: cp},
	})
	return storeErr(err)
}

func (s s3Store) AbortMultipart(ctx context.Context, bucket, key, uploadID string) error {
	_, err := s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: &uploadID})
	return storeErr(err)
}

// ErrWrongRegion: the bucket is in another region than the one asked.
var ErrWrongRegion = errors.New("persist: the bucket is in another region (give its region)")

// storeErr maps an S3 error onto the sentinels, dropping its message (it
// may carry the bucket, the key or a signature's canonical string).
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if errors.Is(err, context.Canceled) {
			return context.Canceled
		}
		return context.DeadlineExceeded
	case errors.Is(err, ErrNoCredentials):
		return ErrNoCredentials
	}
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return ErrObjectNotFound
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NoSuchBucket", "NotFound", "NoSuchUpload":
			return ErrObjectNotFound
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AllAccessDisabled", "AccountProblem":
			return ErrStorageDenied
		case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
			return ErrWrongRegion
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusNotFound:
			return ErrObjectNotFound
		case http.StatusForbidden, http.StatusUnauthorized:
			return ErrStorageDenied
		case http.StatusMovedPermanently:
			return ErrWrongRegion
		}
	}
	return fmt.Errorf("%w (%s)", ErrStorageUnavailable, errClass(err))
}

// errClass is a short class of a store error for rayd's log: the API
// error code, the HTTP status, or "transport"; never a message.
func errClass(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) && isToken(ae.ErrorCode()) {
		return ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return fmt.Sprintf("http %d", re.HTTPStatusCode())
	}
	return "transport"
}

func isToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) < 0
}
