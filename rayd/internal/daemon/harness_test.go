package daemon

import (
	"os"
	"testing"

	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// The daemon's own tests (flags, listeners, auth, events, lifecycle,
// suspend...) run inside the package for its unexported parts; the
// services' tests live beside each service on package daemontest.

func TestMain(m *testing.M) {
	if os.Getenv(lateSignalEnv) == "1" {
		lateSignalChild()
	}
	if os.Getenv(listenChildEnv) == "1" {
		listenChild()
	}
	raydtest.Main(m)
}

// harness is a real rayd (real handlers, the test binary's supervisor,
// real listeners on loopback) for one test, with the daemon's unexported
// parts at hand.
type harness struct {
	*raydtest.Harness
	t *testing.T
	d *Daemon
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, nil) }

// newHarnessWith is newHarness with the Config (test knobs included)
// adjusted by configure before rayd is built.
func newHarnessWith(t *testing.T, configure func(*Config)) *harness {
	t.Helper()
	// The harness runs rayd in the test's own network namespace: the
	// network stays off unless a test gives rayd a namespace of its own.
	cfg := Config{StateDir: t.TempDir(), Egress: EgressOff}
	if configure != nil {
		configure(&cfg)
	}
	d, err := New(cfg, raydtest.Logger(), raydtest.Supervisor())
	if err != nil {
		t.Fatal(err)
	}
	h := raydtest.Start(t, cfg.StateDir, func(stop func()) raydtest.Server {
		d.onTerminated = stop
		return d
	})
	return &harness{Harness: h, t: t, d: d}
}
