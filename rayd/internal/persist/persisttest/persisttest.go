// Package persisttest runs, for tests, what rayd's persistence talks to:
// an in-process S3-compatible store (gofakes3) that refuses requests not
// signed with the credentials it hands out, and an instance metadata
// service (IMDSv2) that hands them out, as the execution role's are on
// AWS.
package persisttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/rayito-dev/rayito/rayd/internal/persist"
)

// Region is the region the metadata service reports.
const Region = "us-test-1"

// Server is an S3 store and a metadata service.
type Server struct {
	S3, IMDS  *httptest.Server
	AccessKey string
	SecretKey string
	// NoRole makes the metadata service answer as on a microVM without an
	// execution role (404 for the role's credentials).
	NoRole atomic.Bool
	// Requests counts the S3 requests served.
	Requests atomic.Int64
	// Hook, when set, sees every S3 request before it is served and may
	// answer it instead (return true).
	mu   sync.Mutex
	hook func(w http.ResponseWriter, r *http.Request) bool
}

// New starts both servers (closed with the test) and makes bucket
// buckets.
func New(t testing.TB, buckets ...string) *Server {
	t.Helper()
	s := &Server{AccessKey: "AKIA" + strings.ToUpper(rnd(8)), SecretKey: rnd(20)}
	backend := s3mem.New()
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	s.S3 = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		if !strings.Contains(r.Header.Get("Authorization"), "Credential="+s.AccessKey+"/") {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
			return
		}
		s.mu.Lock()
		hook := s.hook
		s.mu.Unlock()
		if hook != nil && hook(w, r) {
			return
		}
		faker.ServeHTTP(w, r)
	}))
	t.Cleanup(s.S3.Close)
	s.IMDS = httptest.NewServer(http.HandlerFunc(s.imds))
	t.Cleanup(s.IMDS.Close)
	return s
}

// SetHook installs (nil: removes) a hook on S3 requests.
func (s *Server) SetHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	s.hook = h
	s.mu.Unlock()
}

func rnd(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)[:n*2]
}

const token = "imds-test-token"

func (s *Server) imds(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
		w.Write([]byte(token))
		return
	}
	if r.Header.Get("X-Aws-Ec2-Metadata-Token") != token {
		http.Error(w, "", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/latest/meta-data/placement/region":
		w.Write([]byte(Region))
	case "/latest/dynamic/instance-identity/document":
		json.NewEncoder(w).Encode(map[string]string{"region": Region, "instanceId": "i-test", "accountId": "000000000000"})
	case "/latest/meta-data/iam/security-credentials/", "/latest/meta-data/iam/security-credentials":
		if s.NoRole.Load() {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("execution-role"))
	case "/latest/meta-data/iam/security-credentials/execution-role":
		if s.NoRole.Load() {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{
			"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": s.AccessKey, "SecretAccessKey": s.SecretKey,
			"Token": "session", "Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"LastUpdated": time.Now().UTC().Format(time.RFC3339),
		})
	default:
		http.NotFound(w, r)
	}
}

// Config is rayd's S3Config for the servers.
func (s *Server) Config() persist.S3Config {
	return persist.S3Config{Endpoint: s.S3.URL, IMDSEndpoint: s.IMDS.URL}
}

// Client is an S3 client of the store with its credentials, to look at
// and change what rayd wrote.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.S3.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// Object reads an object whole ("" and an error when it is missing).
func (s *Server) Object(ctx context.Context, bucket, key string) ([]byte, error) {
	out, err := s.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	var b strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := out.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return []byte(b.String()), nil
}

// Put writes an object.
func (s *Server) Put(ctx context.Context, bucket, key string, body []byte) error {
	_, err := s.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(string(body))})
	return err
}

// Keys lists a bucket's keys under prefix.
func (s *Server) Keys(ctx context.Context, bucket, prefix string) ([]string, error) {
	out, err := s.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys, nil
}

// Uploads counts a bucket's multipart uploads in progress.
func (s *Server) Uploads(ctx context.Context, bucket string) (int, error) {
	out, err := s.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		return 0, err
	}
	return len(out.Uploads), nil
}
