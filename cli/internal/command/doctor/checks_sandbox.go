package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// sandboxProbe creates a sandbox where `rayito run` would (the platform at
// the endpoint, else one started in this process), runs `true` in it and
// kills it. It never starts an unisolated platform: RAYITO_UNISOLATED is
// ignored, so where sandboxes cannot be isolated it returns an error
// wrapping localvm.ErrUnisolated.
func sandboxProbe(ctx context.Context, getenv func(string) string) (r SandboxResult, err error) {
	env := func(k string) string {
		if k == platform.UnisolatedEnv || k == rayito.EnvBackend {
			return ""
		}
		return getenv(k)
	}
	start := time.Now()
	t, err := platform.Ensure(ctx, env, io.Discard, false)
	if err != nil {
		return r, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if cerr := t.Close(cctx); cerr != nil && err == nil {
			err = fmt.Errorf("stop the in-process platform: %w", cerr)
		}
	}()
	r.InProcess, r.Endpoint, r.Startup = t.InProcess, t.Endpoint, time.Since(start)
	start = time.Now()
	sbx, err := rayito.Create(ctx, append([]rayito.Option{rayito.WithTimeout(2 * time.Minute)}, t.Options...)...)
	if err != nil {
		return r, fmt.Errorf("create: %w", err)
	}
	killed := false
	defer func() {
		if !killed {
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = sbx.Kill(kctx)
		}
	}()
	res, err := sbx.Commands.Exec(ctx, []string{"true"})
	if err != nil {
		return r, fmt.Errorf("run true: %w", err)
	}
	if res.ExitCode != 0 {
		return r, errors.New("run true: it did not exit 0")
	}
	r.Isolation, _ = sbx.Isolation(ctx)
	if r.Isolation == "" {
		r.Isolation = "unknown"
	}
	killed = true
	if err := sbx.Kill(ctx); err != nil {
		return r, fmt.Errorf("kill: %w", err)
	}
	r.Elapsed = time.Since(start)
	return r, nil
}
