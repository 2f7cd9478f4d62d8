package suites

import (
	"context"
	"fmt"

	"github.com/rayito-dev/rayito/bench/internal/harness"
)

// Exec is the exec round trip (BENCHMARKS.md §2.3): `echo hi` on a warm
// sandbox, n=300.
func Exec(ctx context.Context, e *Env) harness.Result {
	sbx, err := e.Warm(ctx)
	if err != nil {
		return failed("exec", fmt.Errorf("warm sandbox: %w", err))
	}
	check := func(out []byte, err error) error {
		if err == nil && string(out) != "hi\n" {
			err = fmt.Errorf("echo gave %q", out)
		}
		return err
	}
	subjects := []harness.Subject{
		{Name: "F", Run: func(context.Context) (float64, error) {
			return timeIt(func() error { return check(e.runFloor(floorCmdPlain("/bin/echo", "hi"))) })
		}},
		{Name: "F bash -c (namespaced)", Optional: true, Run: func(context.Context) (float64, error) {
			return timeIt(func() error { return check(e.runFloor(floorCmd("bash", "-c", "echo hi"))) })
		}},
		{Name: "R", Run: func(ctx context.Context) (float64, error) {
			return timeIt(func() error {
				res, err := sbx.Commands.Exec(ctx, []string{"echo", "hi"})
				if err != nil {
					return err
				}
				return check([]byte(res.Stdout), nil)
			})
		}},
	}
	if e.Peer != nil {
		subjects = append(subjects, harness.Subject{Name: "P", Optional: true, Run: func(ctx context.Context) (float64, error) {
			var out []byte
			return timeIt(func() error {
				_, err := e.Peer.Run(ctx, "/bin/echo", []string{"hi"}, func(b []byte) { out = append(out, b...) })
				return check(out, err)
			})
		}})
	}
	s, err := harness.Loop(ctx, e.warmup(10), e.n(300), subjects...)
	if err != nil {
		return failed("exec", err)
	}
	note := "F = fork/exec /bin/echo hi (strict floor, no namespaces); secondary floor bash -c 'echo hi' " + nsNote() +
		"; R = Commands.Exec([echo hi]) on a warm sandbox"
	if e.Peer != nil {
		note += "; P = envd process.Start /bin/echo hi (Connect JSON, until end event and end-of-stream)"
	}
	return harness.FromSamples("exec", "ms", false, s, note)
}
