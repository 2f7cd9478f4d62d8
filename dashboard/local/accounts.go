package local

import (
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Other accounts (--account) are read through a role assumed with STS:
// the session is not requested until a request names the account, lasts
// an hour and is named rayito-dashboard in the target account's
// CloudTrail. They are always read-only, list only (the read role has no
// logs, events or sandbox tokens), and the API knows them only by label.
const (
	// AccountSessionName is the assumed session's name.
	AccountSessionName = "rayito-dashboard"
	// AccountSessionDuration is the assumed session's lifetime.
	AccountSessionDuration = time.Hour
	// DefaultAccount is the label of the caller's own account.
	DefaultAccount = "default"
	// maxAccounts bounds --account.
	maxAccounts = 20
)

var (
	labelPattern = regexp.MustCompile(`\A[a-z0-9][a-z0-9_-]{0,31}\z`)
	// Compiled on first use (sync.OnceValue): a counted repetition such as
	// {1,512} compiles to a program of hundreds of KB, which every start of
	// the CLI would otherwise build.
	roleARNPattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\Aarn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}\z`)
	})
	externalIDPattern = regexp.MustCompile(`\A[A-Za-z0-9+=,.@:/_-]+\z`)
)

// checkAccounts validates --account values: a label of a-z, 0-9, _ and -
// (1 to 32, not "default", no repeats), an IAM role ARN, an optional
// external id of STS's grammar. They need the AWS backend.
func checkAccounts(backend string, accounts []Account) error {
	if len(accounts) == 0 {
		return nil
	}
	if backend != "aws" {
		return fmt.Errorf("%w: --account reads other AWS accounts: it needs RAYITO_BACKEND=aws", ErrInvalidOption)
	}
	if len(accounts) > maxAccounts {
		return fmt.Errorf("%w: at most %d accounts", ErrInvalidOption, maxAccounts)
	}
	seen := map[string]bool{}
	for _, a := range accounts {
		switch {
		case !labelPattern.MatchString(a.Label) || a.Label == DefaultAccount:
			return fmt.Errorf("%w: account label %q (1 to 32 of a-z, 0-9, _ and -, not %q)", ErrInvalidOption, a.Label, DefaultAccount)
		case seen[a.Label]:
			return fmt.Errorf("%w: account label %q given twice", ErrInvalidOption, a.Label)
		case !roleARNPattern().MatchString(a.RoleARN):
			return fmt.Errorf("%w: account %q: the role must be an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)", ErrInvalidOption, a.Label)
		case a.ExternalID != "" && (len(a.ExternalID) < 2 || len(a.ExternalID) > 1224 || !externalIDPattern.MatchString(a.ExternalID)):
			return fmt.Errorf("%w: account %q: the external id is 2 to 1224 of A-Z a-z 0-9 + = , . @ : / _ -", ErrInvalidOption, a.Label)
		}
		seen[a.Label] = true
	}
	return nil
}

// accountBackend is the read-only backend of another account: base is
// the caller's AWS configuration, whose credentials assume the role.
func accountBackend(base aws.Config, sdk []rayito.Option, a Account) backend {
	cfg := base.Copy()
	provider := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(base), a.RoleARN, func(o *stscreds.AssumeRoleOptions) {
		o.RoleSessionName = AccountSessionName
		o.Duration = AccountSessionDuration
		if a.ExternalID != "" {
			o.ExternalID = aws.String(a.ExternalID)
		}
	})
	// Retrieved on first use, then refreshed before it expires.
	cfg.Credentials = aws.NewCredentialsCache(provider)
	opts := append(append([]rayito.Option(nil), sdk...), rayito.WithBackend(rayito.BackendAWS), rayito.WithAWSConfig(cfg))
	return &sdkBackend{opts: opts, now: time.Now, listOnly: true}
}

// backendFor is the backend of a request's ?account= ("" or "default":
// the caller's own), ok false when the label is unknown.
func (s *Server) backendFor(label string) (backend, bool) {
	if label == "" || label == DefaultAccount {
		return s.be, true
	}
	be, ok := s.accounts[label]
	return be, ok
}
