package rayito

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
)

// AWSSecretPrefix is the prefix of the Secrets Manager names of the
// secrets AWSSecretStore keeps: the secret "db/password" is
// "rayito/db/password" there.
const AWSSecretPrefix = "rayito/"

// AWSSecretStore is a SecretStore over AWS Secrets Manager. Every secret
// lives under AWSSecretPrefix; a version is the ClientRequestToken (a
// UUIDv4) the store makes for each CreateSecret and UpdateSecret, so that
// the AWS SDK's retries are idempotent. Values that are UTF-8 travel as
// SecretString, others as SecretBinary. DeleteSecret deletes at once,
// without a recovery window. Errors carry the exception's name and the
// operation, never AWS's message or a value. It is safe for concurrent
// use.
type AWSSecretStore struct {
	client *secretsmanager.Client
}

// NewAWSSecretStore makes the store from an AWS configuration (region,
// credentials; BaseEndpoint to reach another endpoint). The AWS SDK's own
// log lines are discarded.
func NewAWSSecretStore(cfg aws.Config) *AWSSecretStore {
	cfg = cfg.Copy()
	cfg.Logger = logging.Nop{}
	cfg.ClientLogMode = 0
	return &AWSSecretStore{client: secretsmanager.NewFromConfig(cfg)}
}

// newRequestToken makes a UUIDv4.
func newRequestToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", newError(ReasonInternal, "rayito: no randomness for a secret version", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// awsValue puts value in SecretString (UTF-8) or SecretBinary.
func awsValue(value []byte) (*string, []byte) {
	if utf8.Valid(value) {
		return aws.String(string(value)), nil
	}
	return nil, slices.Clone(value)
}

// CreateSecret stores a new secret (Secrets Manager's CreateSecret).
func (s *AWSSecretStore) CreateSecret(ctx context.Context, name string, value []byte) (SecretInfo, error) {
	if err := checkPut(ctx, name, value); err != nil {
		return SecretInfo{}, err
	}
	token, err := newRequestToken()
	if err != nil {
		return SecretInfo{}, err
	}
	str, bin := awsValue(value)
	out, err := s.client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(AWSSecretPrefix + name), SecretString: str, SecretBinary: bin, ClientRequestToken: aws.String(token),
	})
	if err != nil {
		return SecretInfo{}, awsSecretErr("CreateSecret", err)
	}
	return SecretInfo{Name: name, Version: versionOr(out.VersionId, token), CreatedAt: time.Now().UTC()}, nil
}

// UpdateSecret stores a new current version (Secrets Manager's
// PutSecretValue).
func (s *AWSSecretStore) UpdateSecret(ctx context.Context, name string, value []byte) (SecretInfo, error) {
	if err := checkPut(ctx, name, value); err != nil {
		return SecretInfo{}, err
	}
	token, err := newRequestToken()
	if err != nil {
		return SecretInfo{}, err
	}
	str, bin := awsValue(value)
	out, err := s.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
		SecretId: aws.String(AWSSecretPrefix + name), SecretString: str, SecretBinary: bin, ClientRequestToken: aws.String(token),
	})
	if err != nil {
		return SecretInfo{}, awsSecretErr("PutSecretValue", err)
	}
	return SecretInfo{Name: name, Version: versionOr(out.VersionId, token), CreatedAt: time.Now().UTC()}, nil
}

func versionOr(v *string, token string) string {
	if v != nil && *v != "" {
		return *v
	}
	return token
}

// GetSecret reads a version (Secrets Manager's GetSecretValue, with
// VersionId when ref.Version is set).
func (s *AWSSecretStore) GetSecret(ctx context.Context, ref SecretRef) (Secret, error) {
	if err := validateSecretRef(ref); err != nil {
		return Secret{}, err
	}
	in := &secretsmanager.GetSecretValueInput{SecretId: aws.String(AWSSecretPrefix + ref.Name)}
	if ref.Version != "" {
		in.VersionId = aws.String(ref.Version)
	}
	out, err := s.client.GetSecretValue(ctx, in)
	if err != nil {
		return Secret{}, awsSecretErr("GetSecretValue", err)
	}
	info := SecretInfo{Name: ref.Name, Version: aws.ToString(out.VersionId), CreatedAt: aws.ToTime(out.CreatedDate)}
	if out.SecretString != nil {
		return newSecret(info, []byte(*out.SecretString)), nil
	}
	return newSecret(info, out.SecretBinary), nil
}

