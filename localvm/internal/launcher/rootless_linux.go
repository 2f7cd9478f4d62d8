package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Rootless mode: the launcher is not root, but the kernel lets it create a
// user namespace. Each sandbox gets user, pid, mount, uts, ipc and net
// namespaces. Without newuidmap and a subordinate id range, an
// unprivileged user namespace maps ONE uid and ONE gid: the sandbox's uid
// and gid 1000 ("user") are the caller's own uid and gid on the host.
// rayd and the sandbox's code both run as that uid inside (rayd cannot
// switch users), and nothing in the sandbox keeps a capability once it is
// set up: the init builds the root filesystem with the capabilities its
// fresh user namespace grants (ambient, passed through one exec), then
// re-executes itself with none of them to become rayd.
//
// The network namespace has only loopback. The platform reaches rayd's
// ports (and any guest port) through a Unix socket the init binds in the
// sandbox's launcher directory before it pivots away from the host's
// filesystem (dialSockName; the sandbox cannot reach that path): a client
// sends a port, rayd's process dials 127.0.0.1:<port> inside the namespace
// and sends the connected socket back (SCM_RIGHTS). The dial server only
// answers peers outside the sandbox's pid namespace (the platform), whose
// SO_PEERCRED pid reads 0 there.
//
// The hooks are not on that path. The platform, rayd and the sandbox's code
// share one uid, so rayd cannot tell the platform's loopback connections
// from the code's by their owner. The init binds a second socket next to
// the dial socket, before the pivot (hooksSockName), and rayd serves the
// hooks on it (--hooks-fd): only the platform can reach its path, and rayd
// counts a client as the platform only when it is outside the sandbox's pid
// namespace. rayd still listens on port 9000 inside the namespace, as a
// decoy where every caller counts as sandbox code (200 "illegal", an
// anomaly in Health), and the dial server refuses port 9000. The platform
// reaches the hooks socket at "<id>.rayito-rootless-hooks.invalid:9000"
// (Record.HooksAddr, through Launcher.DialContext).

// rootlessHostSuffix ends the host part of a rootless sandbox's addresses:
// "<id>.rayito-rootless.invalid:<port>". Only Launcher.DialContext can dial
// them (.invalid never resolves).
const rootlessHostSuffix = ".rayito-rootless.invalid"

// rootlessHooksHostSuffix ends the host part of a rootless sandbox's hooks
// address: "<id>.rayito-rootless-hooks.invalid:9000", which
// Launcher.DialContext reaches through the hooks socket.
const rootlessHooksHostSuffix = ".rayito-rootless-hooks.invalid"

// dialSockName is the dial socket, in the sandbox's launcher directory.
const dialSockName = "dial.sock"

// hooksSockName is the socket rayd serves the platform's hooks on, in the
// sandbox's launcher directory.
const hooksSockName = "hooks.sock"

// rootlessCaps are the capabilities the init keeps across its first exec
// (ambient) to set the sandbox up: mounts, pivot_root and sethostname
// (CAP_SYS_ADMIN), bringing up loopback (CAP_NET_ADMIN). They exist in the
// sandbox's user namespace only, and are gone before rayd starts.
var rootlessCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN}

// rootlessSysProcAttr is how a rootless init is cloned.
func rootlessSysProcAttr() *syscall.SysProcAttr {
	uid, gid := os.Geteuid(), os.Getegid()
	return &syscall.SysProcAttr{
		Cloneflags:  cloneFlags | syscall.CLONE_NEWUSER,
		Setsid:      true,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: sandboxUID, HostID: gid, Size: 1}},
		// An unprivileged process may write a gid map only once setgroups
		// is denied.
		GidMappingsEnableSetgroups: false,
		AmbientCaps:                rootlessCaps,
	}
}

// sandboxUID is the uid and gid of the sandbox's user.
const sandboxUID = 1000

// probeRootless checks that exe can be started as a sandbox init
// the way launchRootless starts one.
func probeRootless(exe string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := execProbe(ctx, exe)
	cmd.SysProcAttr = rootlessSysProcAttr()
	out, err := runProbe(cmd)
	if err != nil {
		return fmt.Errorf("starting a process in an unprivileged user namespace: %w", err)
	}
	if _, err := probeAnswer(out); err != nil {
		return errors.New("the probe in an unprivileged user namespace did not answer")
	}
	return nil
}

