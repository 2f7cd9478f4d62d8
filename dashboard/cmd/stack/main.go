// Command stack is the dashboard stack's Lambda (infra/dashboard.yaml),
// built with -tags lambda.norpc for provided.al2023. With
// RAYITO_DASHBOARD_MODE=api (the default) it answers the Function URL (see
// internal/stackapi); with quota it is the scheduled quota alert. It logs
// nothing but a startup failure.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cip "github.com/aws/aws-sdk-go-v2/service/cognitoidentityprovider"
	ce "github.com/aws/aws-sdk-go-v2/service/costexplorer"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/rayito-dev/rayito/dashboard/internal/jwt"
	"github.com/rayito-dev/rayito/dashboard/internal/stackapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard stack:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	env, err := stackapi.LoadEnv(os.Getenv)
	if err != nil {
		return err
	}
	if env.ThemeDiscarded {
		fmt.Fprintln(os.Stderr, "dashboard stack: RAYITO_DASHBOARD_THEME is not a valid theme: the factory theme is served")
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("AWS configuration: %w", err)
	}
	cp, err := microvms.NewFromConfig(cfg)
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(cfg)
	if env.Mode == "quota" {
		q := &stackapi.QuotaAlert{
			Lister: cp, State: db, Table: env.StateTable, SNS: sns.NewFromConfig(cfg), TopicArn: env.TopicArn,
			Region: cfg.Region, Limit: env.QuotaLimit, Percent: env.QuotaPercent, Metrics: cloudwatch.NewFromConfig(cfg),
		}
		lambda.StartWithOptions(func(ctx context.Context) (stackapi.QuotaSummary, error) { return q.Run(ctx) }, lambda.WithContext(ctx))
		return nil
	}
	if env.LogoBucket != "" {
		logo, err := stackapi.LoadLogo(ctx, s3.NewFromConfig(cfg), env.LogoBucket, env.LogoKey)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dashboard stack: the logo is not readable or not a valid logo: no logo is served")
		}
		env.Config.Logo = logo
	}
	v, err := jwt.New(jwt.Config{Region: cfg.Region, PoolID: env.Config.PoolID, ClientID: env.Config.ClientID})
	if err != nil {
		return err
	}
	h := &stackapi.Handler{
		Config:    env.Config,
		Verifier:  v,
		Lister:    cp,
		Directory: cip.NewFromConfig(cfg),
		Audit:     &stackapi.Audit{API: db, Table: env.AuditTable},
	}
	if env.Config.AllowActions {
		stsc := sts.NewFromConfig(cfg)
		h.Assume = func(ctx context.Context, session string) (stackapi.Actor, error) {
			out, err := stsc.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(env.ActionsRole), RoleSessionName: aws.String(session), DurationSeconds: aws.Int32(900)})
			if err != nil {
				return nil, err
			}
			c := cfg.Copy()
			c.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(
				aws.ToString(out.Credentials.AccessKeyId), aws.ToString(out.Credentials.SecretAccessKey), aws.ToString(out.Credentials.SessionToken)))
			return microvms.NewFromConfig(c)
		}
	}
	if env.Config.EnableCostExplorer {
		h.Cost = &stackapi.Cost{State: stackapi.CostStateTable{API: db, Table: env.StateTable}, CE: ce.NewFromConfig(cfg)}
	}
	lambda.StartWithOptions(h.Handle, lambda.WithContext(ctx))
	return nil
}
