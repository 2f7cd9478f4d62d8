package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/rootfs"
)

// Internet access of rootless sandboxes: slirp4netns, a user-space network
// stack (the one rootless podman uses), run as the launcher's own user.
// It joins the sandbox's user and network namespaces, creates tap0 there
// (10.0.2.100/24, default route through 10.0.2.2, MTU 65520) and carries
// the sandbox's TCP and UDP through ordinary sockets of its own in the
// host's network namespace.
//
//   - --disable-host-loopback: 10.0.2.2 does not lead to the host's
//     127.0.0.1 (the host's loopback services stay out of reach).
//   - slirp4netns has no firewall: the init adds "prohibit" routes in the
//     sandbox's network namespace, before it drops its capabilities, for
//     169.254.0.0/16 (link-local: cloud metadata services) and for each
//     IPv4 address of the host at launch time (services the host binds to
//     0.0.0.0). The sandbox's code holds no capability in its namespace and
//     cannot remove them.
//   - --enable-seccomp limits slirp4netns's system calls. --enable-sandbox
//     (a mount namespace of its own) cannot be used: it needs uid and gid 0
//     mapped in the sandbox's user namespace, which maps only the caller's
//     id (it fails with "setegid(0)").
//   - DNS: the sandbox's resolv.conf names 10.0.2.3, which slirp4netns
//     forwards to the host's resolver.
//
// Lifetime: slirp4netns exits when its exit pipe (--exit-fd) hangs up.
// The write end is handed to the sandbox's init with the go byte and kept,
// close-on-exec, by rayd (PID 1 of the sandbox): slirp4netns lives exactly
// as long as the sandbox, whether or not the platform that launched it
// still runs, and a platform that restarts finds it (Record.SlirpPid) and
// adopts it. If it is gone by then, Adopt starts a new one, whose exit pipe
// the launcher holds (it then lasts until the sandbox ends or the platform
// stops). Terminate kills it and waits for it (and reaps it when it is the
// launcher's child).

// slirpBinary is the user-space network stack, found in PATH; the Debian
// and Ubuntu package has the same name.
const (
	slirpBinary  = "slirp4netns"
	slirpPackage = "slirp4netns"
	slirpTap     = "tap0"
	slirpMTU     = 65520
	slirpDNS     = "10.0.2.3"
	slirpLogName = "slirp.log" // in the launcher directory
	tunDevice    = "/dev/net/tun"
)

// slirpNetwork is slirp4netns's default network: the host addresses inside
// it are not blocked (slirp4netns answers them itself).
var slirpNetwork = netip.MustParsePrefix("10.0.2.0/24")

// linkLocal holds the cloud metadata services (169.254.169.254).
var linkLocal = netip.MustParsePrefix("169.254.0.0/16")

// slirpPath finds slirp4netns and checks that this user may open the tun
// device; the error says what to install or change.
func (l *Launcher) slirpPath() (string, error) {
	path, err := exec.LookPath(slirpBinary)
	if l.opts.noSlirp {
		err = exec.ErrNotFound
	}
	if err != nil {
		// Short: the platform keeps 240 characters of a launch error.
		return "", fmt.Errorf("%w: Internet access without root needs %s (package %s), not found in PATH: install it, run as root, or use --no-internet", ErrNeedsPrivilege, slirpBinary, slirpPackage)
	}
	fd, err := unix.Open(tunDevice, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("%w: Internet access without root needs %s usable by this user for %s (%w; udev makes it 0666): run as root, or use --no-internet", ErrNeedsPrivilege, tunDevice, slirpBinary, err)
	}
	unix.Close(fd)
	return path, nil
}

// slirpArgs are slirp4netns's arguments for the init pid: ready on fd 3,
// exit when fd 4 hangs up. The pid form, not --netns-type=path: the
// launcher holds the init unreaped (its pid cannot be reused) and
// slirp4netns then joins the init's user namespace itself.
func slirpArgs(pid int) []string {
	return []string{
		"--configure", "--mtu=" + strconv.Itoa(slirpMTU), "--disable-host-loopback", "--enable-seccomp",
		"--ready-fd=3", "--exit-fd=4", strconv.Itoa(pid), slirpTap,
	}
}

// slirpRejects are the destinations the sandbox must not reach through
// slirp4netns: link-local, and each IPv4 address of the host.
func slirpRejects() []string {
	out := []string{linkLocal.String()}
	addrs, _ := net.InterfaceAddrs()
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if !ip.Is4() || ip.IsLoopback() || linkLocal.Contains(ip) || slirpNetwork.Contains(ip) || seen[ip] {
			continue
		}
		seen[ip] = true
		out = append(out, netip.PrefixFrom(ip, 32).String())
	}
	return out
}

// slirp is the slirp4netns of one rootless sandbox.
type slirp struct {
	pid   int
	start uint64
	cmd   *exec.Cmd     // the launcher's child; nil when adopted
	done  chan struct{} // closed once it has exited (and been reaped, if ours)

	mu    sync.Mutex
	pidfd int      // adopted: a pidfd until it exits, else -1
	exitW *os.File // the exit pipe's write end, while the launcher holds it
}

