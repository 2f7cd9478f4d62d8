// Package events is `rayito events`: the lifecycle events the platform
// stored (list, tail) and the webhooks it delivers them to (webhook add,
// list, remove). On the local platform they talk to its events pipeline;
// on AWS to the events stack's table and Secrets Manager (--table).
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// tailPoll is how often tail asks for new events.
const tailPoll = time.Second

// Command is `rayito events`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "lifecycle events (created, paused, resumed, killed) and their webhooks",
		Description: "Sandboxes created with events on (the SDK's WithEvents) sign an event at each change; the\n" +
			"platform keeps them and POSTs them to your webhooks with e2b-signature and\n" +
			"rayito-signature (docs/events.md). On AWS they read and write the events stack's table\n" +
			"(--table, the stack's EventsTableName: rayito stack status events) and, for webhooks,\n" +
			"Secrets Manager; events list and tail then need a sandbox id.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "table", Usage: "the events stack's `TABLE` (AWS; default $RAYITO_EVENTS_TABLE)"},
		},
		Commands: []*cli.Command{listCommand(f), tailCommand(f), webhookCommand(f)},
	}
}

// options is the SDK's target: the user's local platform (which must
// answer), or AWS with the events stack's table. sandboxID is the
// command's sandbox argument, needsID whether it reads events (on AWS
// they are read by sandbox).
func options(ctx context.Context, cmd *cli.Command, f *cliutil.Factory, sandboxID string, needsID bool) ([]rayito.Option, error) {
	t, err := platform.Existing(ctx, f.Getenv)
	if err != nil {
		return nil, err
	}
	if b, _ := platform.Backend(f.Getenv); b != rayito.BackendAWS {
		return t.Options, nil
	}
	table := cmd.String("table")
	if table == "" {
		table = f.Getenv("RAYITO_EVENTS_TABLE")
	}
	if table == "" {
		return nil, cliutil.Usagef("on AWS the events commands need the events stack's table: --table or RAYITO_EVENTS_TABLE (rayito stack status events shows it)")
	}
	if needsID && sandboxID == "" {
		return nil, cliutil.Usagef("on AWS, events are read by sandbox: give a sandbox id")
	}
	return append(t.Options, rayito.WithEventsTable(table)), nil
}

// usageOr makes an argument the SDK refused a usage error (exit 2).
func usageOr(err error) error {
	if errors.Is(err, rayito.ErrInvalidArgument) {
		return cliutil.Usage(err)
	}
	return err
}

func sandboxArg(cmd *cli.Command) (string, error) {
	switch cmd.Args().Len() {
	case 0:
		return "", nil
	case 1:
		id := cmd.Args().First()
		if err := cliutil.CheckID(id); err != nil {
			return "", cliutil.Usage(err)
		}
		return id, nil
	}
	return "", cliutil.Usagef("want at most one sandbox id, got %d arguments", cmd.Args().Len())
}

type eventJSON struct {
	EventID    string    `json:"event_id"`
	SandboxID  string    `json:"sandbox_id"`
	Type       string    `json:"type"`
	KillReason string    `json:"kill_reason,omitempty"`
	Generation uint64    `json:"generation"`
	OccurredAt time.Time `json:"occurred_at"`
}

func toJSON(e rayito.LifecycleEvent) eventJSON {
	return eventJSON{EventID: e.EventID, SandboxID: e.SandboxID, Type: string(e.Type), KillReason: e.KillReason, Generation: e.Generation, OccurredAt: e.OccurredAt}
}

