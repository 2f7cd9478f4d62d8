package launcher

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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

	"github.com/rayito-dev/rayito/localvm/internal/cgroup"
	"github.com/rayito-dev/rayito/localvm/internal/hostnet"
	"github.com/rayito-dev/rayito/rayd"
)

// Timeouts.
const (
	readyTimeout     = 20 * time.Second // Launch: until rayd reports that it serves
	terminateTimeout = 10 * time.Second // Terminate: until the init has exited
	plainGrace       = 5 * time.Second  // unprivileged: SIGTERM to SIGKILL
	probeTimeout     = 15 * time.Second
)

// failInit, when set by a test, alters the init's configuration.
var failInit func(*initConfig)

// cloneFlags are the namespaces of a privileged sandbox.
const cloneFlags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWNET

// Launcher starts and manages sandboxes. It is safe for concurrent use.
type Launcher struct {
	opts Options
	log  *slog.Logger
	// exe is the path sandboxes start from: selfExe, or bin's
	// /proc/self/fd path (Options.Binary).
	exe    string
	bin    *os.File
	n      names
	subnet netip.Prefix
	priv   bool
	userns bool // privileged sandboxes get a user namespace and a uid range
	// rootless: not root, but unprivileged user namespaces work: sandboxes
	// get namespaces (see launchRootless).
	rootless bool
	cg       *cgroup.Layout // privileged mode; nil when cgErr is set
	cgErr    error
	fw       *hostnet.Firewall
	net      *hostnet.Veths

	oomOnce sync.Once
	ctOnce  sync.Once // conntrack warning

	// This binary in the state directory, for the sandboxes' sudo
	// (sudo_linux.go).
	sudoOnce sync.Once
	sudoPath string
	sudoErr  error

	mu      sync.Mutex
	slots   map[netip.Prefix]string // /30 → id of live sandboxes known here
	next    int                     // where the next /30 search starts
	nextUID int                     // where the next uid block search starts
	insts   map[string]*instance    // live instances (launched or adopted)
}

// New returns a Launcher. It starts the sandboxes' executable (this
// binary, or Options.Binary, which it opens and checks first) as a probe:
// the probe checks that main calls MaybeRunInit and, as root, that
// namespaces can be created. Without root, or when they cannot, the launcher runs in
// unprivileged mode (see the package documentation).
func New(opts Options) (*Launcher, error) {
	if opts.StateDir == "" || !filepath.IsAbs(opts.StateDir) {
		return nil, errors.New("launcher: Options.StateDir must be an absolute path")
	}
	opts.StateDir = filepath.Clean(opts.StateDir)
	switch opts.KernelStart {
	case "", "lazy", "preload", "eager":
	default:
		return nil, fmt.Errorf("launcher: Options.KernelStart must be lazy, preload or eager, not %q", opts.KernelStart)
	}
	subnet, err := checkSubnet(opts.Subnet)
	if err != nil {
		return nil, err
	}
	n, err := namesFor(opts.Scope)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	l := &Launcher{
		opts: opts, log: log, n: n, subnet: subnet,
		fw:    hostnet.NewFirewall(hostnet.Names{Table: n.table, VethPrefix: n.vethPrefix, CommentTag: n.commentTag}),
		net:   hostnet.NewVeths(),
		slots: map[netip.Prefix]string{},
		insts: map[string]*instance{},
	}
	l.exe = selfExe
	if opts.Binary != "" {
		if l.bin, err = openBinary(opts.Binary); err != nil {
			return nil, err
		}
		l.exe = fdPath(l.bin)
		if err := checkBinary(opts.Binary, l.exe); err != nil {
			l.bin.Close()
			return nil, err
		}
	}
	if err := l.probeIsolation(); err != nil {
		l.closeBinary()
		return nil, err
	}
	return l, nil
}

