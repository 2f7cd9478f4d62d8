package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// The actions of prune, per version.
const (
	actKeep    = "keep"
	actSkip    = "skip"
	actDelete  = "delete" // --dry-run: would be deleted
	actDeleted = "deleted"
)

// pruneItem is one version of `image prune --json`.
type pruneItem struct {
	Version string `json:"version"`
	State   string `json:"state"`
	Status  string `json:"status"`
	Action  string `json:"action"`
	Reason  string `json:"reason,omitempty"`
}

// pruneOut is `image prune --json`.
type pruneOut struct {
	ARN      string      `json:"arn"`
	DryRun   bool        `json:"dry_run"`
	Versions []pruneItem `json:"versions"`
}

func pruneCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:      "prune",
		Usage:     "delete an image's old versions, keeping the newest",
		ArgsUsage: "NAME|ARN",
		Description: "Keeps the --keep newest SUCCESSFUL versions and, always, the latest ACTIVE one (what\n" +
			"new sandboxes launch), and deletes the others one at a time, oldest first. Before each\n" +
			"deletion it waits while the image is busy (a deletion leaves it UPDATING for a few\n" +
			"seconds). A version any microVM still runs from (any state but TERMINATED) is skipped\n" +
			"and said so, and so is one still building. --dry-run prints the plan and deletes nothing.\n" +
			"Prints one line per version, oldest first: keep, skip, delete (--dry-run) or deleted.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "keep", HideDefault: true, Usage: "keep the `N` newest SUCCESSFUL versions (at least 1; required)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print what would be deleted, and delete nothing"},
			&cli.DurationFlag{Name: "wait-timeout", Value: 10 * time.Minute, Usage: "before each deletion, wait at most this `DURATION` for a busy image"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return cliutil.Usagef("prune takes one argument, the image NAME or ARN")
			}
			if !cmd.IsSet("keep") {
				return cliutil.Usagef("--keep is required: how many of the newest SUCCESSFUL versions to keep")
			}
			keep := int(cmd.Int("keep"))
			if keep < 1 {
				return cliutil.Usagef("--keep %d: keep at least 1 version", keep)
			}
			if cmd.Duration("wait-timeout") <= 0 {
				return cliutil.Usagef("--wait-timeout must be positive")
			}
			name := cmd.Args().First()
			if err := checkImageArg(name); err != nil {
				return err
			}
			p := pruner{keep: keep, dryRun: cmd.Bool("dry-run"), wait: cmd.Duration("wait-timeout"), json: cmd.Bool("json"), out: f.IO.Out, errw: f.IO.Err}
			return cliutil.Interrupted(ctx, p.run(ctx, name))
		},
	}
}

type pruner struct {
	keep   int
	dryRun bool
	wait   time.Duration
	json   bool
	out    io.Writer
	errw   io.Writer
	c      *microvms.Client
	arn    string
	items  []pruneItem
}

// plan decides, from the versions oldest first, which ones are kept and
// why; the rest are candidates (their reason is "").
func plan(vs []microvmsapi.MicrovmImageVersion, latestActive string, keep int) []pruneItem {
	items := make([]pruneItem, len(vs))
	for i, v := range vs {
		items[i] = pruneItem{Version: v.ImageVersion, State: string(v.State), Status: string(v.Status)}
	}
	if latestActive == "" {
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i].Launchable() {
				latestActive = vs[i].ImageVersion
				break
			}
		}
	}
	newest := fmt.Sprintf("one of the %d newest SUCCESSFUL", keep)
	if keep == 1 {
		newest = "the newest SUCCESSFUL"
	}
	kept := 0
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		switch {
		case v.State == microvmsapi.VersionSuccessful && kept < keep:
			kept++
			items[i].Action, items[i].Reason = actKeep, newest
			if v.ImageVersion == latestActive {
				items[i].Reason += ", latest ACTIVE"
			}
		case v.ImageVersion == latestActive:
			items[i].Action, items[i].Reason = actKeep, "latest ACTIVE"
		case v.State == microvmsapi.VersionPending || v.State == microvmsapi.VersionInProgress:
			items[i].Action, items[i].Reason = actSkip, "still building"
		case v.State == microvmsapi.VersionDeleting || v.State == microvmsapi.VersionDeleted:
			items[i].Action, items[i].Reason = actSkip, "already being deleted"
		}
	}
	return items
}

