// Package awsx adapts the AWS services the Lambdas read and write to the
// interfaces of the forwarder and the deliverer: the stack key and the
// webhook secrets in Secrets Manager, the failure queue in SQS. Errors
// carry the AWS error code only, never the service's message (which may
// quote the request).
package awsx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/rayito-dev/rayito/events/internal/deliverer"
	"github.com/rayito-dev/rayito/proto/events"
)

// WebhookSecretPrefix is the only name prefix a webhook secret may have.
const WebhookSecretPrefix = events.WebhookSecretPrefix

// MinStackKeyLen is the shortest stack key accepted, in bytes.
const MinStackKeyLen = 32

// ErrSecret reports a secret that is missing, empty, too short or outside
// its prefix.
var ErrSecret = errors.New("awsx: unusable secret")

// SecretsAPI is the part of the Secrets Manager client used.
type SecretsAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SQSAPI is the part of the SQS client used.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

func awsErr(op string, err error) error {
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) {
		return fmt.Errorf("awsx: %s: %s", op, ae.ErrorCode())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("awsx: %s: %w", op, err)
	}
	return fmt.Errorf("awsx: %s failed", op)
}

// StackKey reads the stack key: the secret's SecretBinary, or else its
// SecretString's bytes (CloudFormation generates a 64-character string),
// at least MinStackKeyLen bytes. It implements forwarder.KeySource; wrap
// it in forwarder.CachedKey.
type StackKey struct {
	API      SecretsAPI
	SecretID string
}

// StackKey implements forwarder.KeySource.
func (s StackKey) StackKey(ctx context.Context) ([]byte, error) {
	out, err := s.API.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &s.SecretID})
	if err != nil {
		return nil, awsErr("GetSecretValue", err)
	}
	var k []byte
	switch {
	case len(out.SecretBinary) > 0:
		k = out.SecretBinary
	case out.SecretString != nil:
		k = []byte(*out.SecretString)
	}
	if len(k) < MinStackKeyLen {
		return nil, fmt.Errorf("%w: the stack key is shorter than %d bytes", ErrSecret, MinStackKeyLen)
	}
	return k, nil
}

// WebhookSecrets reads webhook signing secrets by name; only names under
// rayito/webhooks/ are read. It implements deliverer.SecretSource.
type WebhookSecrets struct {
	API SecretsAPI
}

// Secret implements deliverer.SecretSource.
func (w WebhookSecrets) Secret(ctx context.Context, ref string) (string, error) {
	if !strings.HasPrefix(ref, WebhookSecretPrefix) || len(ref) == len(WebhookSecretPrefix) {
		return "", fmt.Errorf("%w: not under %s", ErrSecret, WebhookSecretPrefix)
	}
	out, err := w.API.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &ref})
	if err != nil {
		return "", awsErr("GetSecretValue", err)
	}
	if out.SecretString == nil || *out.SecretString == "" {
		return "", fmt.Errorf("%w: empty", ErrSecret)
	}
	return *out.SecretString, nil
}

// FailureQueue sends failed deliveries to an SQS queue, one JSON message
// each (deliverer.Failure: ids, type, reason, status, attempts). It
// implements deliverer.FailureQueue.
type FailureQueue struct {
	API      SQSAPI
	QueueURL string
}

// SendFailure implements deliverer.FailureQueue.
func (q FailureQueue) SendFailure(ctx context.Context, f deliverer.Failure) error {
	body, err := json.Marshal(f)
	if err != nil {
		return err
	}
	s := string(body)
	if _, err := q.API.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q.QueueURL, MessageBody: &s}); err != nil {
		return awsErr("SendMessage", err)
	}
	return nil
}
