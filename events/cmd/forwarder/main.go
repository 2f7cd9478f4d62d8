// Command forwarder is the events-webhooks stack's forwarder Lambda: the
// CloudWatch Logs subscription of the image log group. See
// internal/forwarder. Configuration: RAYITO_EVENTS_TABLE,
// RAYITO_EVENTS_STACK_KEY_SECRET, optionally
// RAYITO_EVENTS_KEY_CACHE_SECONDS (default 300). It logs one summary of
// counts per invocation and nothing else.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/rayito-dev/rayito/events/internal/awsx"
	"github.com/rayito-dev/rayito/events/internal/forwarder"
	"github.com/rayito-dev/rayito/events/internal/lambdaenv"
	"github.com/rayito-dev/rayito/events/internal/store"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "forwarder:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	c, err := lambdaenv.Load(os.Getenv, lambdaenv.Forwarder)
	if err != nil {
		return err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("AWS configuration: %w", err)
	}
	f := &forwarder.Forwarder{
		Keys:  &forwarder.CachedKey{Source: awsx.StackKey{API: secretsmanager.NewFromConfig(cfg), SecretID: c.StackKey}, TTL: c.KeyCache},
		Store: &store.Dynamo{API: dynamodb.NewFromConfig(cfg), Table: c.Table},
		Log:   lambdaenv.Logger(os.Stderr),
	}
	lambda.StartWithOptions(f.Handle, lambda.WithContext(ctx))
	return nil
}
