package sandbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// states are the sandbox states, in their lifecycle order.
var states = []microvmsapi.State{
	microvmsapi.StatePending, microvmsapi.StateRunning, microvmsapi.StateSuspending,
	microvmsapi.StateSuspended, microvmsapi.StateTerminating, microvmsapi.StateTerminated,
}

func stateNames() string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// parseStates validates --state values (any case) and returns them upper
// case.
func parseStates(in []string) ([]string, error) {
	var out []string
	for _, s := range in {
		for part := range strings.SplitSeq(s, ",") {
			st := microvmsapi.State(strings.ToUpper(strings.TrimSpace(part)))
			if !slices.Contains(states, st) {
				return nil, cliutil.Usagef("--state %q is not a sandbox state (%s)", part, stateNames())
			}
			out = append(out, string(st))
		}
	}
	return out, nil
}

// listItem is one sandbox in --json output.
type listItem struct {
	ID        string            `json:"id"`
	State     string            `json:"state"`
	Template  string            `json:"template,omitempty"`
	StartedAt *time.Time        `json:"started_at,omitempty"`
	EndedAt   *time.Time        `json:"ended_at,omitempty"`
	EndReason string            `json:"end_reason,omitempty"`
	EndDetail string            `json:"end_detail,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

func listCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list sandboxes, newest first (ended ones with --all)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "also list TERMINATED sandboxes"},
			&cli.StringSliceFlag{Name: "state", Usage: "keep sandboxes in this `STATE` (" + stateNames() + "; repeatable)"},
			&cli.StringSliceFlag{Name: "metadata", Usage: "keep running sandboxes with this `KEY=VALUE`"},
			&cli.IntFlag{Name: "limit", Aliases: []string{"n"}, Usage: "list at most `N` sandboxes", HideDefault: true},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Present() {
				return cliutil.Usagef("list takes no arguments, got %q", cmd.Args().First())
			}
			md, err := cliutil.ParseKVs("--metadata", cmd.StringSlice("metadata"))
			if err != nil {
				return err
			}
			want, err := parseStates(cmd.StringSlice("state"))
			if err != nil {
				return err
			}
			limit := cmd.Int("limit")
			if limit < 0 || (cmd.IsSet("limit") && limit == 0) {
				return cliutil.Usagef("--limit must be a positive number, got %d", limit)
			}
			opts, err := options(ctx, f)
			if err != nil {
				return err
			}
			if len(want) == 0 && !cmd.Bool("all") {
				// Not the TERMINATED ones: their end reasons would cost a
				// call each for nothing.
				for _, st := range states {
					if st != microvmsapi.StateTerminated {
						want = append(want, string(st))
					}
				}
			}
			if len(want) > 0 {
				opts = append(opts, rayito.WithStates(want...))
			}
			// The REASON column of ended sandboxes.
			opts = append(opts, rayito.WithEndReasons())
			if len(md) > 0 {
				opts = append(opts, rayito.WithMetadataFilter(md))
			}
			infos, err := rayito.List(ctx, opts...)
			if err != nil {
				return err
			}
			items := make([]listItem, 0, len(infos))
			for _, in := range infos {
				if limit > 0 && len(items) == limit {
					break
				}
				it := listItem{ID: in.ID, State: in.State, Template: in.Template, Metadata: in.Metadata,
					EndReason: string(in.EndReason), EndDetail: in.EndDetail}
				if !in.StartedAt.IsZero() {
					t := in.StartedAt
					it.StartedAt = &t
				}
				if !in.EndedAt.IsZero() {
					t := in.EndedAt
					it.EndedAt = &t
				}
				items = append(items, it)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, items)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tSTARTED\tREASON")
			for _, it := range items {
				started := ""
				if it.StartedAt != nil {
					started = it.StartedAt.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.ID, it.State, started, cliutil.EndText(rayito.EndReason(it.EndReason), it.EndDetail))
			}
			return tw.Flush()
		},
	}
}
