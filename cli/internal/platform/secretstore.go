package platform

import (
	"context"
	"errors"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/sdk/secrets"
)

// SecretStore opens the secret store of kind ("local" or "aws"; "" is
// the backend's: aws when RAYITO_BACKEND is aws, else local), the local
// one in dir ("" is secrets.DefaultLocalDir's).
func SecretStore(ctx context.Context, getenv func(string) string, kind, dir string) (secrets.Store, error) {
	if kind == "" {
		b, err := Backend(getenv)
		if err != nil {
			return nil, err
		}
		kind = string(b)
	}
	switch kind {
	case "local":
		if dir == "" {
			var err error
			if dir, err = secrets.DefaultLocalDir(getenv); err != nil {
				return nil, err
			}
		}
		return secrets.NewLocalStore(dir)
	case "aws":
		if dir != "" {
			return nil, cliutil.Usagef("--dir is for the local store")
		}
		cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithLogger(logging.Nop{}))
		if err != nil {
			return nil, errors.New("cannot load the AWS configuration (credentials, profile)")
		}
		return secrets.NewAWSStore(cfg), nil
	}
	return nil, cliutil.Usagef("--store must be local or aws, got %q", kind)
}
