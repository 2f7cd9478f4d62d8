package stackapi

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rayito-dev/rayito/dashboard/internal/theme"
)

// The logo: a Lambda's environment (4 KB in all) cannot hold an SVG of up
// to 64 KiB, so the stack names an S3 object (RAYITO_DASHBOARD_LOGO,
// s3://bucket/key; the function's role may read that object only), read
// once at start and checked with the local dashboard's validator. An
// invalid or unreadable one is discarded and no logo is served.

// LogoCSP is the logo's own policy (the local dashboard's).
const LogoCSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox"

var (
	bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	keyRE    = regexp.MustCompile(`^[A-Za-z0-9!_.*'()/-]+$`)
)

// ParseLogoLocation splits s3://bucket/key ("" : no logo).
func ParseLogoLocation(s string) (bucket, key string, err error) {
	if s == "" {
		return "", "", nil
	}
	rest, ok := strings.CutPrefix(s, "s3://")
	b, k, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || !bucketRE.MatchString(b) || len(k) > 1024 || !keyRE.MatchString(k) || strings.Contains(k, "..") {
		return "", "", fmt.Errorf("%w: %s (want s3://bucket/key)", ErrConfig, EnvLogo)
	}
	return b, k, nil
}

// ObjectGetter is the part of the S3 client LoadLogo uses.
type ObjectGetter interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// LoadLogo reads the logo object (at most theme.MaxLogoBytes) and
// validates it. Its errors name no bucket, key or content.
func LoadLogo(ctx context.Context, c ObjectGetter, bucket, key string) ([]byte, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("stackapi: the logo object could not be read")
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, theme.MaxLogoBytes+1))
	if err != nil {
		return nil, fmt.Errorf("stackapi: the logo object could not be read")
	}
	if err := theme.ValidateLogo(data); err != nil {
		return nil, err
	}
	return data, nil
}
