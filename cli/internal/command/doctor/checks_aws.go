package doctor

import (
	"context"
	"errors"
	"strings"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
)

// AWSResult is what the AWS configuration resolved to: never a credential.
type AWSResult struct {
	Region string
	// Source names the credentials provider (EnvConfigCredentials,
	// SSOProvider, ...).
	Source string
}

// What awsProbe returns instead of the AWS SDK's errors, which can quote
// environment values, file paths and profile contents.
var (
	errNoCredentials = errors.New("no AWS credentials found")
	errNoProfile     = errors.New("the AWS profile does not exist")
	errAWSConfig     = errors.New("the AWS configuration cannot be loaded")
)

const credentialsFix = "set AWS_PROFILE (a profile in ~/.aws/config), AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run `aws sso login` / `aws configure`; on EC2, attach an instance role"

// awsProbe loads the AWS configuration as the SDK does and retrieves
// credentials; its errors are only the sentinels above.
func awsProbe(ctx context.Context) (AWSResult, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithLogger(logging.Nop{}))
	if err != nil {
		var np awsconfig.SharedConfigProfileNotExistError
		if errors.As(err, &np) {
			return AWSResult{}, errNoProfile
		}
		return AWSResult{}, errAWSConfig
	}
	r := AWSResult{Region: cfg.Region}
	if cfg.Credentials == nil {
		return r, errNoCredentials
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil || !creds.HasKeys() {
		return r, errNoCredentials
	}
	r.Source = creds.Source
	return r, nil
}

func awsChecks() []func(context.Context, *Env) Check {
	var (
		res  AWSResult
		err  error
		done bool
	)
	resolve := func(ctx context.Context, e *Env) (AWSResult, error) {
		if !done {
			done = true
			timed(ctx, awsTimeout, func(ctx context.Context) Check {
				res, err = e.AWS(ctx)
				return Check{}
			})
		}
		return res, err
	}
	return []func(context.Context, *Env) Check{
		func(ctx context.Context, e *Env) Check {
			_, err := resolve(ctx, e)
			return classifyCredentials(res, err)
		},
		func(ctx context.Context, e *Env) Check {
			r, err := resolve(ctx, e)
			return classifyRegion(r, err)
		},
		checkTemplate,
		notChecked("aws launch gate", "whether this account may launch MicroVMs"),
		notChecked("aws quotas", "the account's MicroVM quotas"),
		notChecked("aws artifact bucket", "the artifact bucket"),
		notChecked("aws version", "whether the template's rayd matches this CLI's version"),
	}
}

func classifyCredentials(r AWSResult, err error) Check {
	const name = "aws credentials"
	switch {
	case errors.Is(err, errNoProfile):
		return fail(name, "the AWS profile named by AWS_PROFILE is in neither ~/.aws/config nor ~/.aws/credentials", "set AWS_PROFILE to an existing profile, or unset it")
	case errors.Is(err, errNoCredentials):
		return fail(name, "no AWS credentials found: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or sign in with aws sso login)", credentialsFix)
	case err != nil:
		return fail(name, "the AWS configuration cannot be loaded (a config or credentials file, or an AWS_* variable, is invalid)", "check ~/.aws/config, ~/.aws/credentials and the AWS_* variables (aws configure list)")
	}
	detail := "credentials resolved"
	if r.Source != "" {
		detail += " (from " + r.Source + ")"
	}
	return pass(name, detail)
}

func classifyRegion(r AWSResult, err error) Check {
	const name = "aws region"
	switch {
	case r.Region != "":
		return pass(name, r.Region)
	case err != nil && !errors.Is(err, errNoCredentials):
		return fail(name, "not resolved: the AWS configuration cannot be loaded", "fix the AWS configuration (see aws credentials above)")
	}
	return fail(name, "no AWS region configured", "set AWS_REGION, or a region in your AWS profile")
}

func checkTemplate(_ context.Context, e *Env) Check {
	const name = "aws template"
	switch t := e.Getenv("RAYITO_TEMPLATE"); {
	case t == "":
		return warn(name, "RAYITO_TEMPLATE is not set: sandbox create needs --template", "set RAYITO_TEMPLATE to your MicroVM image ARN")
	case !strings.HasPrefix(t, "arn:"):
		return warn(name, "RAYITO_TEMPLATE is set but is not an ARN", "set RAYITO_TEMPLATE to your MicroVM image ARN (arn:aws:lambda:...)")
	}
	return pass(name, "RAYITO_TEMPLATE is set (an ARN; not checked against AWS)")
}

func notChecked(name, what string) func(context.Context, *Env) Check {
	return func(context.Context, *Env) Check {
		return warn(name, "not checked yet: doctor does not check "+what, "verify by hand, e.g. with `rayito sandbox create`")
	}
}
