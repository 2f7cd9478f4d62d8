package sandbox

import (
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// persistOut is a checkpoint or restore in --json output.
type persistOut struct {
	ID           string         `json:"id"`
	Name         string         `json:"name"`
	SHA256       string         `json:"sha256"`
	Bytes        int64          `json:"bytes"`
	Files        uint64         `json:"files"`
	Directories  uint64         `json:"directories"`
	Symlinks     uint64         `json:"symlinks"`
	ContentBytes uint64         `json:"content_bytes"`
	Skipped      map[string]any `json:"skipped"`
	DurationMs   int64          `json:"duration_ms"`
}

func persistOutOf(id string, i *rayito.CheckpointInfo) persistOut {
	k := i.Skipped
	skipped := map[string]any{}
	for name, n := range map[string]uint64{"special": k.Special, "hard_links": k.HardLinks, "unreadable": k.Unreadable,
		"other_device": k.OtherDevice, "conflicts": k.Conflicts, "other": k.Other, "modes_sanitized": k.ModesSanitized, "changed": k.Changed} {
		if n > 0 {
			skipped[name] = n
		}
	}
	return persistOut{ID: id, Name: i.Name, SHA256: i.SHA256, Bytes: i.Bytes, Files: i.Files, Directories: i.Directories,
		Symlinks: i.Symlinks, ContentBytes: i.ContentBytes, Skipped: skipped, DurationMs: i.Duration.Milliseconds()}
}

// locationFlags name a checkpoint's place: --at (default: the sandbox's
// own, the one it is bound to), --name, --region.
func locationFlags(at string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: at, Usage: "the checkpoint's place, `s3://BUCKET/PREFIX` (s3:///PREFIX: the local platform's bucket); default: the one the sandbox was created with (--persist)"},
		&cli.StringFlag{Name: "name", Usage: "the checkpoint's `NAME` under the prefix (default: the one the sandbox last used, else default)"},
		&cli.StringFlag{Name: "region", Usage: "the bucket's `REGION` (default: the sandbox's)"},
	}
}

// location reads locationFlags: nil for the sandbox's own place (its
// name then comes from rayd, unless --name).
func location(cmd *cli.Command, at string) (*rayito.S3Prefix, error) {
	s := cmd.String(at)
	if s == "" {
		if cmd.IsSet("name") || cmd.IsSet("region") {
			return nil, cliutil.Usagef("--name and --region go with --%s (a sandbox's own place keeps the name it uses)", at)
		}
		return nil, nil
	}
	p, err := rayito.ParseS3Prefix(s)
	if err != nil {
		return nil, cliutil.Usagef("--%s: %s", at, cliutil.Describe(err))
	}
	p.Name, p.Region = cmd.String("name"), cmd.String("region")
	return &p, nil
}

// progress shows a checkpoint's or restore's bytes on stderr when it is a
// terminal (and not --json): a bar when the size is known, else a
// counter. done clears it.
func progress(cmd *cli.Command, f *cliutil.Factory, what string) (fn func(rayito.PersistProgress), done func()) {
	if cmd.Bool("json") || !cliutil.IsTerminal(f.IO.Err) {
		return nil, func() {}
	}
	var bar *progressbar.ProgressBar
	fn = func(p rayito.PersistProgress) {
		if bar == nil {
			total := p.Total
			if total <= 0 {
				total = -1
			}
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(f.IO.Err), progressbar.OptionSetDescription(what),
				progressbar.OptionShowBytes(true), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSpinnerType(14))
		}
		_ = bar.Set64(p.Bytes)
	}
	return fn, func() {
		if bar != nil {
			_ = bar.Finish()
		}
	}
}
