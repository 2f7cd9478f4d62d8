package daemon

import (
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/rayd/internal/lifeevents"
)

// imageARNEnv names the variable that tells rayd the image it runs (the
// image ARN its lifecycle events carry); unset: events carry none.
const imageARNEnv = "RAYITO_IMAGE_ARN"

// wireEvents builds the lifecycle event emitter: lines on cfg.EventsOut
// (Main: rayd's stdout, where rayd's own logs never go: they are JSON
// records on stderr), once ConfigureService installs a key.
func (d *Daemon) wireEvents(cfg Config, log *slog.Logger) {
	if cfg.EventsOut == os.Stdout {
		catchSIGPIPE()
	}
	d.events = lifeevents.New(lifeevents.Options{Out: cfg.EventsOut, SandboxID: d.State.SandboxID, ImageARN: cfg.ImageARN, Logger: log})
}

// endEvents is the end of the sandbox as rayd sees it: killed (unknown
// when neither /terminate nor the timeout said why) and the last lines
// written, bounded.
func (d *Daemon) endEvents() {
	d.events.Killed(events.KillUnknown)
	if !d.events.Flush(eventsFlushWait) {
		d.log.Warn("lifecycle events: stdout did not drain before rayd stopped; the last event lines are lost")
	}
	if n := d.events.Dropped(); n > 0 {
		d.log.Warn("lifecycle events: lines dropped because stdout did not drain", "dropped", n)
	}
}

var sigpipeOnce sync.Once

// catchSIGPIPE makes a write to a closed stdout fail with EPIPE instead of
// killing rayd (Go's default for descriptors 1 and 2). Caught, not
// ignored: the processes rayd starts get the default disposition back at
// exec.
func catchSIGPIPE() {
	sigpipeOnce.Do(func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGPIPE)
		go func() {
			for range c {
			}
		}()
	})
}