// CheckBinary reports whether New would accept path as Options.Binary
// (a safe executable that answers as a sandbox init, of this binary's
// release): nil, or an error wrapping ErrBinary that says why not.
func CheckBinary(path string) error {
	f, err := openBinary(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return checkBinary(path, fdPath(f))
}

// checkBinary starts exe, the opened path, as a probe, unisolated, and
// checks its answer and build stamp.
func checkBinary(path, exe string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	out, err := runProbe(execProbe(ctx, exe))
	if err == nil {
		var stamp string
		if stamp, err = probeAnswer(out); err == nil {
			return checkBinaryStamp(path, stamp)
		}
	}
	return fmt.Errorf("%w: %s: %w", ErrBinary, path, err)
}

// probeIsolation finds how the launcher isolates sandboxes (root and
// namespaces, rootless, or none) by probing its executable; it fails
// when it can isolate none and Options.AllowUnisolated is not set.
func (l *Launcher) probeIsolation() error {
	opts, log := l.opts, l.log
	var why string // why sandboxes cannot be isolated
	if os.Geteuid() == 0 && !opts.forceUnprivileged {
		if err := probe(l.exe, true, true); err == nil {
			l.priv, l.userns = true, true
		} else if err2 := probe(l.exe, true, false); err2 == nil {
			l.priv = true
			log.Warn("launcher: user namespaces are not usable: every sandbox's user is host uid 1000 and its rayd host root (per-uid limits, file ownership and signals are shared between sandboxes)", "err", err.Error())
		} else {
			why = "running as root, but namespaces cannot be created (" + err2.Error() + "; a container without CAP_SYS_ADMIN?)"
		}
	} else if os.Geteuid() == 0 {
		why = "forced unprivileged mode (test)"
	} else if opts.noRootless || os.Getenv(NoUserNamespacesEnv) == "1" {
		why = "not root, and unprivileged user namespaces are turned off (" + NoUserNamespacesEnv + "=1)"
	} else if err := probeRootless(l.exe); err == nil {
		l.rootless = true
	} else {
		why = "not root, and unprivileged user namespaces are not usable here (" + err.Error() +
			"; check sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone and AppArmor's kernel.apparmor_restrict_unprivileged_userns)"
	}
	if !l.priv {
		if err := probe(l.exe, false, false); err != nil {
			return err
		}
		if l.rootless {
			log.Debug("launcher: rootless mode: unprivileged user namespaces, loopback-only networks, no cgroup limits")
			return nil
		}
		if !opts.AllowUnisolated {
			return fmt.Errorf("%w: %s. Run as root for full isolation, allow unprivileged user namespaces for rootless isolation, or opt in to sandboxes that are NOT isolated (plain processes with your access to the machine)", ErrUnisolated, why)
		}
		log.Warn("launcher: unisolated mode (opted in): sandboxes are NOT isolated (no namespaces, cgroups or network policy); their code runs with this user's access to the machine", "why", why)
		return nil
	}
	if swept := hostnet.SweepLockFiles(hostnet.LockDir, l.fw.Dial, isTableName); swept > 0 {
		log.Debug("launcher: removed stale nftables lock files", "files", swept)
	}
	l.cg, l.cgErr = cgroup.Detect(l.n.cgroupParent)
	if l.cgErr != nil {
		log.Error("launcher: no usable cgroups: privileged launches will fail", "err", l.cgErr.Error())
	} else {
		log.Debug("launcher: privileged mode", "cgroups", l.cg.Version().String())
	}
	return nil
}

// probe starts exe (the sandboxes' executable) as InitArgv0 with the
// probe argument (in new namespaces when isolated, and a user namespace
// mapping its root to an unprivileged host uid when userns) and checks its
// answer.
func probe(exe string, isolated, userns bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := execProbe(ctx, exe)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if isolated {
		cmd.SysProcAttr.Cloneflags = cloneFlags
	}
	if userns {
		// Root in the namespace is the host's nobody: what a sandbox's
		// rayd is (an id no file of the host belongs to).
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65534, Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = true
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
	}
	out, err := runProbe(cmd)
	if err != nil {
		if isolated {
			return fmt.Errorf("launcher: starting a process in new namespaces: %w", err)
		}
		return fmt.Errorf("launcher: the binary does not answer as a sandbox init (%w): main must call launcher.MaybeRunInit first", err)
	}
	if _, err := probeAnswer(out); err != nil {
		return fmt.Errorf("launcher: %w", err)
	}
	return nil
}

// runProbe runs a probe command and returns its output.
func runProbe(cmd *exec.Cmd) (string, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	return out.String(), err
}

// NoUserNamespacesEnv, set to 1 in a launcher's environment, makes a
// launcher that is not root behave as if unprivileged user namespaces were
// unusable: it then refuses to start unless Options.AllowUnisolated. For
// trying that path (tests); it never weakens a launcher that could not
// isolate anyway.
const NoUserNamespacesEnv = "RAYITO_LOCALVM_NO_USERNS"

// execProbe is the command of a probe: exe as InitArgv0.
func execProbe(ctx context.Context, exe string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, exe, probeArg)
	cmd.Args[0] = InitArgv0
	cmd.Env = baseEnv(true)
	cmd.Dir = "/"
	return cmd
}

// Privileged reports whether sandboxes get namespaces, cgroups and network
// isolation (root, and namespaces usable).
func (l *Launcher) Privileged() bool { return l.priv }

// raydArgs are rayd's flags that Options set: -kernel-start and
// -upstream-ca, when given.
func (l *Launcher) raydArgs() []string {
	var args []string
	if l.opts.KernelStart != "" {
		args = append(args, "--kernel-start", l.opts.KernelStart)
	}
	if len(l.opts.UpstreamCAs) > 0 {
		args = append(args, "--upstream-ca", base64.StdEncoding.EncodeToString(l.opts.UpstreamCAs))
	}
	return args
}

// Isolation reports how sandboxes are isolated.
func (l *Launcher) Isolation() Isolation {
	switch {
	case l.priv:
		return IsolationFull
	case l.rootless:
		return IsolationRootless
	}
	return IsolationNone
}

// Check reports whether this launcher can enforce what spec asks for: an
// error wrapping ErrNeedsPrivilege names what is missing. Launch calls it;
// the platform calls it too, to refuse a request before it creates
// anything.
func (l *Launcher) Check(spec Spec) error {
	if spec.Template != nil && (!l.priv || !l.userns) {
		return fmt.Errorf("%w: templates need the root local platform with user namespaces", ErrNeedsPrivilege)
	}
	if l.priv {
		return nil
	}
	if spec.MemoryBytes != 0 || spec.PidsMax != 0 {
		return fmt.Errorf("%w: memory and pids limits need cgroups: run the platform as root (no delegated cgroup v2 subtree is used without root)", ErrNeedsPrivilege)
	}
	if l.rootless {
		if spec.Internet {
			// Through slirp4netns (slirp_linux.go).
			_, err := l.slirpPath()
			return err
		}
		return nil
	}
	if !spec.Internet {
		return fmt.Errorf("%w: no Internet access needs a network namespace, and these sandboxes are NOT isolated (they share the host's network): run as root or allow user namespaces", ErrNeedsPrivilege)
	}
	return nil
}

// runtimeKnobs are environment variables of the Go runtime passed through to
// a sandbox's init (nothing else of the launcher's environment is).
var runtimeKnobs = []string{"GODEBUG", "GOTRACEBACK", "GORACE", "GOCOVERDIR"}

