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
// and sends the connected socket back (SCM_RIGHTS). Such a socket belongs
// to rayd's uid, so rayd's hooks count it as the platform's; the dial
// server only answers peers outside the sandbox's pid namespace (the
// platform), whose SO_PEERCRED pid reads 0 there.

// rootlessHostSuffix ends the host part of a rootless sandbox's addresses:
// "<id>.rayito-rootless.invalid:<port>". Only Launcher.DialContext can dial
// them (.invalid never resolves).
const rootlessHostSuffix = ".rayito-rootless.invalid"

// dialSockName is the dial socket, in the sandbox's launcher directory.
const dialSockName = "dial.sock"

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

// probeRootless checks that this binary can be started as a sandbox init
// the way launchRootless starts one.
func probeRootless(exe string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := execProbe(ctx, exe)
	cmd.SysProcAttr = rootlessSysProcAttr()
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("starting a process in an unprivileged user namespace: %w", err)
	}
	if strings.TrimSpace(string(out)) != probeReply {
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
			HooksAddr: net.JoinHostPort(host, strconv.Itoa(guestHooksPort)),
		},
	}
	defer func() {
		if err != nil {
			if derr := inst.destroy(context.Background()); derr != nil {
				l.log.Error("launcher: cleaning up a failed launch", "id", spec.ID, "err", derr.Error())
			}
		}
	}()
	ld, err := prepareDir(spec.Dir)
	if err != nil {
		return inst, err
	}
	if err := os.Mkdir(filepath.Join(ld, "root"), 0o700); err != nil {
		return inst, err
	}
	// The caller's uid is the sandbox's 1000: home/ is already the user's.
	if err := os.Mkdir(filepath.Join(ld, "home"), 0o750); err != nil {
		return inst, err
	}
	cfg := &initConfig{
		Mode: modeRootless, ID: spec.ID, Hostname: hostnameFor(spec.ID),
		RootDir: "root", HomeDir: "home", Env: spec.Env, Tmpfs: tmpfsSizes(spec.MemoryBytes),
		RaydArgs: []string{"--api-addr", ":" + strconv.Itoa(guestAPIPort), "--hooks-addr", ":" + strconv.Itoa(guestHooksPort), "--state-dir", "/run/rayd", "--isolation", string(IsolationRootless)},
	}
	if failInit != nil {
		failInit(cfg)
	}
	s, err := startInit(cfg, baseEnv(true), rootlessSysProcAttr(), spec.LogPath)
	if err != nil {
		return inst, err
	}
	inst.attachChild(s)
	defer s.sync.Close()
	if _, inst.rec.PidStartTime, err = procStat(s.pid); err != nil {
		return inst, fmt.Errorf("launcher: the sandbox init vanished: %w", err)
	}
	if err := release(ctx, s, ld); err != nil {
		return inst, fmt.Errorf("%w (log: %s)", err, spec.LogPath)
	}
	return inst, nil
}

// DialContext dials addr like a net.Dialer, except for the addresses of
// rootless sandboxes ("<id>.rayito-rootless.invalid:<port>"), which it
// reaches through the sandbox's dial socket. The platform's proxy and hook
// client use it.
func (l *Launcher) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || !strings.HasSuffix(h, rootlessHostSuffix) {
		d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		return d.DialContext(ctx, network, addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("launcher: bad port in %q", addr)
	}
	id := strings.TrimSuffix(h, rootlessHostSuffix)
	l.mu.Lock()
	inst := l.insts[id]
	l.mu.Unlock()
	if inst == nil || !inst.rec.Rootless {
		return nil, fmt.Errorf("launcher: dial %s: no such rootless sandbox", addr)
	}
	return dialRootless(ctx, launcherDir(inst.rec.Dir), port)
}

// dialRootless asks the dial server of the sandbox whose launcher directory
// is ld for a connection to its port.
func dialRootless(ctx context.Context, ld string, port int) (net.Conn, error) {
	// The socket's path may be longer than sun_path allows: connect
	// through a descriptor of its directory.
	dfd, err := unix.Open(ld, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("launcher: dial: %w", err)
	}
	defer unix.Close(dfd)
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(dfd)+"/"+dialSockName)
	if err != nil {
		return nil, fmt.Errorf("launcher: dial: the sandbox's dial socket: %w", err)
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
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