func printEvents(w io.Writer, evs []rayito.LifecycleEvent, header bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header {
		fmt.Fprintln(tw, "TIME\tSANDBOX\tEVENT\tGEN\tEVENT ID")
	}
	for _, e := range evs {
		typ := string(e.Type)
		if e.KillReason != "" {
			typ += " (" + e.KillReason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", e.OccurredAt.Local().Format(time.RFC3339), e.SandboxID, typ, e.Generation, e.EventID)
	}
	tw.Flush()
}

func listCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list stored events, of one sandbox or of all",
		ArgsUsage: "[ID]",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most `N` events (1 to 100)"},
			&cli.StringFlag{Name: "order", Value: "desc", Usage: "`ORDER` by time: desc (newest first) or asc"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			id, err := sandboxArg(cmd)
			if err != nil {
				return err
			}
			limit := cmd.Int("limit")
			if limit < 1 || limit > 100 {
				return cliutil.Usagef("--limit must be between 1 and 100, got %d", limit)
			}
			order := cmd.String("order")
			if order != "asc" && order != "desc" {
				return cliutil.Usagef("--order must be asc or desc, got %q", order)
			}
			opts, err := options(ctx, cmd, f, id, true)
			if err != nil {
				return err
			}
			evs, err := rayito.GetEvents(ctx, rayito.EventsQuery{SandboxID: id, Limit: int(limit), Order: order}, opts...)
			if err != nil {
				return usageOr(err)
			}
			if cmd.Bool("json") {
				out := make([]eventJSON, 0, len(evs))
				for _, e := range evs {
					out = append(out, toJSON(e))
				}
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			printEvents(f.IO.Out, evs, true)
			return nil
		},
	}
}

func tailCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "tail",
		Usage: "print new events as they come, until Ctrl-C",
		Description: "Prints the last events (--last, oldest first), then each new one. With --json, one JSON\n" +
			"object per line.",
		ArgsUsage: "[ID]",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "last", Value: 10, Usage: "print the last `N` events first (0 to 100)"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			id, err := sandboxArg(cmd)
			if err != nil {
				return err
			}
			last := cmd.Int("last")
			if last < 0 || last > 100 {
				return cliutil.Usagef("--last must be between 0 and 100, got %d", last)
			}
			opts, err := options(ctx, cmd, f, id, true)
			if err != nil {
				return err
			}
			seen := map[string]bool{}
			first := true
			for {
				evs, err := rayito.GetEvents(ctx, rayito.EventsQuery{SandboxID: id, Limit: 100, Order: "desc"}, opts...)
				if err != nil {
					return usageOr(cliutil.Interrupted(ctx, err))
				}
				slices.Reverse(evs)
				var fresh []rayito.LifecycleEvent
				for _, e := range evs {
					if !seen[e.EventID] {
						seen[e.EventID] = true
						fresh = append(fresh, e)
					}
				}
				if first && len(fresh) > int(last) {
					fresh = fresh[len(fresh)-int(last):]
				}
				if cmd.Bool("json") {
					for _, e := range fresh {
						if err := json.NewEncoder(f.IO.Out).Encode(toJSON(e)); err != nil {
							return err
						}
					}
				} else if len(fresh) > 0 {
					printEvents(f.IO.Out, fresh, false)
				}
				first = false
				select {
				case <-ctx.Done():
					return cliutil.Interrupted(ctx, ctx.Err())
				case <-time.After(tailPoll):
				}
			}
		},
	}
}

func webhookCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "webhook",
		Usage: "manage the webhooks events are delivered to",
		Description: "A webhook receives the events of every sandbox of the platform (of the types it asks\n" +
			"for). Deliveries are HTTPS POSTs signed with the webhook's secret: check rayito-signature\n" +
			"(the Go SDK's webhook.Verify) or E2B's e2b-signature.",
		Commands: []*cli.Command{webhookAddCommand(f), webhookListCommand(f), webhookRemoveCommand(f)},
	}
}