// baseEnv is the init's exec environment, built from scratch.
func baseEnv(isolated bool) []string {
	var env []string
	if isolated {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/", "LANG=C.UTF-8"}
	} else {
		path := os.Getenv("PATH")
		if path == "" {
			path = "/usr/local/bin:/usr/bin:/bin"
		}
		home, err := os.UserHomeDir()
		if err != nil {
			home = "/"
		}
		env = []string{"PATH=" + path, "HOME=" + home, "LANG=C.UTF-8"}
		if t := os.Getenv("TMPDIR"); t != "" {
			env = append(env, "TMPDIR="+t)
		}
	}
	for _, k := range runtimeKnobs {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Launch starts a sandbox and returns once rayd's API and hooks ports accept
// connections (at most 20 s). On failure everything it created is removed.
func (l *Launcher) Launch(ctx context.Context, spec Spec) (Instance, error) {
	if err := validID(spec.ID); err != nil {
		return nil, err
	}
	if err := checkDir(l.opts.StateDir, spec.Dir); err != nil {
		return nil, err
	}
	if spec.LogPath == "" || !filepath.IsAbs(spec.LogPath) {
		return nil, errors.New("launcher: Spec.LogPath must be an absolute path")
	}
	if spec.MemoryBytes < 0 || spec.PidsMax < 0 {
		return nil, errors.New("launcher: negative limits")
	}
	if err := l.Check(spec); err != nil {
		return nil, err
	}
	if spec.MemoryBytes == 0 {
		spec.MemoryBytes = DefaultMemoryBytes
	}
	if spec.PidsMax == 0 {
		spec.PidsMax = DefaultPidsMax
	}
	for _, kv := range spec.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsRune(kv, 0) {
			return nil, errors.New("launcher: Spec.Env entries must be KEY=VALUE")
		}
	}
	l.mu.Lock()
	if _, dup := l.insts[spec.ID]; dup {
		l.mu.Unlock()
		return nil, fmt.Errorf("launcher: sandbox %s is already running", spec.ID)
	}
	l.insts[spec.ID] = nil // reserve the id
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var inst *instance
	var err error
	switch {
	case l.priv:
		inst, err = l.launchIsolated(ctx, spec)
	case l.rootless:
		inst, err = l.launchRootless(ctx, spec)
	default:
		inst, err = l.launchPlain(ctx, spec)
	}
	l.mu.Lock()
	if err != nil {
		delete(l.insts, spec.ID)
	} else {
		l.insts[spec.ID] = inst
	}
	l.mu.Unlock()
	if err != nil {
		l.log.Warn("launcher: launch failed", "id", spec.ID, "err", err.Error())
		return nil, err
	}
	if l.Isolation() == IsolationNone {
		l.log.Warn("launcher: sandbox started NOT isolated (opted in): its code runs with this user's access to the machine", "id", spec.ID, "pid", inst.rec.Pid, "api", inst.rec.APIAddr)
	} else {
		l.log.Info("launcher: sandbox started", "id", spec.ID, "pid", inst.rec.Pid, "api", inst.rec.APIAddr, "isolation", string(l.Isolation()))
	}
	return inst, nil
}

// allocSlot reserves a free /30 for id: not used by a sandbox known to this
// launcher and not overlapping any address of the host's interfaces.
func (l *Launcher) allocSlot(id string) (slot netip.Prefix, host, guest netip.Addr, err error) {
	used, err := l.net.HostAddrs()
	if err != nil {
		return slot, host, guest, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := slotCount(l.subnet)
	for k := 0; k < n; k++ {
		i := (l.next + k) % n
		slot, host, guest = subnetSlot(l.subnet, i)
		if _, busy := l.slots[slot]; busy {
			continue
		}
		clash := false
		for _, a := range used {
			if slot.Contains(a) {
				clash = true
				break
			}
		}
		if clash {
			continue
		}
		l.slots[slot] = id
		l.next = (i + 1) % n
		return slot, host, guest, nil
	}
	return slot, host, guest, fmt.Errorf("launcher: no free /30 left in %s", l.subnet)
}

func (l *Launcher) releaseSlot(slot netip.Prefix, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots[slot] == id {
		delete(l.slots, slot)
	}
}

// prepareDir (re)creates the launcher's directory under the sandbox's Dir.
func prepareDir(dir string) (string, error) {
	ld := launcherDir(dir)
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("launcher: sandbox dir: %v", errOr(err, "not a directory"))
	}
	if err := os.RemoveAll(ld); err != nil {
		return "", fmt.Errorf("launcher: clearing %s: %w", ld, err)
	}
	if err := os.Mkdir(ld, 0o700); err != nil {
		return "", fmt.Errorf("launcher: %w", err)
	}
	return ld, nil
}

func errOr(err error, msg string) any {
	if err != nil {
		return err
	}
	return msg
}

// started is a started init, before it has been released.
type started struct {
	cmd  *exec.Cmd
	sync *os.File // the launcher's end of the sync socket
	pid  int
}

// startInit starts the init (exe) with cfg on fd 3 and the sync socket on
// fd 4.
func startInit(exe string, cfg *initConfig, env []string, sys *syscall.SysProcAttr, logPath string) (*started, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("launcher: opening the log: %w", err)
	}
	defer logf.Close()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer cfgR.Close()
	defer cfgW.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("launcher: socketpair: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, err
	}
	mine := os.NewFile(uintptr(fds[0]), "sync")
	theirs := os.NewFile(uintptr(fds[1]), "sync-child")
	defer theirs.Close()

	cmd := &exec.Cmd{
		Path:        exe,
		Args:        []string{InitArgv0, cfg.ID},
		Env:         env,
		Dir:         "/",
		Stdout:      logf,
		Stderr:      logf,
		ExtraFiles:  []*os.File{cfgR, theirs},
		SysProcAttr: sys,
	}
	markCloexec()
	if err := cmd.Start(); err != nil {
		mine.Close()
		return nil, fmt.Errorf("launcher: starting the sandbox init: %w", err)
	}
	cfgR.Close()
	theirs.Close()
	b, _ := json.Marshal(cfg)
	if _, err := cfgW.Write(b); err != nil {
		mine.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("launcher: sending the configuration: %w", err)
	}
	cfgW.Close()
	return &started{cmd: cmd, sync: mine, pid: cmd.Process.Pid}, nil
}

