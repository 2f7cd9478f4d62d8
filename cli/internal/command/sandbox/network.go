package sandbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// networkOut is a sandbox's network policy in --json output.
type networkOut struct {
	ID                    string   `json:"id"`
	AllowOut              []string `json:"allow_out"`
	DenyOut               []string `json:"deny_out"`
	EgressProxyConfigured bool     `json:"egress_proxy_configured"`
	Enforcement           string   `json:"enforcement"`
	LocalProxyPort        int      `json:"local_proxy_port,omitempty"`
}

func networkCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "network",
		Usage: "show a sandbox's outbound network policy, or replace it",
		Description: "Without flags it prints the policy in force. With --no-internet, --allow, --deny or\n" +
			"--unrestricted it replaces the whole policy at once: live connections the new one forbids are\n" +
			"cut. --allow denies everything else; host names go through the sandbox's egress proxy.\n" +
			"The instance metadata service stays unreachable whatever --allow says.",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags: append(cliutil.NetworkFlags(),
			&cli.BoolFlag{Name: "unrestricted", Usage: "allow all outbound traffic (the metadata service excepted)"},
			tokenFlag(),
			cliutil.JSONFlag(),
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			if n := cmd.Args().Len(); n > 1 {
				return cliutil.Usagef("network takes one sandbox id, got %d arguments", n)
			}
			p, change := cliutil.NetworkPolicy(cmd)
			if cmd.Bool("unrestricted") {
				if change {
					return cliutil.Usagef("--unrestricted excludes --no-internet, --allow and --deny")
				}
				p, change = rayito.NetworkPolicy{}, true
			}
			sbx, err := connect(ctx, cmd, f)
			if err != nil {
				return err
			}
			var st *rayito.NetworkState
			if change {
				st, err = sbx.UpdateNetwork(ctx, p)
			} else {
				st, err = sbx.Network(ctx)
			}
			if err != nil {
				return err
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, networkOut{ID: sbx.ID(), AllowOut: nonNil(st.AllowOut), DenyOut: nonNil(st.DenyOut),
					EgressProxyConfigured: st.EgressProxyConfigured, Enforcement: st.Enforcement, LocalProxyPort: st.LocalProxyPort})
			}
			w := f.IO.Out
			fmt.Fprintf(w, "allow:        %s\n", listOrDash(st.AllowOut))
			fmt.Fprintf(w, "deny:         %s\n", listOrDash(st.DenyOut))
			fmt.Fprintf(w, "enforcement:  %s\n", st.Enforcement)
			if st.LocalProxyPort > 0 {
				fmt.Fprintf(w, "egress proxy: 127.0.0.1:%d", st.LocalProxyPort)
				if st.EgressProxyConfigured {
					fmt.Fprint(w, " (chained to an operator proxy)")
				}
				fmt.Fprintln(w)
			}
			return nil
		},
	}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func listOrDash(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, " ")
}
