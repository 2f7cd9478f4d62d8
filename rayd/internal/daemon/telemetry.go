package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/metrics"
	"github.com/rayito-dev/rayito/rayd/internal/telemetry"
)

// telemetryFlushWait bounds the metrics export's flush at /suspend.
const telemetryFlushWait = 2 * time.Second

// wireTelemetry builds the metrics exporter the telemetry_export section
// configures. It samples through the daemon's sampler (made later in New,
// read at each sample). The execution role cannot sign exports here yet:
// that auth answers UNSUPPORTED no_execution_role (docs/telemetry.md).
func (d *Daemon) wireTelemetry(log *slog.Logger) {
	d.telemetry = telemetry.New(telemetry.Options{
		Sample: func(ctx context.Context) (metrics.Sample, error) {
			return d.sampler.Current(ctx)
		},
		SandboxID: d.State.SandboxID,
		Logger:    log,
	})
}

// flushTelemetry sends the queued metrics and a last sample before the
// sandbox freezes, within telemetryFlushWait.
func (d *Daemon) flushTelemetry(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, telemetryFlushWait)
	defer cancel()
	d.telemetry.Flush(ctx)
}