// release tells the init to proceed and waits until rayd serves: the init
// answers syncOK once the sandbox is set up (or syncError and a message),
// then rayd writes syncReady on its copy of the socket once it listens and
// its services are built. The socket closing before that means the init or
// rayd exited.
//
// With dir (isolated mode), a descriptor of dir as the init's mount
// namespace sees it travels with the go byte (SCM_RIGHTS): the init, root
// only in its user namespace, could not walk the state dir's path, and a
// descriptor opened before the clone would name the host's mounts, on
// which the init cannot mount.
func release(ctx context.Context, s *started, dir string, extra ...int) error {
	defer s.sync.Close()
	if err := sendGo(s, dir, extra...); err != nil {
		return fmt.Errorf("launcher: releasing the sandbox init: %w", err)
	}
	deadline, _ := ctx.Deadline()
	_ = s.sync.SetReadDeadline(deadline)
	var buf [4096]byte
	n, err := readSync(s.sync, buf[:])
	switch {
	case n >= 2 && buf[0] == syncOK && buf[1] == syncReady:
		return nil
	case n > 0 && buf[0] == syncError:
		return fmt.Errorf("launcher: sandbox setup failed: %s", string(buf[1:n]))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("launcher: the sandbox was not ready in time: %w", context.DeadlineExceeded)
	case n > 0 && buf[0] == syncOK:
		return errors.New("launcher: rayd exited before it was ready")
	}
	return errors.New("launcher: the sandbox init exited during setup")
}

// sendGo writes syncGo on the sync socket, with a descriptor of dir opened
// through the init's root (/proc/<pid>/root) when dir is not "", then the
// extra descriptors (a rootless init's: the exit pipe of its slirp4netns).
func sendGo(s *started, dir string, extra ...int) error {
	if dir == "" {
		_, err := s.sync.Write([]byte{syncGo})
		return err
	}
	dfd, err := unix.Open("/proc/"+strconv.Itoa(s.pid)+"/root"+dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the sandbox's directory in its mount namespace: %w", err)
	}
	defer unix.Close(dfd)
	rc, err := s.sync.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), []byte{syncGo}, unix.UnixRights(append([]int{dfd}, extra...)...), nil, 0)
		return serr != unix.EAGAIN
	}); err != nil {
		return err
	}
	return serr
}

