package secrets

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go/logging"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/internal/hook"
)

// AWSPrefix is the prefix of the Secrets Manager names of the
// secrets AWSStore keeps: the secret "db/password" is
// "rayito/db/password" there.
const AWSPrefix = "rayito/"

// AWSStore is a Store over AWS Secrets Manager. Every secret
// lives under AWSPrefix; a version is the ClientRequestToken (a
// UUIDv4) the store makes for each CreateSecret and UpdateSecret, so that
// the AWS SDK's retries are idempotent. Values that are UTF-8 travel as
// SecretString, others as SecretBinary. DeleteSecret deletes at once,
// without a recovery window. Errors carry the exception's name and the
// operation, never AWS's message or a value. It is safe for concurrent
// use.
type AWSStore struct {
	client *secretsmanager.Client
}

// NewAWSStore makes the store from an AWS configuration (region,
// credentials; BaseEndpoint to reach another endpoint). The AWS SDK's own
// log lines are discarded.
func NewAWSStore(cfg aws.Config) *AWSStore {
	cfg = cfg.Copy()
	cfg.Logger = logging.Nop{}
	cfg.ClientLogMode = 0
	return &AWSStore{client: secretsmanager.NewFromConfig(cfg)}
}

// newRequestToken makes a UUIDv4.
func newRequestToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", rayito.NewError(rayito.ReasonInternal, "rayito: no randomness for a secret version", err)
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
func (s *AWSStore) CreateSecret(ctx context.Context, name string, value []byte) (Info, error) {
	if err := checkPut(ctx, name, value); err != nil {
		return Info{}, err
	}
	token, err := newRequestToken()
	if err != nil {
		return Info{}, err
	}
	str, bin := awsValue(value)
	out, err := s.client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(AWSPrefix + name), SecretString: str, SecretBinary: bin, ClientRequestToken: aws.String(token),
	})
	if err != nil {
		return Info{}, awsSecretErr("CreateSecret", err)
	}
	return Info{Name: name, Version: versionOr(out.VersionId, token), CreatedAt: time.Now().UTC()}, nil
}

// UpdateSecret stores a new current version (Secrets Manager's
// PutSecretValue).
func (s *AWSStore) UpdateSecret(ctx context.Context, name string, value []byte) (Info, error) {
	if err := checkPut(ctx, name, value); err != nil {
		return Info{}, err
	}
	token, err := newRequestToken()
	if err != nil {
		return Info{}, err
	}
	str, bin := awsValue(value)
	out, err := s.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
		SecretId: aws.String(AWSPrefix + name), SecretString: str, SecretBinary: bin, ClientRequestToken: aws.String(token),
	})
	if err != nil {
		return Info{}, awsSecretErr("PutSecretValue", err)
	}
	return Info{Name: name, Version: versionOr(out.VersionId, token), CreatedAt: time.Now().UTC()}, nil
}

func versionOr(v *string, token string) string {
	if v != nil && *v != "" {
		return *v
	}
	return token
}

// GetSecret reads a version (Secrets Manager's GetSecretValue, with
// VersionId when ref.Version is set).
func (s *AWSStore) GetSecret(ctx context.Context, ref Ref) (Secret, error) {
	if err := validateSecretRef(ref); err != nil {
		return Secret{}, err
	}
	in := &secretsmanager.GetSecretValueInput{SecretId: aws.String(AWSPrefix + ref.Name)}
	if ref.Version != "" {
		in.VersionId = aws.String(ref.Version)
	}
	out, err := s.client.GetSecretValue(ctx, in)
	if err != nil {
		return Secret{}, awsSecretErr("GetSecretValue", err)
	}
	info := Info{Name: ref.Name, Version: aws.ToString(out.VersionId), CreatedAt: aws.ToTime(out.CreatedDate)}
	if out.SecretString != nil {
		return newSecret(info, []byte(*out.SecretString)), nil
	}
	return newSecret(info, out.SecretBinary), nil
}

// DeleteSecret deletes a secret at once (ForceDeleteWithoutRecovery).
func (s *AWSStore) DeleteSecret(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	_, err := s.client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{
		SecretId: aws.String(AWSPrefix + name), ForceDeleteWithoutRecovery: aws.Bool(true),
	})
	return awsSecretErr("DeleteSecret", err)
}

// ListSecrets lists the secrets under AWSPrefix (a name filter),
// sorted by name, the prefix removed.
func (s *AWSStore) ListSecrets(ctx context.Context) ([]Info, error) {
	out := []Info{}
	in := &secretsmanager.ListSecretsInput{
		Filters: []smtypes.Filter{{Key: smtypes.FilterNameStringTypeName, Values: []string{AWSPrefix}}},
	}
	for page := 0; ; page++ {
		if page >= 1000 {
			return nil, rayito.NewError(rayito.ReasonInternal, "rayito: secrets manager ListSecrets did not end")
		}
		resp, err := s.client.ListSecrets(ctx, in)
		if err != nil {
			return nil, awsSecretErr("ListSecrets", err)
		}
		for _, e := range resp.SecretList {
			name, ok := strings.CutPrefix(aws.ToString(e.Name), AWSPrefix)
			if !ok || ValidateName(name) != nil {
				continue
			}
			info := Info{Name: name, CreatedAt: aws.ToTime(e.CreatedDate)}
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
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// awsSecretErr turns an error of Secrets Manager into one whose message
// holds the operation and the exception's name only (awsErr); a missing
// or existing secret is rayito.ErrSecretNotFound / rayito.ErrSecretExists.
func awsSecretErr(op string, err error) error {
	if err == nil {
		return nil
	}
	switch hook.AWSErrorCode(err) {
	case "ResourceNotFoundException":
		return errSecretNotFound()
	case "ResourceExistsException":
		return errSecretExists()
	}
	return hook.AWSError("secrets manager", op, err)
}
