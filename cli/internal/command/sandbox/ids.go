package sandbox

import (
	"context"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
)

// platformSandboxes lists the sandboxes of the configured platform, for
// resolving id prefixes (cliutil.ResolveIDs: one resolver for every
// command that takes a sandbox id).
func platformSandboxes(f *cliutil.Factory) cliutil.Candidates {
	return func(ctx context.Context) ([]cliutil.Candidate, error) {
		opts, err := options(ctx, f)
		if err != nil {
			return nil, err
		}
		return cliutil.PlatformCandidates(opts)(ctx)
	}
}

// resolveID turns arg, a sandbox id or a unique prefix of one, into the
// id.
func resolveID(ctx context.Context, f *cliutil.Factory, arg string) (string, error) {
	return cliutil.ResolveID(ctx, arg, platformSandboxes(f))
}

// resolveIDs is resolveID for several arguments, with one listing for
// all of them; each id comes back once.
func resolveIDs(ctx context.Context, f *cliutil.Factory, args []string) ([]string, error) {
	return cliutil.ResolveIDs(ctx, args, platformSandboxes(f))
}
