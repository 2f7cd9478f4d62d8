package services

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/rayito-dev/rayito/proto/localplatform"
)

// hostRewrite sends every request to srv with the Host rayd uses.
type hostRewrite struct {
	host string
	srv  *httptest.Server
}

func (h hostRewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	u, _ := url.Parse(h.srv.URL)
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = u.Scheme, u.Host
	r.Host = h.host
	return http.DefaultTransport.RoundTrip(r)
}

func client(srv *httptest.Server, creds aws.CredentialsProvider) *s3.Client {
	return s3.New(s3.Options{
		Region: localplatform.Region, BaseEndpoint: aws.String("http://" + localplatform.S3Host), UsePathStyle: true,
		Credentials: creds, HTTPClient: &http.Client{Transport: hostRewrite{localplatform.S3Host, srv}},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
	})
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestSandboxServices: rayd's way in, the metadata service's credentials
// (through AWS's own client), reads and writes with them, a multipart
// upload and its abort; refused: another sandbox's credentials, deletes,
// bucket operations, and the store persists across a restart.
func TestSandboxServices(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Sandbox("microvm-a"))
	defer srv.Close()
	ic := imds.New(imds.Options{Endpoint: "http://" + localplatform.IMDSHost, HTTPClient: &http.Client{Transport: hostRewrite{localplatform.IMDSHost, srv}}})
	creds := aws.NewCredentialsCache(ec2rolecreds.New(func(o *ec2rolecreds.Options) { o.Client = ic }))
	got, err := creds.Retrieve(t.Context())
	if err != nil || got.AccessKeyID != s.Credentials("microvm-a").AccessKeyID || got.SessionToken == "" {
		t.Fatalf("credentials %v, %v", got.AccessKeyID, err)
	}
	if r, err := ic.GetRegion(t.Context(), &imds.GetRegionInput{}); err != nil || r.Region != localplatform.Region {
		t.Fatalf("region %v, %v", r, err)
	}
	c := client(srv, creds)
	b := localplatform.DefaultBucket
	put := func(c *s3.Client, key, body string) error {
		_, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &b, Key: aws.String(key), Body: strings.NewReader(body)})
		return err
	}
	if err := put(c, "p/x/manifest.json", "{}"); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: &b, Key: aws.String("p/x/manifest.json")})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(out.Body)
	if string(body) != "{}" {
		t.Errorf("read %q", body)
	}
	// A multipart upload, completed, and one aborted.
	part := bytes.Repeat([]byte("p"), 5<<20)
	mu, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: &b, Key: aws.String("p/x/home.tar.gz")})
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.UploadPart(t.Context(), &s3.UploadPartInput{Bucket: &b, Key: aws.String("p/x/home.tar.gz"), UploadId: mu.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(part)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AbortMultipartUpload(t.Context(), &s3.AbortMultipartUploadInput{Bucket: &b, Key: aws.String("p/x/home.tar.gz"), UploadId: mu.UploadId}); err != nil {
		t.Fatalf("abort: %v", err)
	}
	_ = up
	// Never a delete, nor bucket operations.
	if _, err := c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: &b, Key: aws.String("p/x/manifest.json")}); code(err) != "AccessDenied" {
		t.Errorf("delete: %v", err)
	}
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("new-bucket")}); code(err) != "AccessDenied" {
		t.Errorf("create bucket: %v", err)
	}
	if _, err := c.ListBuckets(t.Context(), &s3.ListBucketsInput{}); code(err) != "AccessDenied" {
		t.Errorf("list buckets: %v", err)
	}
	// Another sandbox's credentials, or made-up ones, do not sign here.
	other := s.Credentials("microvm-b")
	if err := put(client(srv, credentials.NewStaticCredentialsProvider(other.AccessKeyID, other.SecretAccessKey, other.SessionToken)), "p/y", "z"); code(err) != "SignatureDoesNotMatch" {
		t.Errorf("other sandbox's credentials: %v", err)
	}
	mine := s.Credentials("microvm-a")
	if err := put(client(srv, credentials.NewStaticCredentialsProvider(mine.AccessKeyID, "wrong-secret", mine.SessionToken)), "p/y", "z"); code(err) != "SignatureDoesNotMatch" {
		t.Errorf("wrong secret: %v", err)
	}
	if err := put(client(srv, aws.AnonymousCredentials{}), "p/y", "z"); code(err) != "SignatureDoesNotMatch" {
		t.Errorf("anonymous: %v", err)
	}
	// The store and the credentials survive a restart of the platform.
	s2, err := New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Credentials("microvm-a") != s.Credentials("microvm-a") {
		t.Error("credentials changed across a restart")
	}
	srv2 := httptest.NewServer(s2.Sandbox("microvm-a"))
	defer srv2.Close()
	out, err = client(srv2, creds).GetObject(context.Background(), &s3.GetObjectInput{Bucket: &b, Key: aws.String("p/x/manifest.json")})
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	out.Body.Close()
}
