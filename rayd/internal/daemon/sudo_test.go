package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// rayd serves sudo only where root is allowed (RAYITO_ALLOW_ROOT) and the
// platform named its socket: in any other sandbox there is no socket for
// the client to reach, so nothing of it can lift a process to root.
func TestSudoOnlyWhereRootIsAllowed(t *testing.T) {
	raydtest.RequireRoot(t)
	for _, c := range []struct {
		allowRoot, served bool
	}{{false, false}, {true, true}} {
		socket := filepath.Join(t.TempDir(), "rayito", "sudo.sock")
		h := newHarnessWith(t, func(cfg *Config) { cfg.AllowRoot, cfg.SudoSocket = c.allowRoot, socket })
		h.Run(nil)
		var err error
		for range 100 {
			if _, err = os.Stat(socket); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if served := err == nil; served != c.served {
			t.Errorf("root allowed %v: socket served %v (%v)", c.allowRoot, served, err)
		}
		if got := h.Health().GetRootAllowed(); got != c.allowRoot {
			t.Errorf("root allowed %v: Health.root_allowed %v", c.allowRoot, got)
		}
		h.Stop()
	}
}