type webhookJSON struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Types     []string  `json:"types,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Secret    string    `json:"secret,omitempty"`
}

func hookJSON(w rayito.Webhook) webhookJSON {
	out := webhookJSON{ID: w.ID, URL: w.URL, CreatedAt: w.CreatedAt}
	for _, t := range w.Types {
		out.Types = append(out.Types, string(t))
	}
	return out
}

func webhookAddCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "add",
		Usage: "register a webhook; prints its id and its signing secret (shown this once)",
		Description: "The URL is https only and must not name a private, loopback or link-local address (a\n" +
			"platform started with --events-allow-loopback accepts a literal loopback address). The\n" +
			"secret is generated (32 random bytes, hex) unless --secret-stdin reads one (32 bytes or\n" +
			"more).",
		ArgsUsage: "URL",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "secret-stdin", Usage: "read the signing secret from stdin instead of generating one"},
			&cli.StringSliceFlag{Name: "type", Usage: "deliver only events of `TYPE` (created, paused, resumed, killed; repeatable; default all)"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return cliutil.Usagef("want one URL, got %d arguments", cmd.Args().Len())
			}
			reg := rayito.WebhookRegistration{URL: cmd.Args().First()}
			for _, t := range cmd.StringSlice("type") {
				switch rayito.EventType(t) {
				case rayito.EventCreated, rayito.EventPaused, rayito.EventResumed, rayito.EventKilled:
					reg.Types = append(reg.Types, rayito.EventType(t))
				default:
					return cliutil.Usagef("--type must be created, paused, resumed or killed, got %q", t)
				}
			}
			if cmd.Bool("secret-stdin") {
				if cliutil.IsTerminal(f.IO.In) {
					return cliutil.Usagef("--secret-stdin: pipe the secret on stdin")
				}
				b, err := io.ReadAll(io.LimitReader(f.IO.In, 4097))
				if err != nil {
					return fmt.Errorf("reading stdin: %w", err)
				}
				secret := strings.TrimRight(string(b), "\r\n")
				if len(secret) < 32 || len(secret) > 1024 {
					return cliutil.Usagef("--secret-stdin: the secret must be 32 to 1024 bytes, got %d", len(secret))
				}
				reg.Secret = secret
			}
			opts, err := options(ctx, cmd, f, "", false)
			if err != nil {
				return err
			}
			w, secret, err := rayito.RegisterWebhook(ctx, reg, opts...)
			if err != nil {
				return usageOr(err)
			}
			if cmd.Bool("json") {
				out := hookJSON(w)
				if reg.Secret == "" {
					out.Secret = secret
				}
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			fmt.Fprintln(f.IO.Out, w.ID)
			if reg.Secret == "" {
				fmt.Fprintf(f.IO.Err, "rayito: the webhook's signing secret (shown once): %s\n", secret)
			}
			return nil
		},
	}
}

func webhookListCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the webhooks (never their secrets)",
		Flags: []cli.Flag{cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 0 {
				return cliutil.Usagef("list takes no arguments")
			}
			opts, err := options(ctx, cmd, f, "", false)
			if err != nil {
				return err
			}
			hooks, err := rayito.ListWebhooks(ctx, opts...)
			if err != nil {
				return usageOr(err)
			}
			if cmd.Bool("json") {
				out := make([]webhookJSON, 0, len(hooks))
				for _, w := range hooks {
					out = append(out, hookJSON(w))
				}
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTYPES\tCREATED\tURL")
			for _, w := range hooks {
				types := "all"
				if len(w.Types) > 0 {
					var ts []string
					for _, t := range w.Types {
						ts = append(ts, string(t))
					}
					types = strings.Join(ts, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", w.ID, types, w.CreatedAt.Local().Format(time.RFC3339), w.URL)
			}
			return tw.Flush()
		},
	}
}

func webhookRemoveCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "remove a webhook",
		ArgsUsage: "ID",
		Flags:     []cli.Flag{cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return cliutil.Usagef("want one webhook id, got %d arguments", cmd.Args().Len())
			}
			id := cmd.Args().First()
			opts, err := options(ctx, cmd, f, "", false)
			if err != nil {
				return err
			}
			if err := rayito.DeleteWebhook(ctx, id, opts...); err != nil {
				if errors.Is(err, rayito.ErrNotFound) {
					return fmt.Errorf("webhook %s not found", id)
				}
				return usageOr(err)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, map[string]any{"removed": id})
			}
			fmt.Fprintln(f.IO.Out, id)
			return nil
		},
	}
}
