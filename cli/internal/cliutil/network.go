package cliutil

import (
	"github.com/urfave/cli/v3"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// NetworkFlags are the network policy flags of create, run and sandbox
// network.
func NetworkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "no-internet", Usage: "deny all outbound traffic, DNS included (but what --allow names)"},
		&cli.StringSliceFlag{Name: "allow", Usage: "allow `HOST_OR_CIDR` out, everything else denied (repeatable): a CIDR, an IP, a host name or *.suffix (hosts on 80 and 443, or HOST:PORT), ALL_TRAFFIC"},
		&cli.StringSliceFlag{Name: "deny", Usage: "deny `CIDR` out (repeatable; an IP or a CIDR); --allow entries win"},
	}
}

// NetworkPolicy returns the policy the network flags ask for, and whether
// they ask for one: --allow denies everything else; --no-internet denies
// everything but --allow; --deny alone denies only what it names.
func NetworkPolicy(cmd *cli.Command) (rayito.NetworkPolicy, bool) {
	allow, deny := cmd.StringSlice("allow"), cmd.StringSlice("deny")
	if !cmd.Bool("no-internet") && len(allow) == 0 && len(deny) == 0 {
		return rayito.NetworkPolicy{}, false
	}
	p := rayito.NetworkPolicy{AllowOut: allow, DenyOut: deny}
	if cmd.Bool("no-internet") || len(allow) > 0 {
		p.DenyOut = append(p.DenyOut, rayito.DenyAllNetwork().DenyOut...)
	}
	return p, true
}

// NetworkOptions returns the SDK options of the network flags (nil when
// none is set). --no-internet alone takes the platform's route out away
// too (rayito.WithAllowInternetAccess(false)); with --allow the route
// stays and the sandbox's daemon lets only the allowed traffic out.
func NetworkOptions(cmd *cli.Command) []rayito.Option {
	p, ok := NetworkPolicy(cmd)
	if !ok {
		return nil
	}
	if cmd.Bool("no-internet") && len(p.AllowOut) == 0 && len(cmd.StringSlice("deny")) == 0 {
		return []rayito.Option{rayito.WithAllowInternetAccess(false)}
	}
	return []rayito.Option{rayito.WithNetwork(p)}
}
