package sandbox

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/sdk/secrets"
)

// auditOut is one record of `sandbox audit --json`.
type auditOut struct {
	Mechanism string     `json:"mechanism"`
	Name      string     `json:"name,omitempty"`
	Header    string     `json:"header,omitempty"`
	Host      string     `json:"host"`
	Port      int        `json:"port"`
	Outcome   string     `json:"outcome"`
	Count     uint64     `json:"count"`
	Last      *time.Time `json:"last,omitempty"`
}

func auditCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "show which secret went to which host (never a value)",
		Description: "One line per secret, host and outcome since the sandbox started: MECHANISM is placeholder,\n" +
			"header_rule or gateway_route; NAME the placeholder's or the route's name; HEADER the header a\n" +
			"rule or a route set. OUTCOME sent: the secret went there; wrong_host: a placeholder was seen in\n" +
			"a request to a host that does not hold it (refused, nothing substituted); plain_http: a\n" +
			"placeholder in clear to its own host (refused). docs/secrets.md.",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags:         []cli.Flag{tokenFlag(), cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return cliutil.Usagef("audit takes one sandbox ID")
			}
			sbx, err := connect(ctx, cmd, f)
			if err != nil {
				return err
			}
			a, err := secrets.Audit(ctx, sbx)
			if err != nil {
				return cliutil.OnSandbox(sbx.ID(), err)
			}
			if cmd.Bool("json") {
				out := map[string]any{"records": auditRecords(a.Records), "dropped": a.Dropped}
				return cliutil.PrintJSON(f.IO.Out, out)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MECHANISM\tNAME\tHEADER\tHOST\tOUTCOME\tCOUNT\tLAST")
			for _, r := range a.Records {
				host := r.Host
				if host == "" {
					host = "?"
				}
				last := "-"
				if !r.Last.IsZero() {
					last = r.Last.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s:%d\t%s\t%d\t%s\n", r.Mechanism, dash(r.Name), dash(r.Header), host, r.Port, r.Outcome, r.Count, last)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(a.Records) == 0 {
				fmt.Fprintln(f.IO.Err, "no secret has left this sandbox")
			}
			if a.Dropped > 0 {
				fmt.Fprintln(f.IO.Err, "rayito: "+strconv.FormatUint(a.Dropped, 10)+" requests were not recorded: the audit trail is full (1024 records)")
			}
			return nil
		},
	}
}

func auditRecords(recs []secrets.AuditRecord) []auditOut {
	out := make([]auditOut, 0, len(recs))
	for _, r := range recs {
		o := auditOut{Mechanism: string(r.Mechanism), Name: r.Name, Header: r.Header, Host: r.Host, Port: r.Port, Outcome: string(r.Outcome), Count: r.Count}
		if !r.Last.IsZero() {
			t := r.Last.UTC()
			o.Last = &t
		}
		out = append(out, o)
	}
	return out
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
