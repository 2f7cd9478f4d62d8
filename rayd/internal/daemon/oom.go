package daemon

import (
	"fmt"
	"log/slog"

	"github.com/rayito-dev/rayito/rayd/internal/oomcount"
)

// checkMemoryEventsFD validates -memory-events-fd like -ready-fd: -1 (none)
// or a descriptor above 2, distinct from the other descriptors.
func (c Config) checkMemoryEventsFD() error {
	fd := c.MemoryEventsFD
	if fd != -1 && fd < 3 {
		return fmt.Errorf("-memory-events-fd must be -1 or a descriptor above 2, not %d", fd)
	}
	if fd > 2 && (fd == c.ReadyFD || fd == c.HooksFD) {
		return fmt.Errorf("-memory-events-fd is the same descriptor (%d) as -ready-fd or -hooks-fd", fd)
	}
	return nil
}

// oomCounter returns how the supervisor reads the sandbox's OOM kill count
// (proc.Options.OOMKills): the cgroup file of -memory-events-fd; without
// it, on a microVM (no -isolation: the whole kernel is the sandbox's),
// /proc/vmstat; otherwise nil, and no process is ever reported oom_killed.
// The file stays open for rayd's life.
func oomCounter(cfg Config, log *slog.Logger) (func() (uint64, bool), error) {
	switch {
	case cfg.MemoryEventsFD > 2:
		c, err := oomcount.FromFD(cfg.MemoryEventsFD)
		if err != nil {
			return nil, fmt.Errorf("-memory-events-fd: %w", err)
		}
		return c.Read, nil
	case cfg.Isolation == "":
		c, err := oomcount.Open(oomcount.VMStat)
		if err != nil {
			log.Warn("no OOM kill count in /proc/vmstat: processes the OOM killer ends are reported signaled", "err", err)
			return nil, nil
		}
		return c.Read, nil
	}
	return nil, nil
}