// startSlirp starts slirp4netns for the network namespace of the init pid
// and waits until it has configured tap0. The caller owns the returned
// exit pipe's write end: slirp4netns exits once every copy of it is
// closed. Its output goes to the launcher directory ld.
func startSlirp(ctx context.Context, bin string, pid int, ld string) (sl *slirp, exitW *os.File, err error) {
	logPath := filepath.Join(ld, slirpLogName)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("launcher: %s log: %w", slirpBinary, err)
	}
	defer logf.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer readyR.Close()
	defer readyW.Close()
	exitR, exitW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer exitR.Close()
	cmd := exec.Command(bin, slirpArgs(pid)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{readyW, exitR} // fds 3 and 4
	// A session of its own: a signal to the platform's terminal does not
	// reach it; it ends with the sandbox (exit pipe).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	markCloexec()
	if err := cmd.Start(); err != nil {
		exitW.Close()
		return nil, nil, fmt.Errorf("launcher: starting %s: %w", slirpBinary, err)
	}
	readyW.Close()
	exitR.Close()
	sl = &slirp{pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{}), pidfd: -1}
	_, sl.start, _ = procStat(sl.pid)
	go func() {
		_ = cmd.Wait()
		close(sl.done)
	}()
	fail := func(err error) (*slirp, *os.File, error) {
		exitW.Close()
		_ = sl.stop(time.Now().Add(5 * time.Second))
		return nil, nil, fmt.Errorf("launcher: %s: %w%s", slirpBinary, err, logTail(logPath))
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = readyR.SetReadDeadline(dl)
	}
	var b [1]byte
	if n, err := readyR.Read(b[:]); n != 1 {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fail(errors.New("not ready in time"))
		case err == io.EOF:
			<-sl.done
			return fail(fmt.Errorf("exited before it was ready (%s)", cmd.ProcessState))
		}
		return fail(fmt.Errorf("waiting until it is ready: %w", err))
	}
	return sl, exitW, nil
}

// logTail is ": " and the last line of slirp4netns's log, for errors.
func logTail(path string) string {
	b, err := rootfs.ReadLimited(path, 64<<10)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || lines[len(lines)-1] == "" {
		return ""
	}
	last := lines[len(lines)-1]
	if len(lines) > 1 {
		last = lines[len(lines)-2] + "; " + last
	}
	if len(last) > 300 {
		last = last[len(last)-300:]
	}
	return ": " + last
}

// adoptSlirp takes over the slirp4netns a previous platform started, when
// pid is still that process. nil when it is gone.
func adoptSlirp(pid int, start uint64) *slirp {
	if pid <= 1 || !isSlirp(pid) {
		return nil
	}
	fd, err := openPidfd(pid, start)
	if err != nil {
		return nil
	}
	sl := &slirp{pid: pid, start: start, done: make(chan struct{}), pidfd: fd}
	go func() {
		if !waitPidfd(fd) {
			for sameProcess(pid, start) {
				time.Sleep(200 * time.Millisecond)
			}
		}
		sl.mu.Lock()
		unix.Close(sl.pidfd)
		sl.pidfd = -1
		sl.mu.Unlock()
		close(sl.done)
	}()
	return sl
}

// isSlirp reports whether pid runs slirp4netns (a record names it: never
// signal another process of the user).
func isSlirp(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.TrimSpace(string(b)) == slirpBinary
}

// hold keeps the exit pipe's write end (a slirp4netns started for an
// adopted sandbox): stop closes it.
func (s *slirp) hold(exitW *os.File) {
	s.mu.Lock()
	s.exitW = exitW
	s.mu.Unlock()
}

// release closes the exit pipe's write end the launcher holds, if any.
func (s *slirp) release() {
	s.mu.Lock()
	if s.exitW != nil {
		s.exitW.Close()
		s.exitW = nil
	}
	s.mu.Unlock()
}

// stop kills slirp4netns and waits until deadline for it to exit (and be
// reaped, when it is the launcher's child). Idempotent.
func (s *slirp) stop(deadline time.Time) error {
	s.release()
	select {
	case <-s.done:
		return nil
	default:
	}
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
	} else {
		s.mu.Lock()
		if s.pidfd >= 0 {
			_ = unix.PidfdSendSignal(s.pidfd, unix.SIGKILL, nil, 0)
		}
		s.mu.Unlock()
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-s.done:
		return nil
	case <-t.C:
		return fmt.Errorf("launcher: %s (pid %d) still running after SIGKILL", slirpBinary, s.pid)
	}
}

// restartSlirp starts a new slirp4netns for an adopted sandbox whose own is
// gone. The launcher holds its exit pipe until the sandbox ends.
func (l *Launcher) restartSlirp(inst *instance) error {
	bin, err := l.slirpPath()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	sl, exitW, err := startSlirp(ctx, bin, inst.rec.Pid, launcherDir(inst.rec.Dir))
	if err != nil {
		return err
	}
	sl.hold(exitW)
	if !sameProcess(inst.rec.Pid, inst.rec.PidStartTime) {
		_ = sl.stop(time.Now().Add(5 * time.Second))
		return ErrGone
	}
	inst.slirp = sl
	inst.rec.SlirpPid, inst.rec.SlirpStartTime = sl.pid, sl.start
	go func() {
		<-inst.done
		sl.release()
	}()
	return nil
}

// logSlirpExit logs when the slirp4netns of a sandbox that still runs
// exits: the sandbox has no Internet access any more.
func logSlirpExit(log *slog.Logger, inst *instance, sl *slirp) {
	<-sl.done
	select {
	case <-inst.done:
		return
	case <-time.After(2 * time.Second):
	}
	if inst.alive() {
		log.Warn("launcher: "+slirpBinary+" exited while its sandbox runs: the sandbox has no Internet access any more", "id", inst.rec.ID)
	}
}