// launchRootless launches a sandbox in an unprivileged user namespace.
func (l *Launcher) launchRootless(ctx context.Context, spec Spec) (_ *instance, err error) {
	host := spec.ID + rootlessHostSuffix
	inst := &instance{
		l: l, done: make(chan struct{}), pidfd: -1,
		rec: Record{
			ID: spec.ID, Rootless: true, Dir: spec.Dir,
			APIAddr:   net.JoinHostPort(host, strconv.Itoa(guestAPIPort)),
			HooksAddr: net.JoinHostPort(spec.ID+rootlessHooksHostSuffix, strconv.Itoa(guestHooksPort)),
		},
	}
	defer l.destroyOnError(inst, &err)
	ld, err := prepareDir(spec.Dir)
	if err != nil {
		return inst, err
	}
	if err := os.Mkdir(filepath.Join(ld, "root"), 0o700); err != nil {
		return inst, err
	}
	l.linkSudo(ld)
	cfg := &initConfig{
		Mode: modeRootless, ID: spec.ID, Hostname: hostnameFor(spec.ID),
		RootDir: "root", Env: spec.Env, Tmpfs: tmpfsSizes(spec.MemoryBytes),
		RaydArgs: append([]string{"--api-addr", ":" + strconv.Itoa(guestAPIPort), "--hooks-addr", ":" + strconv.Itoa(guestHooksPort), "--state-dir", "/run/rayd", "--isolation", string(IsolationRootless)}, l.raydArgs()...),
	}
	var slirpBin string
	if spec.Internet {
		// Through slirp4netns (slirp_linux.go): the sandbox's resolver is
		// its DNS forwarder, and the init blocks what it must not reach.
		if slirpBin, err = l.slirpPath(); err != nil {
			return inst, err
		}
		inst.rec.Internet = true
		cfg.DNS, cfg.Reject = []string{slirpDNS}, slirpRejects()
		cfg.ExtraFDs = []string{fdSlirpExit}
	}
	platformFD, err := l.servicesFor(inst, spec)
	if err != nil {
		return inst, err
	}
	if platformFD >= 0 {
		defer unix.Close(platformFD)
		cfg.ExtraFDs = append(cfg.ExtraFDs, fdPlatformDir)
	}
	if failInit != nil {
		failInit(cfg)
	}
	s, err := startInit(l.exe, cfg, baseEnv(true), rootlessSysProcAttr(), spec.LogPath)
	if err != nil {
		return inst, err
	}
	inst.attachChild(s)
	inst.svc.setPid(s.pid)
	defer s.sync.Close()
	if _, inst.rec.PidStartTime, err = procStat(s.pid); err != nil {
		return inst, fmt.Errorf("launcher: the sandbox init vanished: %w", err)
	}
	var extra []int
	if spec.Internet {
		// The init's network namespace exists from its clone on, and the
		// init waits for the go byte: tap0 is configured before it goes on.
		sl, exitW, err := startSlirp(ctx, slirpBin, s.pid, ld)
		if err != nil {
			return inst, err
		}
		inst.slirp = sl
		inst.rec.SlirpPid, inst.rec.SlirpStartTime = sl.pid, sl.start
		// The init, then rayd, keeps the exit pipe's write end: slirp4netns
		// lasts as long as the sandbox, and not longer.
		defer exitW.Close()
		extra = append(extra, int(exitW.Fd()))
	}
	if platformFD >= 0 {
		extra = append(extra, platformFD) // after the exit pipe, as in ExtraFDs
	}
	if err := release(ctx, s, ld, extra...); err != nil {
		return inst, fmt.Errorf("%w (log: %s)", err, spec.LogPath)
	}
	if inst.slirp != nil {
		go logSlirpExit(l.log, inst, inst.slirp)
	}
	return inst, nil
}

