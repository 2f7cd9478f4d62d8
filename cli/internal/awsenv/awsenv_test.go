package awsenv

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// cleanEnv leaves the AWS SDK nothing from this machine but kv.
func cleanEnv(t *testing.T, kv ...string) {
	t.Helper()
	home := t.TempDir()
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_LAMBDA", "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("HOME", home)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	cleanEnv(t, "AWS_ACCESS_KEY_ID", "AKIDX", "AWS_SECRET_ACCESS_KEY", "s")
	if _, err := Load(ctx); err != ErrNoRegion {
		t.Errorf("no region: %v", err)
	}
	cleanEnv(t, "AWS_REGION", "eu-west-1")
	if _, err := Load(ctx); err != ErrNoCredentials {
		t.Errorf("no credentials: %v", err)
	}
	cleanEnv(t, "AWS_PROFILE", "awsenv-test-no-such-profile")
	if _, err := Load(ctx); err != ErrNoProfile {
		t.Errorf("no profile: %v", err)
	}
	cleanEnv(t, "AWS_REGION", "eu-west-1", "AWS_ACCESS_KEY_ID", "AKIDX", "AWS_SECRET_ACCESS_KEY", "s")
	env, err := Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if env.Region != "eu-west-1" || env.Source != "EnvConfigCredentials" || env.MicroVMs.Endpoint() != "https://lambda.eu-west-1.amazonaws.com" {
		t.Errorf("%+v %s", env, env.MicroVMs.Endpoint())
	}
	if env.S3.Options().UsePathStyle {
		t.Error("path-style without a custom endpoint")
	}
}

// The control plane's endpoint: AWS_ENDPOINT_URL_LAMBDA, then
// AWS_ENDPOINT_URL; S3 goes path-style with either custom endpoint.
func TestEndpoints(t *testing.T) {
	ctx := context.Background()
	base := []string{"AWS_REGION", "us-east-1", "AWS_ACCESS_KEY_ID", "AKIDX", "AWS_SECRET_ACCESS_KEY", "s"}
	cleanEnv(t, append(base, "AWS_ENDPOINT_URL", "http://127.0.0.1:1")...)
	env, err := Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if env.MicroVMs.Endpoint() != "http://127.0.0.1:1" || !env.S3.Options().UsePathStyle {
		t.Errorf("%s %v", env.MicroVMs.Endpoint(), env.S3.Options().UsePathStyle)
	}
	cleanEnv(t, append(base, "AWS_ENDPOINT_URL", "http://127.0.0.1:1", "AWS_ENDPOINT_URL_LAMBDA", "http://127.0.0.1:2")...)
	if env, _ = Load(ctx); env.MicroVMs.Endpoint() != "http://127.0.0.1:2" {
		t.Error(env.MicroVMs.Endpoint())
	}
	cleanEnv(t, append(base, "AWS_ENDPOINT_URL_S3", "http://127.0.0.1:3")...)
	if env, _ = Load(ctx); !env.S3.Options().UsePathStyle || env.MicroVMs.Endpoint() != "https://lambda.us-east-1.amazonaws.com" {
		t.Errorf("%s %v", env.MicroVMs.Endpoint(), env.S3.Options().UsePathStyle)
	}
	cleanEnv(t, append(base, "AWS_ENDPOINT_URL_LAMBDA", "http://127.0.0.1:2", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")...)
	if env, _ = Load(ctx); env.MicroVMs.Endpoint() != "https://lambda.us-east-1.amazonaws.com" {
		t.Error(env.MicroVMs.Endpoint())
	}
	// A signed client over plain http to another host is refused, in
	// fixed words.
	cleanEnv(t, append(base, "AWS_ENDPOINT_URL_LAMBDA", "http://example.com")...)
	if _, err := Load(ctx); err == nil || strings.Contains(err.Error(), "example.com") {
		t.Errorf("%v", err)
	}
}

// S3's errors keep the operation, the code and the status, never the
// service's message.
func TestSanitizeS3(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>User AKIDSECRET is not allowed: secret-detail</Message><RequestId>r1</RequestId></Error>`))
	}))
	defer srv.Close()
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDX", SecretAccessKey: "s"}, nil
		})})
	_, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: strings.NewReader("x")})
	got := SanitizeS3("PutObject", err)
	var se *S3Error
	if !errors.As(got, &se) || se.Code != "AccessDenied" || se.Status != 403 || !se.Forbidden() {
		t.Fatalf("%#v", got)
	}
	if got.Error() != "S3 PutObject: AccessDenied (HTTP 403)" {
		t.Errorf("%q", got.Error())
	}

	// No response at all: the network failure, without the address.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c = s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + addr), UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: aws.AnonymousCredentials{}})
	_, err = c.HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String("b")})
	got = SanitizeS3("HeadBucket", err)
	if !errors.As(got, &se) || se.Network == "" || strings.Contains(got.Error(), addr) {
		t.Errorf("%v", got)
	}
	if SanitizeS3("x", nil) != nil || SanitizeS3("x", context.Canceled) != context.Canceled {
		t.Error("nil or ctx errors changed")
	}
}
