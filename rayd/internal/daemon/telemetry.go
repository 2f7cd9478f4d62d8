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
// read at each sample). The execution role signs with the credentials of
// the metadata service persistence uses (the platform's socket on the
// local platform).
func (d *Daemon) wireTelemetry(cfg Config, log *slog.Logger) {
	pc := persistConfig(cfg)
	d.telemetry = telemetry.New(telemetry.Options{
		Signer: telemetry.NewRoleSigner(telemetry.RoleOptions{IMDSEndpoint: pc.IMDSEndpoint, Dial: pc.Dial}),
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