// readSync reads the sync socket until it holds syncOK and one more byte,
// or EOF, an error or a full buf.
func readSync(f *os.File, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if n >= 2 && buf[0] == syncOK {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// launchIsolated launches a sandbox in namespaces and cgroups.
func (l *Launcher) launchIsolated(ctx context.Context, spec Spec) (_ *instance, err error) {
	if l.cgErr != nil {
		return nil, l.cgErr
	}
	slot, host, guest, err := l.allocSlot(spec.ID)
	if err != nil {
		return nil, err
	}
	veth := l.n.vethName(spec.ID)
	inst := l.newIsolated(spec, slot, host, guest, veth)
	defer l.destroyOnError(inst, &err)
	ld, base, err := l.prepareIsolated(inst, spec)
	if err != nil {
		return inst, err
	}
	dirs, cgfd, err := l.cg.Create(spec.ID, spec.MemoryBytes, spec.PidsMax)
	if err != nil {
		return inst, err
	}
	inst.rec.Cgroups = dirs
	sys := l.isolatedAttr(base, cgfd)
	cfg := l.isolatedConfig(spec)
	inst.oomFile = cgroup.MemoryEventsFile(dirs)
	// rayd's view of its OOM kills and its lifecycle channel (see
	// suspend_linux.go), when this rayd takes them.
	var extra []int
	if raydFlags()[raydMemoryEventsFlag] {
		fd, ferr := openMemoryEvents(dirs)
		if ferr != nil {
			return inst, ferr
		}
		if fd >= 0 {
			defer unix.Close(fd)
			extra = append(extra, fd)
			cfg.ExtraFDs = append(cfg.ExtraFDs, fdMemoryEvents)
		}
	}
	var lifecycle *os.File
	if raydFlags()[raydLifecycleFlag] {
		f, w, ferr := makeLifecycle(ld)
		if ferr != nil {
			return inst, ferr
		}
		lifecycle = f
		defer func() {
			if err != nil { // the function's result: the launch failed
				lifecycle.Close()
			}
		}()
		defer unix.Close(w)
		extra = append(extra, w)
		cfg.ExtraFDs = append(cfg.ExtraFDs, fdLifecycle)
	}
	if fd, ferr := l.servicesFor(inst, spec); ferr != nil {
		return inst, ferr
	} else if fd >= 0 {
		defer unix.Close(fd)
		extra = append(extra, fd)
		cfg.ExtraFDs = append(cfg.ExtraFDs, fdPlatformDir)
	}
	if err := configTemplate(cfg, spec, ld, base); err != nil {
		return inst, err
	}
	if failInit != nil {
		failInit(cfg)
	}
	s, err := startInit(l.exe, cfg, baseEnv(true), sys, spec.LogPath)
	if cgfd >= 0 {
		unix.Close(cgfd)
	}
	if err != nil {
		return inst, err
	}
	inst.attachChild(s)
	inst.svc.setPid(s.pid)
	defer s.sync.Close()
	if _, inst.rec.PidStartTime, err = procStat(s.pid); err != nil {
		return inst, fmt.Errorf("launcher: the sandbox init vanished: %w", err)
	}
	if err := l.protectRayd(s.pid); err != nil {
		return inst, err
	}
	if err := l.wireIsolated(s.pid, spec, dirs, veth, host, guest); err != nil {
		return inst, err
	}
	tfds, err := templateFDs(s.pid, spec.Template)
	if err != nil {
		return inst, err
	}
	defer closeFDs(tfds)
	extra = append(extra, tfds...)
	if err = release(ctx, s, ld, extra...); err != nil {
		return inst, fmt.Errorf("%w (log: %s)", err, spec.LogPath)
	}
	if lifecycle != nil {
		inst.startLifecycle(lifecycle)
	}
	return inst, nil
}

// configTemplate prepares the template of spec, if any, in the launcher
// directory ld for the sandbox's root (host uid base), and tells the init
// about it in cfg: the layer's descriptor is opened in the init's mount
// namespace once the init runs (overlayfs takes only layers of its own
// namespace; see templateFDs).
func configTemplate(cfg *initConfig, spec Spec, ld string, base uint32) error {
	if err := prepareTemplate(spec, ld, base); err != nil {
		return err
	}
	if spec.Template != nil {
		cfg.ExtraFDs = append(cfg.ExtraFDs, fdTemplate)
		cfg.Template = templateRun
		if spec.Template.Build {
			cfg.Template = templateBuild
			cfg.ExtraFDs = append(cfg.ExtraFDs, fdUsrIdmap)
		}
	}
	return nil
}

// templateFDs opens, in the mount namespace of the init pid, the
// descriptors of template t (none when nil) that configTemplate announced:
// the layer's directory and, for a build, an idmapped /usr. The caller
// closes them; on an error none is left open.
func templateFDs(pid int, t *TemplateLayer) ([]int, error) {
	if t == nil {
		return nil, nil
	}
	fd, err := openInInit(pid, t.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	if !t.Build {
		return []int{fd}, nil
	}
	ufd, err := idmappedUsr(pid)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return []int{fd, ufd}, nil
}

// closeFDs closes each of fds.
func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// newIsolated is the instance of a privileged sandbox launched in slot,
// with host and guest as its veth's addresses.
func (l *Launcher) newIsolated(spec Spec, slot netip.Prefix, host, guest netip.Addr, veth string) *instance {
	return &instance{
		l:        l,
		done:     make(chan struct{}),
		pidfd:    -1,
		slot:     slot,
		memBytes: spec.MemoryBytes,
		pidsMax:  spec.PidsMax,
		rec: Record{
			ID: spec.ID, Privileged: true,
			APIAddr:   netip.AddrPortFrom(guest, guestAPIPort).String(),
			HooksAddr: netip.AddrPortFrom(guest, guestHooksPort).String(),
			GuestIP:   guest.String(), HostIP: host.String(), Veth: veth,
			Internet: spec.Internet, Dir: spec.Dir,
		},
	}
}

// prepareIsolated makes a privileged sandbox's launcher directory (ld)
// and root mount point, owned by its root, and allocates its host
// identity: root in its user namespace is host uid base, its user 1000
// is base+1000 (0 and 1000 without a user namespace).
func (l *Launcher) prepareIsolated(inst *instance, spec Spec) (ld string, base uint32, err error) {
	ld, err = prepareDir(spec.Dir)
	if err != nil {
		return "", 0, err
	}
	if l.userns {
		if base, err = l.allocUIDs(spec.ID); err != nil {
			return "", 0, err
		}
		inst.rec.UIDBase = base
	}
	rootDir := filepath.Join(ld, "root")
	if err := os.Mkdir(rootDir, 0o700); err != nil {
		return "", 0, err
	}
	l.linkSudo(ld)
	// The init reaches them through a descriptor of ld (see release): ld
	// and the root mount point belong to the sandbox's root.
	for _, p := range []string{ld, rootDir} {
		if err := os.Lchown(p, int(base), int(base)); err != nil {
			return "", 0, err
		}
	}
	return ld, base, nil
}

// isolatedAttr is how a privileged sandbox's init is cloned: in new
// namespaces, with a user namespace mapping the host ids from base where
// user namespaces work, and into the cgroup of cgfd (v2) when it is not
// -1.
func (l *Launcher) isolatedAttr(base uint32, cgfd int) *syscall.SysProcAttr {
	sys := &syscall.SysProcAttr{Cloneflags: cloneFlags, Setsid: true}
	if l.userns {
		sys.Cloneflags |= syscall.CLONE_NEWUSER
		sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(base), Size: uidRangeSize}}
		sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(base), Size: uidRangeSize}}
		sys.GidMappingsEnableSetgroups = true // rayd sets its users' groups
		// Become the namespace's root before exec (the clone keeps host
		// uid 0, unmapped there, and exec would drop every capability).
		sys.Credential = &syscall.Credential{Uid: 0, Gid: 0}
	}
	if cgfd >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, cgfd
	}
	return sys
}

// isolatedConfig is what a privileged sandbox's init is told (before its
// descriptors and template are added).
func (l *Launcher) isolatedConfig(spec Spec) *initConfig {
	cfg := &initConfig{
		Mode: modeIsolated, ID: spec.ID, Hostname: hostnameFor(spec.ID),
		RootDir: "root", Env: mountEnv(spec.Env), Tmpfs: tmpfsSizes(spec.MemoryBytes),
		RaydArgs: append(append([]string{"--api-addr", ":" + strconv.Itoa(guestAPIPort), "--hooks-addr", ":" + strconv.Itoa(guestHooksPort), "--state-dir", "/run/rayd", "--isolation", string(IsolationFull),
			"--memory-limit", strconv.FormatInt(spec.MemoryBytes, 10), "--process-limit", strconv.Itoa(spec.PidsMax),
			// Served only when the spec allows root (RAYITO_ALLOW_ROOT).
			"--sudo-socket", rayd.SudoSocket}, mountArgs()...), l.raydArgs()...),
	}
	for _, a := range l.opts.DNS {
		cfg.DNS = append(cfg.DNS, a.String())
	}
	return cfg
}

// protectRayd sets the oom_score_adj of the init pid (rayd) to -1000.
// Root without CAP_SYS_RESOURCE (some container runtimes drop it) cannot:
// that is logged once, and rayd keeps the platform's score, while its
// processes still start at 1000 and so are the OOM killer's first
// victims.
func (l *Launcher) protectRayd(pid int) error {
	err := protectFromOOM(pid)
	if errors.Is(err, fs.ErrPermission) {
		l.oomOnce.Do(func() {
			l.log.Warn("launcher: cannot set rayd's oom_score_adj to -1000 (no CAP_SYS_RESOURCE): sandbox processes (oom_score_adj 1000) remain the OOM killer's first victims, but rayd is not exempt", "err", err.Error())
		})
		return nil
	}
	return err
}

