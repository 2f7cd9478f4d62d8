// Package daemontest runs a real rayd (package daemon's Daemon: real
// handlers, the test binary's supervisor, listeners on loopback) for the
// tests of rayd's services, which live beside each service in an
// external test package (package files_test and so on):
//
//	func TestMain(m *testing.M) { raydtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		h := daemontest.New(t)
//		h.Run(nil)
//		c := h.Files()
//		...
//	}
//
// Only tests import it (raydtest.TestOnlyTestsImport checks).
package daemontest

import (
	"testing"

	"github.com/rayito-dev/rayito/rayd/internal/daemon"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// Harness is a served rayd for one test: raydtest's harness (URLs,
// token, clients, hooks) and the daemon itself.
type Harness struct {
	*raydtest.Harness
	// Daemon is the wired rayd (its services, supervisor and state).
	Daemon *daemon.Daemon
}

// New serves a rayd with the default test configuration: a fresh state
// directory and the network left alone (EgressOff).
func New(t *testing.T) *Harness { return NewWith(t, nil) }

// NewWith is New with the configuration (test knobs included: see
// daemon.Config.SetTestKnobs) adjusted by configure before rayd is built.
func NewWith(t *testing.T, configure func(*daemon.Config)) *Harness {
	t.Helper()
	// The harness runs rayd in the test's own network namespace: the
	// network stays off unless a test gives rayd a namespace of its own.
	cfg := daemon.Config{StateDir: t.TempDir(), Egress: daemon.EgressOff}
	if configure != nil {
		configure(&cfg)
	}
	d, err := daemon.New(cfg, raydtest.Logger(), raydtest.Supervisor())
	if err != nil {
		t.Fatal(err)
	}
	h := raydtest.Start(t, cfg.StateDir, func(stop func()) raydtest.Server {
		d.SetOnTerminated(stop)
		return d
	})
	return &Harness{Harness: h, Daemon: d}
}
