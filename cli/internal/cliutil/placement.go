package cliutil

import (
	"github.com/urfave/cli/v3"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// PlacementFlags are the flags of where and how the platform runs a new
// sandbox: its IAM role, image version and network connectors. They are
// AWS only: the local platform has no IAM roles, one image and no
// connectors, and create and run refuse them there (CheckCreateOptions).
func PlacementFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "execution-role", Usage: "run the microVM under the IAM role `ARN` (default none: no AWS credentials inside, no runtime logs; with one, logs go to /rayito/<image>) " + AWSOnly},
		&cli.StringFlag{Name: "template-version", Usage: "the image `VERSION` to run (default: the latest active one) " + AWSOnly},
		&cli.StringSliceFlag{Name: "ingress", Usage: "ingress network `CONNECTOR`: ALL_INGRESS, NO_INGRESS, SHELL_INGRESS or a VPC connector ARN (repeatable; default: HTTP ingress through the endpoint) " + AWSOnly},
		&cli.StringSliceFlag{Name: "egress", Usage: "egress network `CONNECTOR`: INTERNET_EGRESS or a VPC connector ARN (repeatable; replaces the default INTERNET_EGRESS) " + AWSOnly},
	}
}

// PlacementOptions returns the SDK options of PlacementFlags (the SDK
// checks the values, before any call).
func PlacementOptions(cmd *cli.Command) []rayito.Option {
	var opts []rayito.Option
	if r := cmd.String("execution-role"); r != "" {
		opts = append(opts, rayito.WithExecutionRole(r))
	}
	if v := cmd.String("template-version"); v != "" {
		opts = append(opts, rayito.WithTemplateVersion(v))
	}
	if cmd.IsSet("ingress") {
		opts = append(opts, rayito.WithIngressConnectors(cmd.StringSlice("ingress")...))
	}
	if cmd.IsSet("egress") {
		opts = append(opts, rayito.WithEgressConnectors(cmd.StringSlice("egress")...))
	}
	return opts
}
