package sandbox

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// listItem is one sandbox in --json output.
type listItem struct {
	ID        string            `json:"id"`
	State     string            `json:"state"`
	Template  string            `json:"template,omitempty"`
	StartedAt *time.Time        `json:"started_at,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

func listCommand(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list sandboxes, newest first",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "state", Usage: "keep these states (PENDING, RUNNING, TERMINATED, ...)"},
			&cli.StringSliceFlag{Name: "metadata", Usage: "keep running sandboxes with this KEY=VALUE"},
			cliutil.JSONFlag,
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			md, err := cliutil.ParseEnvs(cmd.StringSlice("metadata"))
			if err != nil {
				return err
			}
			opts, err := options(ctx, os.Getenv)
			if err != nil {
				return err
			}
			var filters []rayito.ListOption
			if s := cmd.StringSlice("state"); len(s) > 0 {
				filters = append(filters, rayito.WithStates(s...))
			}
			if len(md) > 0 {
				filters = append(filters, rayito.WithMetadataFilter(md))
			}
			infos, err := rayito.List(ctx, filters, opts...)
			if err != nil {
				return err
			}
			items := make([]listItem, 0, len(infos))
			for _, in := range infos {
				it := listItem{ID: in.ID, State: in.State, Template: in.Template, Metadata: in.Metadata}
				if !in.StartedAt.IsZero() {
					t := in.StartedAt
					it.StartedAt = &t
				}
				items = append(items, it)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(io.Out, items)
			}
			tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tSTARTED")
			for _, it := range items {
				started := ""
				if it.StartedAt != nil {
					started = it.StartedAt.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", it.ID, it.State, started)
			}
			return tw.Flush()
		},
	}
}