// wireIsolated puts the init pid in its cgroup v1 hierarchies (v2 cloned
// it into its cgroup) and wires its network: veth, forwarding when it has
// Internet access, nftables rules. Joining cgroup v1 hierarchies costs a
// few milliseconds each (the kernel waits for an RCU grace period): it is
// done while the network is wired, and both are done before it returns.
func (l *Launcher) wireIsolated(pid int, spec Spec, dirs []string, veth string, host, guest netip.Addr) error {
	cgDone := make(chan error, 1)
	if l.cg.Version() == cgroup.V1 {
		go func() { cgDone <- cgroup.AddProc(dirs, pid) }()
	} else {
		cgDone <- nil
	}
	netErr := func() error {
		if err := l.net.Setup(pid, veth, host, guest); err != nil {
			return err
		}
		if spec.Internet {
			if err := hostnet.EnableForwarding(); err != nil {
				return err
			}
		}
		return l.fw.Install(spec.ID, veth, guest, spec.Internet, true)
	}()
	if err := <-cgDone; err != nil {
		return err
	}
	return netErr
}

// destroyOnError undoes a launch that failed (*err != nil): deferred by
// every launch path right after it made its instance.
func (l *Launcher) destroyOnError(inst *instance, err *error) {
	if *err == nil {
		return
	}
	if derr := inst.destroy(context.Background()); derr != nil {
		l.log.Error("launcher: cleaning up a failed launch", "id", inst.rec.ID, "err", derr.Error())
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// launchPlain launches rayd without isolation (unprivileged mode).
func (l *Launcher) launchPlain(ctx context.Context, spec Spec) (_ *instance, err error) {
	inst := &instance{l: l, done: make(chan struct{}), pidfd: -1, rec: Record{ID: spec.ID, Dir: spec.Dir}}
	defer l.destroyOnError(inst, &err)
	ld, err := prepareDir(spec.Dir)
	if err != nil {
		return inst, err
	}
	state := filepath.Join(ld, "rayd")
	if err := os.Mkdir(state, 0o700); err != nil {
		return inst, err
	}
	sys := &syscall.SysProcAttr{Setsid: true}
	if c := l.opts.unprivCred; c != nil {
		for _, p := range []string{ld, state} {
			if err := os.Lchown(p, int(c.UID), int(c.GID)); err != nil {
				return inst, err
			}
		}
		sys.Credential = &syscall.Credential{Uid: c.UID, Gid: c.GID}
	}
	api, err := freePort()
	if err != nil {
		return inst, err
	}
	hooks, err := freePort()
	for err == nil && hooks == api {
		hooks, err = freePort()
	}
	if err != nil {
		return inst, err
	}
	inst.rec.APIAddr = "127.0.0.1:" + strconv.Itoa(api)
	inst.rec.HooksAddr = "127.0.0.1:" + strconv.Itoa(hooks)
	cfg := &initConfig{
		Mode: modePlain, ID: spec.ID, Env: spec.Env,
		RaydArgs: append([]string{"--api-addr", inst.rec.APIAddr, "--hooks-addr", inst.rec.HooksAddr, "--state-dir", state, "--isolation", string(IsolationNone)}, l.raydArgs()...),
	}
	// The platform's services: their directory is the one descriptor a
	// plain init gets (it shares the platform's file system).
	platformDir := ""
	if svc, err := l.serveServices(spec.Dir, spec.ID); err != nil {
		return inst, err
	} else if svc != nil {
		inst.svc = svc
		platformDir, cfg.PlatformDir = filepath.Join(spec.Dir, servicesDirName), true
	}
	s, err := startInit(l.exe, cfg, baseEnv(false), sys, spec.LogPath)
	if err != nil {
		return inst, err
	}
	inst.attachChild(s)
	inst.svc.setPid(s.pid)
	defer s.sync.Close()
	if _, inst.rec.PidStartTime, err = procStat(s.pid); err != nil {
		return inst, fmt.Errorf("launcher: the sandbox init vanished: %w", err)
	}
	if err := release(ctx, s, platformDir); err != nil {
		return inst, fmt.Errorf("%w (log: %s)", err, spec.LogPath)
	}
	return inst, nil
}

// checkRecord validates a persisted record before acting on it.
func (l *Launcher) checkRecord(rec Record) error {
	if err := validID(rec.ID); err != nil {
		return err
	}
	if err := checkDir(l.opts.StateDir, rec.Dir); err != nil {
		return err
	}
	if rec.Rootless && !l.rootless {
		return fmt.Errorf("launcher: sandbox %s was launched in a rootless user namespace, and this launcher is not rootless", rec.ID)
	}
	if rec.SlirpPid != 0 && (!rec.Rootless || rec.SlirpPid <= 1) {
		return fmt.Errorf("launcher: record of %s names a network stack it cannot have", rec.ID)
	}
	if rec.Privileged {
		if !l.priv {
			return fmt.Errorf("launcher: sandbox %s was launched with namespaces: %w", rec.ID, ErrNotPrivileged)
		}
		if l.cgErr != nil {
			return l.cgErr
		}
		for _, d := range rec.Cgroups {
			if !l.cg.Owns(d, rec.ID) {
				return fmt.Errorf("launcher: record of %s names a cgroup outside the launcher's", rec.ID)
			}
		}
		if rec.Veth != "" && rec.Veth != l.n.vethName(rec.ID) {
			return fmt.Errorf("launcher: record of %s names a veth the launcher did not create", rec.ID)
		}
		if _, err := netip.ParseAddr(rec.GuestIP); err != nil {
			return fmt.Errorf("launcher: record of %s: bad guest address", rec.ID)
		}
		if rec.UIDBase != 0 && uidBlockOf(rec.UIDBase) < 0 {
			return fmt.Errorf("launcher: record of %s names a uid range outside the launcher's", rec.ID)
		}
	}
	return nil
}

// fromRecord builds an instance for a sandbox this process did not start.
func (l *Launcher) fromRecord(rec Record) *instance {
	rec.Cgroups = append([]string(nil), rec.Cgroups...)
	inst := &instance{l: l, rec: rec, done: make(chan struct{}), pidfd: -1}
	if rec.Rootless && rec.SlirpPid != 0 {
		inst.slirp = adoptSlirp(rec.SlirpPid, rec.SlirpStartTime) // nil when gone
	}
	if rec.Privileged {
		inst.rec.Cgroups = l.cg.Dirs(rec.ID)
		inst.oomFile = cgroup.MemoryEventsFile(inst.rec.Cgroups)
		inst.rec.Veth = l.n.vethName(rec.ID)
		if g, err := netip.ParseAddr(rec.GuestIP); err == nil && g.Is4() {
			inst.slot, _ = g.Prefix(30)
		}
	}
	return inst
}

// Adopt takes over a sandbox from a record persisted by a previous platform
// process. Its init must be alive and have the recorded start time;
// otherwise the error wraps ErrGone (call Cleanup then). The instance's
// ExitCode is unknown (ok=false): it is not this process's child.
func (l *Launcher) Adopt(rec Record) (Instance, error) {
	if err := l.checkRecord(rec); err != nil {
		return nil, err
	}
	l.mu.Lock()
	if inst, ok := l.insts[rec.ID]; ok {
		l.mu.Unlock()
		if inst == nil {
			return nil, fmt.Errorf("launcher: sandbox %s is being launched", rec.ID)
		}
		return inst, nil
	}
	l.mu.Unlock()
	fd, err := openPidfd(rec.Pid, rec.PidStartTime)
	if err != nil {
		return nil, fmt.Errorf("launcher: adopting %s: %w", rec.ID, err)
	}
	inst := l.fromRecord(rec)
	inst.pidfd = fd
	if rec.Privileged {
		// Put back what a restart may have lost: the table (someone may
		// have flushed the ruleset) and, with Internet, forwarding; check
		// that its uid range is still its own.
		var err error
		if rec.UIDBase != 0 {
			err = l.holdsUIDs(rec.UIDBase, rec.ID)
		}
		if err == nil && rec.Internet {
			err = hostnet.EnableForwarding()
		}
		if err == nil {
			err = l.fw.Install(rec.ID, inst.rec.Veth, netip.MustParseAddr(rec.GuestIP), rec.Internet && !l.fw.HasRules(rec.ID), false)
		}
		if err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if rec.Rootless && rec.Internet {
		if inst.slirp == nil {
			// Its slirp4netns died (it outlives platforms, not crashes):
			// start another one.
			l.log.Warn("launcher: adopting a rootless sandbox whose "+slirpBinary+" is gone: starting a new one", "id", rec.ID)
			if err := l.restartSlirp(inst); errors.Is(err, ErrGone) {
				unix.Close(fd)
				return nil, fmt.Errorf("launcher: adopting %s: %w", rec.ID, err)
			} else if err != nil {
				// Its code keeps running, without Internet access.
				l.log.Error("launcher: adopted sandbox left without Internet access", "id", rec.ID, "err", err.Error())
			}
		}
		if inst.slirp != nil {
			go logSlirpExit(l.log, inst, inst.slirp)
		}
	}
	var lifecycle *os.File
	if rec.Privileged {
		// rayd's lifecycle channel outlives platforms: take it over.
		var err error
		if lifecycle, err = openLifecycle(launcherDir(rec.Dir)); err != nil && !errors.Is(err, errNoLifecycle) {
			l.log.Warn("launcher: adopted sandbox's lifecycle channel unusable: its suspend requests are not seen", "id", rec.ID, "err", err.Error())
		}
	}
	l.mu.Lock()
	if other, ok := l.insts[rec.ID]; ok {
		l.mu.Unlock()
		unix.Close(fd)
		if lifecycle != nil {
			lifecycle.Close()
		}
		if inst.slirp != nil && inst.slirp.cmd != nil {
			_ = inst.slirp.stop(time.Now().Add(5 * time.Second)) // ours, restarted in vain
		}
		if other == nil {
			return nil, fmt.Errorf("launcher: sandbox %s is being launched", rec.ID)
		}
		return other, nil
	}
	if inst.slot.IsValid() {
		l.slots[inst.slot] = rec.ID
	}
	if lifecycle != nil {
		inst.startLifecycle(lifecycle)
	}
	l.insts[rec.ID] = inst
	l.mu.Unlock()
	if svc, err := l.serveServices(rec.Dir, rec.ID); err != nil {
		l.log.Warn("launcher: adopted sandbox's services unusable: its checkpoints fail until it ends", "id", rec.ID, "err", err.Error())
	} else {
		inst.svc = svc
		svc.setPid(rec.Pid)
	}
	go inst.watch()
	l.log.Info("launcher: sandbox adopted", "id", rec.ID, "pid", rec.Pid)
	return inst, nil
}

// Cleanup removes every leftover of a sandbox: it kills whatever still runs
// in it, then removes its cgroups, veth, nftables rules and the launcher's
// files under its Dir. Idempotent.
func (l *Launcher) Cleanup(rec Record) error {
	if err := l.checkRecord(rec); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), terminateTimeout+5*time.Second)
	defer cancel()
	l.mu.Lock()
	inst, ok := l.insts[rec.ID]
	l.mu.Unlock()
	if ok && inst != nil {
		return inst.Terminate(ctx)
	}
	if ok {
		return fmt.Errorf("launcher: sandbox %s is being launched", rec.ID)
	}
	inst = l.fromRecord(rec)
	if fd, err := openPidfd(rec.Pid, rec.PidStartTime); err == nil {
		inst.pidfd = fd
		go inst.watch()
	} else {
		inst.finish(ExitStatus{}, false)
	}
	return inst.Terminate(ctx)
}

// Sweep removes the leftovers of every sandbox of this launcher's scope
// that is neither in keep nor live in this Launcher: cgroup directories
// (killing what runs in them), veths and nftables rules. Call it at start-up
// with the records the platform still wants, before adopting them. Files
// under sandbox directories are not found by Sweep: use Cleanup for
// records the platform knows about.
func (l *Launcher) Sweep(keep []Record) error {
	if !l.priv {
		return nil
	}
	keepIDs := map[string]bool{}
	for _, r := range keep {
		keepIDs[r.ID] = true
	}
	l.mu.Lock()
	for id := range l.insts {
		keepIDs[id] = true
	}
	l.mu.Unlock()
	keepVeths := map[string]bool{}
	for id := range keepIDs {
		keepVeths[l.n.vethName(id)] = true
	}
	var errs []error
	survivors := map[string]bool{} // ids whose processes may still run
	if l.cg != nil {
		for id, dirs := range l.cg.List(validID) {
			if keepIDs[id] {
				continue
			}
			deadline := time.Now().Add(terminateTimeout)
			if err := cgroup.Kill(dirs, deadline); err != nil {
				errs = append(errs, err)
				survivors[id] = true
			}
			if err := cgroup.Remove(dirs, deadline); err != nil {
				errs = append(errs, err)
			}
			l.log.Info("launcher: swept leftover cgroups", "id", id)
		}
	}
	veths, err := l.net.List(l.n.isVeth)
	if err != nil {
		errs = append(errs, err)
	}
	for _, v := range veths {
		if !keepVeths[v] {
			if err := l.net.Delete(v); err != nil {
				errs = append(errs, err)
			}
			l.log.Info("launcher: swept leftover veth", "veth", v)
		}
	}
	if err := l.fw.Remove(func(id string) bool { return !keepIDs[id] }); err != nil {
		errs = append(errs, err)
	}
	// Conntrack entries of addresses no sandbox has now: a killed
	// platform's, or a sandbox whose network namespace vanished with its
	// rayd (Terminate cleans up after the others).
	l.sweepConntrack()
	// Uid ranges last, once nothing of their sandboxes runs any more.
	for id, base := range l.uidAllocations() {
		if !keepIDs[id] && !survivors[id] {
			if err := l.freeUIDs(base, id); err != nil {
				errs = append(errs, err)
			}
			l.log.Info("launcher: swept leftover uid range", "id", id, "uid_base", base)
		}
	}
	return errors.Join(errs...)
}

// Release removes the machine-wide state of this launcher's scope, its
// nftables table (and the lock file that serializes its changes) and its
// cgroup parent directories, when no sandbox of the
// scope is left: none in this Launcher, and no cgroup or veth of the scope
// on the machine (another platform may share the scope). Otherwise it
// leaves everything as it is, so that a platform that stops and leaves
// sandboxes running keeps them confined. A later launch recreates what it
// needs. Call it when the platform closes: a short-lived platform (such as
// `rayito run`'s) otherwise leaves a table whose input chain every packet
// of the host goes through.
func (l *Launcher) Release() error {
	l.closeBinary()
	// The platform stops: so do its sandboxes' services (the next
	// platform serves them again when it adopts them).
	l.mu.Lock()
	for _, inst := range l.insts {
		if inst != nil {
			inst.svc.close()
		}
	}
	l.mu.Unlock()
	if !l.priv {
		return nil
	}
	l.mu.Lock()
	alive := len(l.insts)
	l.mu.Unlock()
	if alive > 0 {
		return nil
	}
	// Held across the check and the removal: an install of any Launcher
	// of the table (in this process or another) waits, then rebuilds it.
	h := l.fw.Lock()
	defer h.Unlock()
	if l.cg != nil && len(l.cg.List(validID)) > 0 {
		return nil
	}
	if veths, err := l.net.List(l.n.isVeth); err != nil || len(veths) > 0 {
		return err
	}
	var errs []error
	if err := l.fw.DropTableLocked(h); err != nil {
		errs = append(errs, err)
	} else if err := h.RemoveFile(); err != nil {
		// The table is gone: its lock file goes too, so that nothing of
		// the scope stays on the machine.
		errs = append(errs, err)
	}
	if l.cg != nil {
		for _, d := range l.cg.Roots() {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EBUSY) {
				errs = append(errs, fmt.Errorf("launcher: cgroup: removing %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Idle reports whether nothing of this launcher's scope is left: no
// sandbox in this Launcher and no cgroup or veth of the scope on the
// machine. Always true in unprivileged mode (nothing machine-wide).
func (l *Launcher) Idle() bool {
	if !l.priv {
		return true
	}
	l.mu.Lock()
	alive := len(l.insts)
	l.mu.Unlock()
	if alive > 0 {
		return false
	}
	if l.cg != nil && len(l.cg.List(validID)) > 0 {
		return false
	}
	if len(l.uidAllocations()) > 0 {
		return false
	}
	veths, err := l.net.List(l.n.isVeth)
	return err == nil && len(veths) == 0
}

// forget drops a terminated instance.
func (l *Launcher) forget(inst *instance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.insts[inst.rec.ID] == inst {
		delete(l.insts, inst.rec.ID)
	}
	if inst.slot.IsValid() && l.slots[inst.slot] == inst.rec.ID {
		delete(l.slots, inst.slot)
	}
}

// removeLauncherFiles removes the launcher's directory under a sandbox's
// Dir. Only called once nothing of the sandbox runs any more.
func removeLauncherFiles(dir string) error {
	ld := launcherDir(dir)
	if err := os.RemoveAll(ld); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("launcher: removing %s: %w", ld, err)
	}
	return nil
}