// DialContext dials addr like a net.Dialer, except for the addresses of
// rootless sandboxes: "<id>.rayito-rootless.invalid:<port>", which it
// reaches through the sandbox's dial socket, and
// "<id>.rayito-rootless-hooks.invalid:9000" (rayd's hooks), through its
// hooks socket. The platform's proxy and hook client use it.
func (l *Launcher) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	h, p, err := net.SplitHostPort(addr)
	hooks := err == nil && strings.HasSuffix(h, rootlessHooksHostSuffix)
	if err != nil || (!hooks && !strings.HasSuffix(h, rootlessHostSuffix)) {
		d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		return d.DialContext(ctx, network, addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 || (hooks && port != guestHooksPort) {
		return nil, fmt.Errorf("launcher: bad port in %q", addr)
	}
	id := strings.TrimSuffix(strings.TrimSuffix(h, rootlessHooksHostSuffix), rootlessHostSuffix)
	l.mu.Lock()
	inst := l.insts[id]
	l.mu.Unlock()
	if inst == nil || !inst.rec.Rootless {
		return nil, fmt.Errorf("launcher: dial %s: no such rootless sandbox", addr)
	}
	if hooks {
		return dialHooks(ctx, launcherDir(inst.rec.Dir))
	}
	return dialRootless(ctx, launcherDir(inst.rec.Dir), port)
}

// dialSock connects to the socket name in the launcher directory ld.
func dialSock(ctx context.Context, ld, name string) (*net.UnixConn, error) {
	// The socket's path may be longer than sun_path allows: connect
	// through a descriptor of its directory.
	dfd, err := unix.Open(ld, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(dfd)+"/"+name)
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}

// dialHooks connects to the hooks socket of the sandbox whose launcher
// directory is ld: rayd counts every connection on it as the platform's.
func dialHooks(ctx context.Context, ld string) (net.Conn, error) {
	c, err := dialSock(ctx, ld, hooksSockName)
	if err != nil {
		return nil, fmt.Errorf("launcher: dial: the sandbox's hooks socket: %w", err)
	}
	return c, nil
}

// dialRootless asks the dial server of the sandbox whose launcher directory
// is ld for a connection to its port.
func dialRootless(ctx context.Context, ld string, port int) (net.Conn, error) {
	uc, err := dialSock(ctx, ld, dialSockName)
	if err != nil {
		return nil, fmt.Errorf("launcher: dial: the sandbox's dial socket: %w", err)
	}
	defer uc.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = uc.SetDeadline(dl)
	} else {
		_ = uc.SetDeadline(time.Now().Add(10 * time.Second))
	}
	if _, err := uc.Write([]byte{byte(port >> 8), byte(port)}); err != nil {
		return nil, fmt.Errorf("launcher: dial: %w", err)
	}
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("launcher: dial: %w", err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if f, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, f...)
			}
		}
	}
	if n < 1 || buf[0] != syncOK || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		msg := "no answer"
		if n > 1 && buf[0] == syncError {
			msg = string(buf[1:n])
		}
		return nil, fmt.Errorf("launcher: dial port %d in the sandbox: %s", port, msg)
	}
	f := os.NewFile(uintptr(fds[0]), "sandbox-conn")
	defer f.Close()
	conn, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("launcher: dial: %w", err)
	}
	return conn, nil
}

// serveDial runs in rayd's process (rootless mode): it answers the dial
// socket ln until it fails.
func serveDial(ln *net.UnixListener) {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go answerDial(c)
	}
}

func answerDial(c *net.UnixConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fail := func(msg string) { _, _ = c.Write(append([]byte{syncError}, msg...)) }
	// Only the platform, outside this pid namespace (pid 0 here), may ask.
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	var cred *unix.Ucred
	var cerr error
	_ = rc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil || cred == nil || cred.Pid != 0 {
		fail("refused: not the platform")
		return
	}
	var b [2]byte
	if _, err := c.Read(b[:1]); err != nil {
		return
	}
	if _, err := c.Read(b[1:]); err != nil {
		return
	}
	port := int(b[0])<<8 | int(b[1])
	if port == 0 {
		fail("port 0")
		return
	}
	if port == guestHooksPort {
		// What listens there is a decoy that ignores every caller; the
		// platform's hooks are on the hooks socket.
		fail("port " + strconv.Itoa(port) + ": rayd's hooks are on " + hooksSockName)
		return
	}
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tc, err := d.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		fail(err.Error())
		return
	}
	defer tc.Close()
	f, err := tc.(*net.TCPConn).File()
	if err != nil {
		fail(err.Error())
		return
	}
	defer f.Close()
	_, _, _ = c.WriteMsgUnix([]byte{syncOK}, unix.UnixRights(int(f.Fd())), nil)
}
