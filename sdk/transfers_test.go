package rayito

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// TestTransferTargetAWS: on AWS the SDK signs virtual-hosted URLs of the
// transfer bucket's regional host with the caller's credentials (SigV4
// query, the bucket's region, the host the only signed header), the key
// <prefix>/<sandbox id>/<dir>/<id>; without a bucket it refuses, and a
// URL may not outlive expiring credentials.
func TestTransferTargetAWS(t *testing.T) {
	awsCfg := aws.Config{Region: "eu-west-1", Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", SessionToken: "tok"}, nil
	})}
	cfg := newConfig([]Option{WithBackend(BackendAWS), WithAWSConfig(awsCfg), WithTransferBucket(TransferBucket{Bucket: "xfer-bkt", Region: "us-west-2", Prefix: "/t/x/"})})
	f := &Files{sbx: &Sandbox{id: "microvm-1", cfg: cfg}}
	tg, err := f.transferTarget(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tg.bucket != "xfer-bkt" || tg.region != "us-west-2" || tg.prefix != "t/x" || tg.userBase != "https://xfer-bkt.s3.us-west-2.amazonaws.com" || tg.raydBase != tg.userBase {
		t.Fatalf("target %+v", tg)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	raw, err := tg.presign(context.Background(), "PUT", tg.userBase, "t/x/microvm-1/up/u-1", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(raw)
	q := u.Query()
	if u.Scheme != "https" || u.Host != "xfer-bkt.s3.us-west-2.amazonaws.com" || u.Path != "/t/x/microvm-1/up/u-1" ||
		q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || q.Get("X-Amz-Credential") != "AKIDEXAMPLE/20260102/us-west-2/s3/aws4_request" ||
		q.Get("X-Amz-Date") != "20260102T030405Z" || q.Get("X-Amz-Expires") != "3600" || q.Get("X-Amz-SignedHeaders") != "host" ||
		q.Get("X-Amz-Security-Token") != "tok" || len(q.Get("X-Amz-Signature")) != 64 {
		t.Errorf("presigned %s", raw)
	}
	// Without a bucket: refused, naming the option.
	f.sbx.cfg = newConfig([]Option{WithBackend(BackendAWS), WithAWSConfig(awsCfg)})
	if _, err := f.transferTarget(context.Background()); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "WithTransferBucket") {
		t.Errorf("no bucket: %v", err)
	}
	// Expiring credentials bound the URL.
	tg.creds = aws.Credentials{AccessKeyID: "a", SecretAccessKey: "b", CanExpire: true, Expires: now.Add(30 * time.Minute)}
	if _, err := tg.plan(&urlConfig{expiry: time.Hour}, now); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a URL outliving its credentials: %v", err)
	}
	for _, d := range []time.Duration{-time.Second, 25 * time.Hour} {
		if _, err := tg.plan(&urlConfig{expiry: d}, now); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("expiry %v: %v", d, err)
		}
	}
}

// TestPrefersURL: the automatic path's rules.
func TestPrefersURL(t *testing.T) {
	b := WithTransferBucket(TransferBucket{Bucket: "b"})
	for _, tc := range []struct {
		name string
		opts []Option
		size int64
		want bool
	}{
		{"local, no threshold", []Option{WithBackend(BackendLocal)}, 1 << 40, false},
		{"local, explicit threshold, above", []Option{WithBackend(BackendLocal), WithTransferThreshold(100)}, 100, true},
		{"local, explicit threshold, below", []Option{WithBackend(BackendLocal), WithTransferThreshold(100)}, 99, false},
		{"aws, no bucket", []Option{WithBackend(BackendAWS)}, 1 << 40, false},
		{"aws, bucket, default 8 MiB", []Option{WithBackend(BackendAWS), b}, DefaultTransferThreshold, true},
		{"aws, bucket, below 8 MiB", []Option{WithBackend(BackendAWS), b}, DefaultTransferThreshold - 1, false},
		{"aws, bucket, turned off", []Option{WithBackend(BackendAWS), b, WithTransferThreshold(-1)}, 1 << 40, false},
	} {
		f := &Files{sbx: &Sandbox{id: "microvm-1", cfg: newConfig(tc.opts)}}
		if got := f.PrefersURL(tc.size); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTransferErrors: a failed transfer's code matches its sentinel.
func TestTransferErrors(t *testing.T) {
	for code, want := range map[string]error{
		"too_large": ErrTooLarge, "expired": ErrExpired, "checksum_mismatch": ErrChecksumMismatch, "disk_reserve": ErrDiskFull,
		"not_found": ErrNotFound, "permission_denied": ErrPermissionDenied, "cancelled": ErrTransferCancelled,
	} {
		err := error(&TransferError{Code: code, Message: "m"})
		if !errors.Is(err, want) || errors.Is(err, ErrTimeout) {
			t.Errorf("%s: errors.Is %v false", code, want)
		}
	}
}
