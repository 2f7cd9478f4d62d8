// Command reconciler is the events-webhooks stack's reconciler Lambda, run
// by an EventBridge Scheduler schedule. See internal/reconciler.
// Configuration: RAYITO_EVENTS_TABLE, optionally
// RAYITO_EVENTS_RECONCILE_GRACE_SECONDS (default 600). The Lambda
// MicroVMs endpoint is the region's (AWS_REGION). It logs one summary of
// counts per run and nothing else.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/rayito-dev/rayito/events/internal/lambdaenv"
	"github.com/rayito-dev/rayito/events/internal/reconciler"
	"github.com/rayito-dev/rayito/events/internal/store"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "reconciler:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	c, err := lambdaenv.Load(os.Getenv, lambdaenv.Reconciler)
	if err != nil {
		return err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("AWS configuration: %w", err)
	}
	cp, err := microvms.NewFromConfig(cfg)
	if err != nil {
		return err
	}
	r := &reconciler.Reconciler{
		Store:        &store.Dynamo{API: dynamodb.NewFromConfig(cfg), Table: c.Table},
		ControlPlane: cp,
		Grace:        c.Grace,
		Log:          lambdaenv.Logger(os.Stderr),
	}
	lambda.StartWithOptions(func(ctx context.Context) (reconciler.Summary, error) { return r.Run(ctx) }, lambda.WithContext(ctx))
	return nil
}
