package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// followPoll is how often --follow looks for more output.
const followPoll = 250 * time.Millisecond

func logsCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "logs",
		Usage: "print a sandbox's daemon (rayd) log " + cliutil.LocalOnly,
		Description: "The local platform keeps rayd's output in its state directory; this command reads it\n" +
			"there, so it works on the machine that runs `rayito local serve` (give --state-dir when\n" +
			"the platform uses another one). --follow prints new output until the sandbox ends or Ctrl-C.",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new output"},
			&cli.StringFlag{Name: "state-dir", Usage: "the local platform's state `DIR` (default: " + localvm.DefaultStateDir() + ")"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			arg := cmd.Args().First()
			if b, err := platform.Backend(f.Getenv); err != nil {
				return err
			} else if b == rayito.BackendAWS {
				return cliutil.OnSandbox(arg, errors.New("logs are only kept by the local platform (on AWS, see the microVM's CloudWatch logs)"))
			}
			dir := cmd.String("state-dir")
			if dir == "" {
				dir = localvm.DefaultStateDir()
			}
			// The sandboxes whose logs the state dir holds, running or
			// not, are what a prefix is resolved against: the platform
			// need not run.
			id, err := cliutil.ResolveID(ctx, arg, loggedSandboxes(dir))
			if err != nil {
				return err
			}
			fh, err := os.Open(localvm.LogPath(dir, id))
			if errors.Is(err, fs.ErrNotExist) {
				return cliutil.OnSandbox(id, cliutil.ErrNoSandbox)
			}
			if err != nil {
				return cliutil.OnSandbox(id, errors.New("cannot read its log: "+errors.Unwrap(err).Error()))
			}
			defer fh.Close()
			var out io.Writer = f.IO.Out
			if cmd.Bool("json") {
				// rayd's records are JSON lines already; anything else
				// becomes {"text": line}.
				jl := cliutil.NewJSONLines(f.IO.Out)
				defer jl.Close()
				out = jl
			}
			if _, err := io.Copy(out, fh); err != nil {
				return err
			}
			if !cmd.Bool("follow") {
				return nil
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return follow(ctx, f, out, id, fh)
		},
	}
}

// follow copies what is appended to fh until the sandbox has ended (and
// its last output is copied) or ctx ends.
func follow(ctx context.Context, f *cliutil.Factory, out io.Writer, id string, fh *os.File) error {
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	lastCheck := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if _, err := io.Copy(out, fh); err != nil {
			return err
		}
		if time.Since(lastCheck) < 2*time.Second {
			continue
		}
		lastCheck = time.Now()
		if ended(ctx, f, id) {
			_, err := io.Copy(out, fh)
			return err
		}
	}
}

// ended reports whether the platform lists sandbox id as ended or no
// longer lists it.
func ended(ctx context.Context, f *cliutil.Factory, id string) bool {
	opts, err := options(ctx, f)
	if err != nil {
		return false
	}
	infos, err := rayito.List(ctx, opts...)
	if err != nil {
		return false
	}
	i := slices.IndexFunc(infos, func(in rayito.Info) bool { return in.ID == id })
	return i < 0 || infos[i].State == string(microvmsapi.StateTerminated)
}

// loggedSandboxes lists the sandboxes whose rayd log the local platform
// with state directory dir keeps.
func loggedSandboxes(dir string) cliutil.Candidates {
	return func(context.Context) ([]cliutil.Candidate, error) {
		vms := filepath.Dir(filepath.Dir(localvm.LogPath(dir, "x")))
		ents, err := os.ReadDir(vms)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("cannot list the sandbox logs in %s: %w", vms, err)
		}
		var out []cliutil.Candidate
		for _, e := range ents {
			if _, err := os.Stat(localvm.LogPath(dir, e.Name())); err == nil {
				out = append(out, cliutil.Candidate{ID: e.Name()})
			}
		}
		return out, nil
	}
}
