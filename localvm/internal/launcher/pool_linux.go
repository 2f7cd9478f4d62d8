package launcher

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/rayito-dev/rayito/localvm/internal/hostnet"
)

// A platform's pool of pre-booted sandboxes (see package registry) takes
// sandboxes launched with no Internet access and the default limits, under
// a microVM id nobody has seen yet, and hands each out once, to one
// request: Assign then gives it that request's egress and limits. Nothing
// of a pooled sandbox is shared with any other: each one is launched
// individually (its own namespaces, cgroup, veth, /30, uid block and
// files), nothing is cloned.

// PoolSupport reports whether sandboxes can be launched ahead of the
// requests they are handed out for: nil for privileged sandboxes (their
// egress is nftables rules and their limits cgroup files, both set from
// outside at any time), otherwise an error wrapping ErrNoPool that says
// why not (a rootless sandbox's Internet access is a slirp4netns started
// with it, and it has no cgroup).
func (l *Launcher) PoolSupport() error {
	switch {
	case l.priv && l.cgErr == nil:
		return nil
	case l.priv:
		return fmt.Errorf("%w, and this platform has no usable cgroups", ErrNoPool)
	case l.rootless:
		return fmt.Errorf("%w: this platform runs %s", ErrNoPool, IsolationRootless)
	}
	return fmt.Errorf("%w: this platform runs unisolated", ErrNoPool)
}

// Assign applies a's egress and limits to a sandbox launched for the
// pool (see Instance.Assign).
func (i *instance) Assign(ctx context.Context, a Assignment) error {
	if !i.rec.Privileged || i.l.cg == nil {
		return fmt.Errorf("launcher: assigning sandbox %s: %w", i.rec.ID, ErrNotPrivileged)
	}
	if a.MemoryBytes < 0 || a.PidsMax < 0 {
		return errors.New("launcher: negative limits")
	}
	mem, pids := a.MemoryBytes, a.PidsMax
	if mem == 0 {
		mem = DefaultMemoryBytes
	}
	if pids == 0 {
		pids = DefaultPidsMax
	}
	i.termMu.Lock() // not while Terminate removes the cgroups and rules
	defer i.termMu.Unlock()
	if i.cleaned || !i.alive() {
		return fmt.Errorf("launcher: assigning sandbox %s: %w", i.rec.ID, ErrGone)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if mem != i.memBytes || pids != i.pidsMax {
		return fmt.Errorf("%w (memory %d, pids %d)", ErrAssignLimits, i.memBytes, i.pidsMax)
	}
	if a.Internet != i.rec.Internet && !a.Internet {
		return fmt.Errorf("launcher: sandbox %s has Internet access, which cannot be taken away", i.rec.ID)
	}
	if err := i.l.cg.WriteLimits(i.rec.ID, mem, pids); err != nil {
		return err
	}
	if a.Internet && !i.rec.Internet {
		guest, err := netip.ParseAddr(i.rec.GuestIP)
		if err != nil {
			return fmt.Errorf("launcher: sandbox %s: bad guest address", i.rec.ID)
		}
		if err := hostnet.EnableForwarding(); err != nil {
			return err
		}
		// A fresh id: no rule of it can exist yet.
		if err := i.l.fw.Install(i.rec.ID, i.rec.Veth, guest, true, true); err != nil {
			return err
		}
		i.rec.Internet = true
	}
	return nil
}

// Conntrack. What a sandbox leaves in the kernel's connection tracking
// table (its NATed flows to the Internet, the platform's connections to
// its rayd) must not apply to the next sandbox that gets its address: the
// firewall's "ct state established" rules accept replies before any
// per-sandbox rule is looked at. So Terminate deletes the entries of the
// sandbox's address before its veth goes (flushConntrack: two dumps the
// kernel filters, about 10 ms each here), and Sweep, at start-up, those of
// every address of the subnet no sandbox has now (sweepConntrack: one
// full dump), what a killed platform or a sandbox whose network namespace
// vanished with its rayd left. Launches need not look: every free address
// is clean. A failure is logged (once per launcher) and fails nothing:
// the entries expire by themselves, and a machine whose conntrack table
// cannot be edited must still run sandboxes.

// flushConntrack deletes the conntrack entries whose original source or
// destination is addr.
func (l *Launcher) flushConntrack(addr netip.Addr) {
	l.conntrackFailed(hostnet.FlushConntrack(addr))
}

func (l *Launcher) conntrackFailed(err error) {
	if err != nil {
		l.ctOnce.Do(func() {
			l.log.Warn("launcher: cannot delete a sandbox address's conntrack entries: they expire by themselves, meanwhile replies to a former sandbox's flows could reach the next one with its address", "err", err.Error())
		})
	}
}

// sweepConntrack deletes the conntrack entries whose original source or
// destination lies in the launcher's subnet, in a /30 that no sandbox
// (of any platform: its host side is an address of the host) or launch
// of this launcher holds.
func (l *Launcher) sweepConntrack() {
	host, err := l.net.HostAddrs()
	if err != nil {
		l.conntrackFailed(err)
		return
	}
	l.mu.Lock()
	held := map[netip.Prefix]bool{}
	for slot := range l.slots {
		held[slot] = true
	}
	l.mu.Unlock()
	for _, a := range host {
		if l.subnet.Contains(a) {
			p, _ := a.Prefix(30)
			held[p] = true
		}
	}
	stale := func(a netip.Addr) bool {
		if !l.subnet.Contains(a) {
			return false
		}
		p, _ := a.Prefix(30)
		return !held[p]
	}
	if err := hostnet.SweepConntrack(stale); err != nil {
		l.conntrackFailed(fmt.Errorf("launcher: conntrack: sweeping the entries of %s: %w", l.subnet, err))
	}
}
