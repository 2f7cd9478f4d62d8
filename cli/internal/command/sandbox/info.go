package sandbox

import (
	"context"
	"fmt"
	"os"
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
	EndedAt      *time.Time        `json:"ended_at,omitempty"`
	StateReason  string            `json:"state_reason,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	AgentVersion string            `json:"agent_version,omitempty"`
	CPUCount     int               `json:"cpu_count,omitempty"`
	MemoryBytes  uint64            `json:"memory_bytes,omitempty"`
}

func infoCommand(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:      "info",
		Usage:     "describe a sandbox",
		ArgsUsage: "ID",
		Flags:     []cli.Flag{tokenFlag, cliutil.JSONFlag},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			sbx, err := connect(ctx, cmd)
			if err != nil {
				return err
			}
			in, err := sbx.Info(ctx)
			if err != nil {
				return err
			}
			out := infoOut{ID: in.ID, State: in.State, Template: in.Template, StateReason: in.StateReason,
				Metadata: in.Metadata, AgentVersion: in.AgentVersion, CPUCount: in.CPUCount, MemoryBytes: in.MemoryBytes}
			if !in.StartedAt.IsZero() {
				out.StartedAt = &in.StartedAt
			}
			if !in.EndedAt.IsZero() {
				out.EndedAt = &in.EndedAt
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(io.Out, out)
			}
			fmt.Fprintf(io.Out, "id:       %s\nstate:    %s\n", out.ID, out.State)
			if out.StartedAt != nil {
				fmt.Fprintf(io.Out, "started:  %s\n", out.StartedAt.Local().Format(time.DateTime))
			}
			if out.StateReason != "" {
				fmt.Fprintf(io.Out, "reason:   %s\n", out.StateReason)
			}
			if out.AgentVersion != "" {
				fmt.Fprintf(io.Out, "rayd:     %s (%d CPUs, %d MiB)\n", out.AgentVersion, out.CPUCount, out.MemoryBytes>>20)
			}
			for k, v := range out.Metadata {
				fmt.Fprintf(io.Out, "metadata: %s=%s\n", k, v)
			}
			return nil
		},
	}
}

var tokenFlag = &cli.StringFlag{Name: "token", Usage: "the sandbox's access token (default: RAYITO_ACCESS_TOKEN, else the one stored by create)"}

// connect reaches the sandbox named by the first argument.
func connect(ctx context.Context, cmd *cli.Command) (*rayito.Sandbox, error) {
	return connectID(ctx, cmd, cmd.Args().First())
}

// connectID reaches sandbox id with the token from --token,
// RAYITO_ACCESS_TOKEN or the token store.
func connectID(ctx context.Context, cmd *cli.Command, id string) (*rayito.Sandbox, error) {
	opts, err := options(ctx, os.Getenv)
	if err != nil {
		return nil, err
	}
	token := cmd.String("token")
	if token == "" {
		token = os.Getenv("RAYITO_ACCESS_TOKEN")
	}
	if token == "" {
		if token, err = cliutil.DefaultTokenStore(os.Getenv).Load(id); err != nil {
			return nil, err
		}
	}
	return rayito.Connect(ctx, id, token, opts...)
}
