package daemon

import (
	"context"
	"log/slog"
	"sync"

	"github.com/rayito-dev/rayito/rayd/internal/launch"
	"github.com/rayito-dev/rayito/rayd/internal/sudo"
)

// sudoFields are the daemon's sudo (package sudo): served only where
// root is allowed (RAYITO_ALLOW_ROOT=1, rayd as root) and the platform
// named its socket (-sudo-socket).
type sudoFields struct {
	sudo     *sudo.Server // nil: no sudo
	sudoPath string
}

// wireSudo makes the sudo server when this sandbox has one.
func (d *Daemon) wireSudo(cfg Config, builder *launch.Builder, log *slog.Logger) {
	if !cfg.AllowRoot || !d.privileged || cfg.SudoSocket == "" {
		return
	}
	d.sudo = &sudo.Server{State: d.State, Sup: d.Supervisor, Builder: builder, Log: log}
	d.sudoPath = cfg.SudoSocket
}

// serveSudo listens on the sudo socket and serves it until ctx ends. A
// socket that cannot be made leaves the sandbox without sudo, which its
// client then says; rayd serves on.
func (d *Daemon) serveSudo(ctx context.Context, wg *sync.WaitGroup) {
	if d.sudo == nil {
		return
	}
	ln, err := sudo.Listen(d.sudoPath)
	if err != nil {
		d.log.Error("sudo off: cannot make its socket", "err", err)
		return
	}
	d.log.Info("sudo served (root allowed)", "socket", d.sudoPath)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.sudo.Serve(ctx, ln); err != nil {
			d.log.Error("sudo stopped", "err", err)
		}
	}()
}