func (p *pruner) run(ctx context.Context, nameOrARN string) error {
	env, err := loadAWS(ctx)
	if err != nil {
		return err
	}
	p.c = env.MicroVMs
	if p.arn, err = resolveImage(ctx, p.c, env.Region, nameOrARN); err != nil {
		return err
	}
	img, err := p.c.GetMicrovmImage(ctx, p.arn)
	if err != nil {
		return err
	}
	vs, err := listVersions(ctx, p.c, p.arn)
	if err != nil {
		return err
	}
	items := plan(vs, img.LatestActiveImageVersion, p.keep)
	for i := range items {
		it := &items[i]
		if it.Action == "" {
			if err := p.settle(ctx, it); err != nil {
				p.items = append(p.items, items[:i]...)
				p.flush()
				return err
			}
		}
		if !p.json {
			p.line(*it)
		}
	}
	p.items = items
	return p.flush()
}

// settle deletes a candidate (or, with --dry-run, marks it), unless a
// microVM still runs from it.
func (p *pruner) settle(ctx context.Context, it *pruneItem) error {
	live, err := p.liveMicrovms(ctx, it.Version)
	if err != nil {
		return err
	}
	if live > 0 {
		it.Action, it.Reason = actSkip, fmt.Sprintf("in use by %d microVM%s", live, plural(live))
		return nil
	}
	if p.dryRun {
		it.Action, it.Reason = actDelete, "dry run: not deleted"
		return nil
	}
	for attempt := 1; ; attempt++ {
		if err := p.waitIdle(ctx); err != nil {
			return err
		}
		_, err := p.c.DeleteMicrovmImageVersion(ctx, p.arn, it.Version)
		switch {
		case err == nil, errors.Is(err, microvms.ErrNotFound):
			it.Action = actDeleted
			return nil
		case errors.Is(err, microvms.ErrConflict) && attempt < 5:
			continue // the image got busy again: wait once more
		}
		return fmt.Errorf("delete version %s: %w", it.Version, err)
	}
}

// liveMicrovms counts the microVMs of the version that are not
// TERMINATED.
func (p *pruner) liveMicrovms(ctx context.Context, version string) (int, error) {
	n := 0
	for vm, err := range p.c.ListAll(ctx, microvms.ListInput{ImageIdentifier: p.arn, ImageVersion: version}) {
		if err != nil {
			return 0, err
		}
		if vm.State != microvmsapi.StateTerminated {
			n++
		}
	}
	return n, nil
}

// waitIdle re-reads the image and waits, with back-off, while it is busy.
func (p *pruner) waitIdle(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, p.wait)
	defer cancel()
	var (
		b    backoff
		said microvmsapi.ImageState
	)
	for {
		img, err := p.c.GetMicrovmImage(wctx, p.arn)
		if err == nil && !busy(img.State) {
			return nil
		}
		if err == nil {
			if img.State != said {
				said = img.State
				fmt.Fprintf(p.errw, "the image is %s: waiting before the next deletion\n", img.State)
			}
			err = b.wait(wctx)
		}
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return cli.Exit(fmt.Sprintf("the image stayed busy for more than %s (--wait-timeout); nothing more was deleted", p.wait), cliutil.ExitTimeout)
			}
			return err
		}
	}
}

func (p *pruner) line(it pruneItem) {
	status := it.Status
	if status == "" {
		status = "-"
	}
	reason := ""
	if it.Reason != "" {
		reason = "  (" + it.Reason + ")"
	}
	fmt.Fprintf(p.out, "%-7s  %s  %s %s%s\n", it.Action, it.Version, it.State, status, reason)
}

// flush prints --json (the versions settled so far, when an error
// stopped the run).
func (p *pruner) flush() error {
	if !p.json {
		return nil
	}
	items := slices.Clone(p.items)
	if items == nil {
		items = []pruneItem{}
	}
	return cliutil.PrintJSON(p.out, pruneOut{ARN: p.arn, DryRun: p.dryRun, Versions: items})
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
