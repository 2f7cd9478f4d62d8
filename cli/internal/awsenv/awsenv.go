// Package awsenv is the one place where the CLI loads the AWS
// configuration (the AWS SDK's usual chain: AWS_PROFILE, AWS_REGION,
// AWS_ACCESS_KEY_ID, SSO, instance roles, ...) and builds the clients its
// AWS commands use: the MicroVMs control plane and S3.
//
// Its errors never quote the AWS SDK's own: those can carry environment
// values, file paths and profile contents. S3 errors are reduced to the
// operation, the error code and the HTTP status (see [S3Error]); MicroVMs
// errors are already the sanitized *microvms.APIError.
package awsenv

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/rayito-dev/rayito/cli/internal/version"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// What Load returns instead of the AWS SDK's errors.
var (
	ErrNoCredentials = errors.New("no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or sign in with aws sso login)")
	ErrNoProfile     = errors.New("the AWS profile named by AWS_PROFILE is in neither ~/.aws/config nor ~/.aws/credentials")
	ErrConfig        = errors.New("the AWS configuration cannot be loaded (a config or credentials file, or an AWS_* variable, is invalid): check it with `aws configure list`")
	ErrNoRegion      = errors.New("no AWS region configured: set AWS_REGION, or a region in your AWS profile")
)

// Env is a loaded AWS configuration and the clients built from it.
type Env struct {
	Config aws.Config
	// Region is the configuration's region (never empty).
	Region string
	// Source names the credentials provider (EnvConfigCredentials,
	// SSOProvider, ...); never a credential.
	Source   string
	MicroVMs *microvms.Client
	S3       *s3.Client
}

// LoadConfig loads the AWS configuration from the process environment and
// the shared files, with the AWS SDK's logger discarded. Its errors are
// ErrNoProfile and ErrConfig only.
func LoadConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithLogger(logging.Nop{}))
	if err != nil {
		var np awsconfig.SharedConfigProfileNotExistError
		if errors.As(err, &np) {
			return aws.Config{}, ErrNoProfile
		}
		return aws.Config{}, ErrConfig
	}
	return cfg, nil
}

// Load loads the configuration, requires a region and credentials (it
// retrieves them once, bounded by ctx) and builds both clients. Its errors
// are the sentinels above, or ctx's.
func Load(ctx context.Context) (*Env, error) {
	cfg, err := LoadConfig(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		return nil, ErrNoRegion
	}
	if cfg.Credentials == nil {
		return nil, ErrNoCredentials
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil || !creds.HasKeys() {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ErrNoCredentials
	}
	mv, err := NewMicroVMs(cfg)
	if err != nil {
		return nil, err
	}
	return &Env{Config: cfg, Region: cfg.Region, Source: creds.Source, MicroVMs: mv, S3: NewS3(cfg)}, nil
}

// endpointsIgnored reports AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true, with
// which the AWS SDKs ignore every configured endpoint.
func endpointsIgnored() bool {
	v, _ := strconv.ParseBool(os.Getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"))
	return v
}

// NewMicroVMs returns the MicroVMs client of cfg. Its endpoint is, in
// order: AWS_ENDPOINT_URL_LAMBDA (the AWS SDKs' per-service variable of
// the service whose signing name MicroVMs uses), cfg.BaseEndpoint
// (AWS_ENDPOINT_URL, or endpoint_url in the profile), else the regional
// https://lambda.<region>.amazonaws.com.
func NewMicroVMs(cfg aws.Config) (*microvms.Client, error) {
	if v := os.Getenv("AWS_ENDPOINT_URL_LAMBDA"); v != "" && !endpointsIgnored() {
		cfg.BaseEndpoint = aws.String(v)
	}
	c, err := microvms.NewFromConfig(cfg, microvms.WithUserAgent("rayito-cli/"+version.Version))
	if err != nil {
		// NewFromConfig's errors quote the endpoint, which is
		// configuration rather than a secret, but keep to fixed words.
		return nil, errors.New("cannot build the MicroVMs client: check AWS_REGION and AWS_ENDPOINT_URL (an http endpoint must be on loopback)")
	}
	return c, nil
}

// NewS3 returns the S3 client of cfg. The S3 client itself resolves its
// endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile); when one
// of those variables sets a custom endpoint, the client uses path-style
// addressing (http://host/bucket/key): S3 stand-ins such as MinIO,
// LocalStack or gofakes3 do not serve virtual-hosted bucket names
// (bucket.host), and a custom endpoint is almost always one of them.
func NewS3(cfg aws.Config) *s3.Client {
	custom := !endpointsIgnored() && (os.Getenv("AWS_ENDPOINT_URL_S3") != "" || cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != "")
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if custom {
			o.UsePathStyle = true
		}
	})
}

// S3Error is a failed S3 call, reduced to what is safe to print: the
// operation, the S3 error code (when it is a plain identifier) and the
// HTTP status. The service's message is never kept.
type S3Error struct {
	Operation string
	Code      string
	Status    int
	// Network is set when no response came back ("connection refused").
	Network string
}

func (e *S3Error) Error() string {
	var b strings.Builder
	b.WriteString("S3 " + e.Operation + ": ")
	switch {
	case e.Network != "":
		b.WriteString("cannot reach S3 (" + e.Network + ")")
	case e.Code != "" && e.Status != 0:
		b.WriteString(e.Code + " (HTTP " + strconv.Itoa(e.Status) + ")")
	case e.Code != "":
		b.WriteString(e.Code)
	case e.Status != 0:
		b.WriteString("HTTP " + strconv.Itoa(e.Status))
	default:
		b.WriteString("failed")
	}
	return b.String()
}

// NotFound reports a 404 (NotFound, NoSuchKey, NoSuchBucket).
func (e *S3Error) NotFound() bool {
	return e.Status == 404 || e.Code == "NotFound" || e.Code == "NoSuchKey" || e.Code == "NoSuchBucket"
}

// Forbidden reports a 403.
func (e *S3Error) Forbidden() bool { return e.Status == 403 || e.Code == "AccessDenied" }

// PreconditionFailed reports a 412 (a conditional write lost).
func (e *S3Error) PreconditionFailed() bool {
	return e.Status == 412 || e.Code == "PreconditionFailed"
}

// SanitizeS3 turns an S3 client error into an *S3Error; nil stays nil and
// ctx's own errors (cancelled, deadline) pass through.
func SanitizeS3(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	f := Inspect(err)
	return &S3Error{Operation: op, Status: f.Status, Code: f.Code, Network: f.Network}
}

// Failure is what the CLI says of a failed AWS call, never AWS's message
// (which can quote a request, an ARN or a signature): the HTTP status,
// AWS's error code when it is a plain identifier, and, with neither, the
// network failure.
type Failure struct {
	Status  int
	Code    string
	Network string
}

// Inspect reads err's Failure: the one mapping of the CLI's AWS errors
// (S3's here, CloudFormation's in cfnstack).
func Inspect(err error) Failure {
	var f Failure
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		f.Status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && Identifier(ae.ErrorCode()) {
		f.Code = ae.ErrorCode()
	}
	if f.Status == 0 && f.Code == "" {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			f.Network = oe.Op + ": " + oe.Err.Error()
		} else {
			f.Network = "no response"
		}
	}
	return f
}

// Identifier reports whether s is a plain error code: 1 to 64 of
// A-Z a-z 0-9 . _ -.
func Identifier(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
