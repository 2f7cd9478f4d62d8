// Command deliverer is the events-webhooks stack's deliverer Lambda: the
// events table's stream (new event items). See internal/deliverer.
// Configuration: RAYITO_EVENTS_TABLE, RAYITO_EVENTS_FAILURE_QUEUE_URL.
// Webhook secrets are read from Secrets Manager by their name under
// rayito/webhooks/. It logs one summary of counts per invocation and
// nothing else.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/rayito-dev/rayito/events/internal/awsx"
	"github.com/rayito-dev/rayito/events/internal/deliverer"
	"github.com/rayito-dev/rayito/events/internal/lambdaenv"
	"github.com/rayito-dev/rayito/events/internal/store"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "deliverer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	c, err := lambdaenv.Load(os.Getenv, lambdaenv.Deliverer)
	if err != nil {
		return err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("AWS configuration: %w", err)
	}
	d := &deliverer.Deliverer{
		Store:   &store.Dynamo{API: dynamodb.NewFromConfig(cfg), Table: c.Table},
		Secrets: awsx.WebhookSecrets{API: secretsmanager.NewFromConfig(cfg)},
		Queue:   awsx.FailureQueue{API: sqs.NewFromConfig(cfg), QueueURL: c.FailureQueue},
		Log:     lambdaenv.Logger(os.Stderr),
	}
	lambda.StartWithOptions(d.Handle, lambda.WithContext(ctx))
	return nil
}