// DeleteSecret deletes a secret at once (ForceDeleteWithoutRecovery).
func (s *AWSSecretStore) DeleteSecret(ctx context.Context, name string) error {
	if err := ValidateSecretName(name); err != nil {
		return err
	}
	_, err := s.client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{
		SecretId: aws.String(AWSSecretPrefix + name), ForceDeleteWithoutRecovery: aws.Bool(true),
	})
	return awsSecretErr("DeleteSecret", err)
}

// ListSecrets lists the secrets under AWSSecretPrefix (a name filter),
// sorted by name, the prefix removed.
func (s *AWSSecretStore) ListSecrets(ctx context.Context) ([]SecretInfo, error) {
	out := []SecretInfo{}
	in := &secretsmanager.ListSecretsInput{
		Filters: []smtypes.Filter{{Key: smtypes.FilterNameStringTypeName, Values: []string{AWSSecretPrefix}}},
	}
	for page := 0; ; page++ {
		if page >= 1000 {
			return nil, newError(ReasonInternal, "rayito: secrets manager ListSecrets did not end")
		}
		resp, err := s.client.ListSecrets(ctx, in)
		if err != nil {
			return nil, awsSecretErr("ListSecrets", err)
		}
		for _, e := range resp.SecretList {
			name, ok := strings.CutPrefix(aws.ToString(e.Name), AWSSecretPrefix)
			if !ok || ValidateSecretName(name) != nil {
				continue
			}
			info := SecretInfo{Name: name, CreatedAt: aws.ToTime(e.CreatedDate)}
			for id, stages := range e.SecretVersionsToStages {
				if slices.Contains(stages, "AWSCURRENT") {
					info.Version = id
				}
			}
			out = append(out, info)
		}
		if aws.ToString(resp.NextToken) == "" {
			break
		}
		in.NextToken = resp.NextToken
	}
	slices.SortFunc(out, func(a, b SecretInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// awsSecretErr turns an error of Secrets Manager into one whose message
// holds the operation and the exception's name only (awsErr); a missing
// or existing secret is ErrSecretNotFound / ErrSecretExists.
func awsSecretErr(op string, err error) error {
	if err == nil {
		return nil
	}
	switch awsErrorCode(err) {
	case "ResourceNotFoundException":
		return errSecretNotFound()
	case "ResourceExistsException":
		return errSecretExists()
	}
	return awsErr("secrets manager", op, err)
}

// awsErrorCode is the exception name of an AWS API error ("" for any
// other error), letters and digits only.
func awsErrorCode(err error) string {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return ""
	}
	return sanitizeExceptionName(ae.ErrorCode())
}

// awsErr is the one mapping of an AWS service's error (Secrets Manager,
// DynamoDB) to the SDK's: the message holds the service, the operation
// and the exception's name only. The raw error is not kept: its message
// is AWS's, which may quote the request. A context's end stays reachable
// with errors.Is.
func awsErr(service, op string, err error) error {
	code := awsErrorCode(err)
	if code == "" {
		switch {
		case errors.Is(err, context.Canceled):
			return newError(ReasonCanceled, "rayito: "+service+" "+op+": canceled", context.Canceled)
		case errors.Is(err, context.DeadlineExceeded):
			return newError(ReasonTimeout, "rayito: "+service+" "+op+": timed out", context.DeadlineExceeded)
		}
		return newError(ReasonInternal, "rayito: "+service+" "+op+" failed (no answer, or no AWS credentials)")
	}
	reason := ReasonInternal
	switch code {
	case "ResourceNotFoundException":
		reason = ReasonNotFound
	case "InvalidParameterException", "InvalidRequestException", "MalformedPolicyDocumentException", "ValidationException":
		reason = ReasonInvalidArgument
	case "AccessDeniedException", "AccessDenied":
		reason = ReasonPermissionDenied
	case "UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException", "IncompleteSignature", "MissingAuthenticationToken":
		reason = ReasonUnauthenticated
	case "ThrottlingException", "TooManyRequestsException", "ProvisionedThroughputExceededException", "RequestLimitExceeded":
		reason = ReasonRateLimited
	case "LimitExceededException":
		reason = ReasonResourceExhausted
	}
	return newError(reason, "rayito: "+service+" "+op+" failed: "+code)
}

// sanitizeExceptionName keeps an exception name's letters and digits (at
// most 64).
func sanitizeExceptionName(code string) string {
	var b strings.Builder
	for _, r := range code {
		if b.Len() >= 64 {
			break
		}
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "UnknownError"
	}
	return b.String()
}
