package image

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// imageItem is one image of `image list --json`.
type imageItem struct {
	Name                string `json:"name"`
	ARN                 string `json:"arn"`
	State               string `json:"state"`
	LatestActiveVersion string `json:"latest_active_version"`
}

// versionItem is one version of `image list NAME --json`.
type versionItem struct {
	Version   string     `json:"version"`
	State     string     `json:"state"`
	Status    string     `json:"status"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

func listCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list the account's MicroVM images, or the versions of one",
		ArgsUsage: "[NAME|ARN]",
		Description: "Without an argument: the images of this account and region, with their state and\n" +
			"latest ACTIVE version. With an image's NAME or ARN: its versions, oldest first, with\n" +
			"their state (SUCCESSFUL, FAILED, ...), status (ACTIVE, INACTIVE) and creation time.\n" +
			"A version can launch when it is SUCCESSFUL and ACTIVE and the image CREATED or UPDATED.",
		Flags: []cli.Flag{cliutil.JSONFlag()},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			switch cmd.Args().Len() {
			case 0:
				return cliutil.Interrupted(ctx, listImages(ctx, f, cmd.Bool("json")))
			case 1:
				if err := checkImageArg(cmd.Args().First()); err != nil {
					return err
				}
				return cliutil.Interrupted(ctx, listImageVersions(ctx, f, cmd.Args().First(), cmd.Bool("json")))
			}
			return cliutil.Usagef("list takes at most one argument, an image NAME or ARN")
		},
	}
}

func listImages(ctx context.Context, f *cliutil.Factory, asJSON bool) error {
	env, err := loadAWS(ctx)
	if err != nil {
		return err
	}
	items := []imageItem{}
	for img, err := range env.MicroVMs.ListAllMicrovmImages(ctx, microvms.ListImagesInput{}) {
		if err != nil {
			return err
		}
		items = append(items, imageItem{Name: img.Name, ARN: img.ImageArn, State: string(img.State), LatestActiveVersion: img.LatestActiveImageVersion})
	}
	if asJSON {
		return cliutil.PrintJSON(f.IO.Out, items)
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tACTIVE VERSION\tARN")
	for _, it := range items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.Name, it.State, dash(it.LatestActiveVersion), it.ARN)
	}
	return tw.Flush()
}

func listImageVersions(ctx context.Context, f *cliutil.Factory, nameOrARN string, asJSON bool) error {
	env, err := loadAWS(ctx)
	if err != nil {
		return err
	}
	arn, err := resolveImage(ctx, env.MicroVMs, env.Region, nameOrARN)
	if err != nil {
		return err
	}
	vs, err := listVersions(ctx, env.MicroVMs, arn)
	if err != nil {
		return err
	}
	items := make([]versionItem, 0, len(vs))
	for _, v := range vs {
		items = append(items, versionItem{Version: v.ImageVersion, State: string(v.State), Status: string(v.Status), CreatedAt: timeOf(v.CreatedAt)})
	}
	if asJSON {
		return cliutil.PrintJSON(f.IO.Out, items)
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSTATE\tSTATUS\tCREATED")
	for _, it := range items {
		created := "-"
		if it.CreatedAt != nil {
			created = it.CreatedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.Version, it.State, dash(it.Status), created)
	}
	return tw.Flush()
}

func timeOf(t *microvmsapi.Timestamp) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
