package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// minMetricsInterval bounds --interval from below.
const minMetricsInterval = time.Second

// metricsOut is one sample in --json output (one JSON object per line).
type metricsOut struct {
	Time       time.Time `json:"time"`
	CPUPercent float64   `json:"cpu_percent"`
	CPUCount   int       `json:"cpu_count"`
	MemUsed    uint64    `json:"mem_used_bytes"`
	MemTotal   uint64    `json:"mem_total_bytes"`
	MemCache   uint64    `json:"mem_cache_bytes"`
	DiskUsed   uint64    `json:"disk_used_bytes"`
	DiskTotal  uint64    `json:"disk_total_bytes"`
	Processes  int       `json:"processes"`
	Tasks      int       `json:"tasks"`
}

func metricsCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "metrics",
		Usage: "show a sandbox's CPU, memory, disk and process counts",
		Description: "--follow prints a sample every --interval until the sandbox ends or Ctrl-C; while the\n" +
			"sandbox is paused it waits without waking it (but each sample crosses the sandbox's\n" +
			"endpoint, so a followed sandbox does not go idle). --json prints one JSON object per line.",
		ArgsUsage:     "ID",
		ShellComplete: completeIDs(f, firstArg),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing samples"},
			&cli.DurationFlag{Name: "interval", Value: 5 * time.Second, Usage: "`DURATION` between samples with --follow (at least 1s)"},
			tokenFlag(),
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 1, "the sandbox id"); err != nil {
				return err
			}
			if cmd.Args().Len() > 1 {
				return cliutil.Usagef("metrics takes one sandbox id, got %d arguments", cmd.Args().Len())
			}
			every := cmd.Duration("interval")
			if every < minMetricsInterval {
				return cliutil.Usagef("--interval must be at least 1s, got %s", every)
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			sbx, err := connect(ctx, cmd, f)
			if err != nil {
				return cliutil.Interrupted(ctx, err)
			}
			p := &metricsPrinter{w: f.IO.Out, json: cmd.Bool("json")}
			if !cmd.Bool("follow") {
				m, err := sbx.Metrics(ctx)
				if err != nil {
					return cliutil.OnSandbox(sbx.ID(), err)
				}
				return p.print(m)
			}
			err = followMetrics(ctx, sbx, every, p, f.IO.Err)
			if ctx.Err() != nil {
				return nil // Ctrl-C ends --follow
			}
			return cliutil.OnSandbox(sbx.ID(), err)
		},
	}
}

// followMetrics prints a sample every interval until ctx ends or the
// sandbox ends (its *SandboxEndedError). When a sample fails the control
// plane says why; a paused sandbox is then waited for through it alone
// (Info does not reach a sandbox that is not running), with one line on
// stderr.
func followMetrics(ctx context.Context, sbx *rayito.Sandbox, every time.Duration, p *metricsPrinter, stderr io.Writer) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	wait := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			return nil
		}
	}
	for {
		m, err := sbx.Metrics(ctx)
		if err == nil {
			if err := p.print(m); err != nil {
				return err
			}
			if err := wait(); err != nil {
				return err
			}
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for announced := false; ; announced = true {
			state, end := stateOf(ctx, sbx)
			if end != nil {
				return end
			}
			if state != microvmsapi.StateSuspended && state != microvmsapi.StateSuspending {
				if !announced {
					return err // running, yet no sample: the sample's error
				}
				break
			}
			if !announced {
				fmt.Fprintln(stderr, "rayito: sandbox "+sbx.ID()+" is paused; waiting for it to resume")
			}
			if err := wait(); err != nil {
				return err
			}
		}
	}
}

// stateOf is the sandbox's state as the control plane reports it, or its
// end (a *SandboxEndedError, or the control plane's error). Info reaches
// the sandbox only when it runs.
func stateOf(ctx context.Context, sbx *rayito.Sandbox) (microvmsapi.State, error) {
	in, err := sbx.Info(ctx)
	switch {
	case errors.Is(err, rayito.ErrNotFound):
		return "", &rayito.SandboxEndedError{ID: sbx.ID(), Reason: rayito.EndUnknown}
	case err != nil:
		return "", err
	case in.EndReason != "":
		return "", &rayito.SandboxEndedError{ID: in.ID, EndedAt: in.EndedAt, Reason: in.EndReason, Detail: in.EndDetail}
	}
	return microvmsapi.State(in.State), nil
}

// metricsPrinter prints samples as a table (its header once) or as JSON
// lines.
type metricsPrinter struct {
	w      io.Writer
	json   bool
	header bool
}

// metricsRow lays out the table's columns.
const metricsRow = "%-8s  %-12s  %-21s  %-21s  %s\n"

func (p *metricsPrinter) print(m *rayito.Metrics) error {
	if p.json {
		b, err := json.Marshal(metricsOut{Time: m.Time, CPUPercent: m.CPUPercent, CPUCount: m.CPUCount,
			MemUsed: m.MemUsed, MemTotal: m.MemTotal, MemCache: m.MemCache, DiskUsed: m.DiskUsed, DiskTotal: m.DiskTotal,
			Processes: m.Processes, Tasks: m.Tasks})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	if !p.header {
		p.header = true
		fmt.Fprintf(p.w, metricsRow, "TIME", "CPU", "MEMORY", "DISK", "PROCESSES")
	}
	at := m.Time
	if at.IsZero() {
		at = time.Now()
	}
	// PROCESSES is every process of the sandbox but its daemon (what
	// ps would list besides it), background ones included.
	_, err := fmt.Fprintf(p.w, metricsRow, at.Local().Format(time.TimeOnly), fmt.Sprintf("%.1f%% of %d", m.CPUPercent, m.CPUCount),
		bytesText(m.MemUsed)+" / "+bytesText(m.MemTotal), bytesText(m.DiskUsed)+" / "+bytesText(m.DiskTotal), fmt.Sprint(m.Processes))
	return err
}

// bytesText is n in binary units: "512 MiB", "1.5 GiB".
func bytesText(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	if v >= 100 || v == float64(uint64(v)) {
		return fmt.Sprintf("%.0f %ciB", v, "KMGTP"[exp])
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[exp])
}
