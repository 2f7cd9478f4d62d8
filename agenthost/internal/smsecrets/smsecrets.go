// Package smsecrets reads the agent's secrets from AWS Secrets Manager
// with the host's credentials (on AgentCore, the runtime role's, from the
// microVM's metadata service): GetSecretValue only, errors mapped to the
// closed secret_env codes without their AWS message (which may name the
// secret).
package smsecrets

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/rayito-dev/rayito/agenthost/secretenv"
)

// API is the one call the source makes.
type API interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Source reads secrets with an API.
type Source struct {
	API API
}

// New is a Source on the configuration's Secrets Manager client.
func New(cfg aws.Config, opts ...func(*secretsmanager.Options)) *Source {
	return &Source{API: secretsmanager.NewFromConfig(cfg, opts...)}
}

// SecretString reads id's current SecretString. A binary secret is
// secret_env_value_invalid; a missing one secret_env_not_found; a denied
// one secret_env_access_denied; anything else secret_env_fetch_failed.
func (s *Source) SecretString(ctx context.Context, id string) (string, error) {
	out, err := s.API.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			switch ae.ErrorCode() {
			case "ResourceNotFoundException":
				return "", &secretenv.Error{Code: secretenv.CodeNotFound}
			case "AccessDeniedException", "AccessDenied", "UnrecognizedClientException":
				return "", &secretenv.Error{Code: secretenv.CodeDenied}
			}
		}
		return "", &secretenv.Error{Code: secretenv.CodeFetchFailed}
	}
	if out.SecretString == nil {
		return "", &secretenv.Error{Code: secretenv.CodeValueInvalid}
	}
	return *out.SecretString, nil
}
