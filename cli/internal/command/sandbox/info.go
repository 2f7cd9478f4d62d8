package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

type infoOut struct {
	ID           string            `json:"id"`
	State        string            `json:"state"`
	Template     string            `json:"template,omitempty"`
	StartedAt    *time.Time        `json:"started_at,omitempty"`
	ExpiresAt    *time.Time        `json:"expires_at,omitempty"`
	EndedAt      *time.Time        `json:"ended_at,omitempty"`
	EndReason    string            `json:"end_reason,omitempty"`
	EndDetail    string            `json:"end_detail,omitempty"`
	StateReason  string            `json:"state_reason,omitempty"`
	Lifecycle    *lifecycleOut     `json:"lifecycle,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	AgentVersion string            `json:"agent_version,omitempty"`
	Isolation    string            `json:"isolation,omitempty"`
	MemoryLimit  uint64            `json:"memory_limit_bytes,omitempty"`
	ProcessLimit int               `json:"process_limit,omitempty"`
	RootAllowed  bool              `json:"root_allowed,omitempty"`
}

func infoCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:          "info",
		Usage:         "describe a sandbox",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags:         []cli.Flag{tokenFlag(), cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			in, err := info(ctx, cmd, f)
			if err != nil {
				return err
			}
			// Health's cpu_count and memory_total_bytes describe the
			// machine rayd runs on (the host, locally), not the sandbox's
			// limits: they are not shown; its limits are.
			out := infoOut{ID: in.ID, State: in.State, Template: in.Template, StateReason: in.StateReason,
				EndReason: string(in.EndReason), EndDetail: in.EndDetail,
				Metadata: in.Metadata, AgentVersion: in.AgentVersion, Isolation: in.Isolation,
				MemoryLimit: in.MemoryLimit, ProcessLimit: in.ProcessLimit, RootAllowed: in.RootAllowed}
			if l := in.Lifecycle; l != nil && l.Phase != rayito.PhaseUnmanaged {
				out.Lifecycle = lifecycleOutOf("", l)
			}
			if !in.StartedAt.IsZero() {
				out.StartedAt = &in.StartedAt
			}
			if !in.ExpiresAt.IsZero() && in.EndedAt.IsZero() && in.EndReason == "" {
				out.ExpiresAt = &in.ExpiresAt
			}
			if !in.EndedAt.IsZero() {
				out.EndedAt = &in.EndedAt
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			w := f.IO.Out
			fmt.Fprintf(w, "id:       %s\nstate:    %s\n", out.ID, out.State)
			if out.StartedAt != nil {
				fmt.Fprintf(w, "started:  %s\n", out.StartedAt.Local().Format(time.DateTime))
			}
			if out.ExpiresAt != nil {
				fmt.Fprintf(w, "expires:  %s (in %s)\n", out.ExpiresAt.Local().Format(time.DateTime), time.Until(*out.ExpiresAt).Round(time.Second))
			}
			if out.EndedAt != nil {
				fmt.Fprintf(w, "ended:    %s\n", out.EndedAt.Local().Format(time.DateTime))
			}
			if out.EndReason != "" {
				fmt.Fprintf(w, "reason:   %s\n", cliutil.EndText(in.EndReason, in.EndDetail))
			}
			if l := in.Lifecycle; out.Lifecycle != nil {
				fmt.Fprintf(w, "deadline: %s\n", deadlineLine(l))
				if !l.Cap.IsZero() {
					fmt.Fprintf(w, "cap:      %s\n", l.Cap.Local().Format(time.DateTime))
				}
				if l.Phase != rayito.PhaseActive {
					fmt.Fprintf(w, "phase:    %s\n", l.Phase)
				}
			}
			if out.AgentVersion != "" {
				fmt.Fprintf(w, "rayd:     %s\n", out.AgentVersion)
			}
			if out.Isolation != "" {
				fmt.Fprintf(w, "isolation: %s\n", out.Isolation)
			}
			if l := limitsLine(out.MemoryLimit, out.ProcessLimit); l != "" {
				fmt.Fprintf(w, "limits:   %s\n", l)
			}
			if out.RootAllowed {
				fmt.Fprintf(w, "root:     allowed (commands as root, sudo)\n")
			}
			for _, k := range sortedKeys(out.Metadata) {
				fmt.Fprintf(w, "metadata: %s=%s\n", k, out.Metadata[k])
			}
			return nil
		},
	}
}

// limitsLine words a sandbox's own limits ("" when none is known).
func limitsLine(memory uint64, processes int) string {
	var parts []string
	if memory > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB memory", memory>>20))
	}
	if processes > 0 {
		parts = append(parts, fmt.Sprintf("%d processes", processes))
	}
	return strings.Join(parts, ", ")
}

// info describes the sandbox named by the first argument (an id or a
// unique prefix of one): through its daemon while it runs (Connect, then
// Info), through the control plane alone once it has ended (GetInfo: no
// token needed).
func info(ctx context.Context, cmd *cli.Command, f *cliutil.Factory) (*rayito.Info, error) {
	id, err := resolveID(ctx, f, cmd.Args().First())
	if err != nil {
		return nil, err
	}
	sbx, err := connectResolved(ctx, cmd, f, id)
	if errors.Is(err, rayito.ErrSandboxEnded) {
		opts, oerr := options(ctx, f)
		if oerr != nil {
			return nil, oerr
		}
		in, ierr := rayito.GetInfo(ctx, id, opts...)
		return in, cliutil.OnSandbox(id, ierr)
	}
	if err != nil {
		return nil, err
	}
	in, err := sbx.Info(ctx)
	return in, cliutil.OnSandbox(sbx.ID(), err)
}

func tokenFlag() cli.Flag {
	return &cli.StringFlag{Name: "token", Usage: "the sandbox's access `TOKEN` (default: RAYITO_ACCESS_TOKEN, else the one stored by create)"}
}

// connect reaches the sandbox named by the first argument.
func connect(ctx context.Context, cmd *cli.Command, f *cliutil.Factory) (*rayito.Sandbox, error) {
	return connectID(ctx, cmd, f, cmd.Args().First())
}

// connectID reaches the sandbox arg names: an id or a unique prefix of
// one, resolved first (the token store knows sandboxes by their whole
// id), then reached as connectResolved does.
func connectID(ctx context.Context, cmd *cli.Command, f *cliutil.Factory, arg string, extra ...rayito.Option) (*rayito.Sandbox, error) {
	id, err := resolveID(ctx, f, arg)
	if err != nil {
		return nil, err
	}
	return connectResolved(ctx, cmd, f, id, extra...)
}

// connectResolved reaches sandbox id with the token from --token,
// RAYITO_ACCESS_TOKEN or the token store. A malformed id is refused here,
// before any call; every error names the sandbox (the SDK says "not
// found" and "ended at T (reason)" before it looks for a token).
func connectResolved(ctx context.Context, cmd *cli.Command, f *cliutil.Factory, id string, extra ...rayito.Option) (*rayito.Sandbox, error) {
	sbx, err := connectToken(ctx, cmd, f, id, extra...)
	return sbx, cliutil.OnSandbox(id, err)
}

func connectToken(ctx context.Context, cmd *cli.Command, f *cliutil.Factory, id string, extra ...rayito.Option) (*rayito.Sandbox, error) {
	if err := cliutil.CheckID(id); err != nil {
		return nil, err
	}
	opts, err := options(ctx, f)
	if err != nil {
		return nil, err
	}
	opts = append(opts, extra...)
	// Without --token or RAYITO_ACCESS_TOKEN the SDK reads the token
	// store that create (the CLI's or any SDK program's) filled.
	token := cmd.String("token")
	if token == "" {
		token = f.Getenv("RAYITO_ACCESS_TOKEN")
	}
	if token != "" {
		opts = append(opts, rayito.WithAccessToken(token))
	}
	sbx, err := rayito.Connect(ctx, id, opts...)
	if errors.Is(err, rayito.ErrNoAccessToken) {
		return nil, errors.New("no access token stored for this sandbox: pass --token or RAYITO_ACCESS_TOKEN")
	}
	return sbx, err
}
