package launcher

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/rootfs"
	"github.com/rayito-dev/rayito/rayd"
	"github.com/rayito-dev/rayito/rayd/mounts3"
)

// The sandbox init is this binary re-executed as /proc/self/exe with
// argv[0] = InitArgv0 and argv[1] = the sandbox id (for ps; never a
// secret). It gets two extra descriptors:
//
//	fd 3 (initConfigFD): the JSON initConfig, up to EOF;
//	fd 4 (initSyncFD):   a socket to the launcher. The init waits for one
//	                     byte ('G') meaning "cgroups and network are ready",
//	                     sets the sandbox up, then answers 'K' (ready, rayd
//	                     starts) or 'E' followed by an error message. After
//	                     'K', rayd writes 'R' on a copy of the socket once it
//	                     serves (its -ready-fd), or closes it by exiting.
//
// In isolated and rootless modes the go byte carries (SCM_RIGHTS) a
// descriptor of the sandbox's launcher directory, which RootDir and
// is relative to, then the descriptors initConfig.ExtraFDs
// names, in that order: in rootless mode with Internet access, the write
// end of its slirp4netns's exit pipe, which rayd keeps (close-on-exec) for
// as long as it lives; in isolated mode, rayd's memory events and
// lifecycle descriptors (suspend_linux.go).
const (
	initConfigFD = 3
	initSyncFD   = 4

	syncGo    = 'G'
	syncOK    = 'K'
	syncError = 'E'
	syncReady = 'R' // rayd's daemon.ReadyByte

	probeArg   = "--probe"
	probeReply = "rayito-localvm-init ok"

	maxConfigLen = 1 << 20
)

// Init modes.
const (
	modeIsolated = "isolated" // namespaces, rootfs, pivot_root
	modePlain    = "plain"    // no isolation (unprivileged mode)
	modeRootless = "rootless" // an unprivileged user namespace (see rootless_linux.go)
)

// raydStageArg is argv[1] of a rootless init re-executed, without
// capabilities, to become rayd: argv[2] is a descriptor of its raydStage
// JSON, argv[3] the dial socket's and argv[4] the hooks socket's.
const raydStageArg = "--rayd-stage"

// raydStage is what a rootless init passes to its second stage.
type raydStage struct {
	RaydArgs []string `json:"rayd_args"`
	Env      []string `json:"env,omitempty"`
}

// initConfig is what the launcher tells the init, over fd 3.
type initConfig struct {
	Mode     string `json:"mode"`
	ID       string `json:"id"`
	Hostname string `json:"hostname,omitempty"`
	// RootDir is the (empty) directory the new root is mounted on, in the
	// init's private mount namespace, relative to the launcher directory.
	RootDir string `json:"root_dir,omitempty"`
	// Tmpfs are the size bounds of the sandbox's writable tmpfs mounts.
	Tmpfs rootfs.TmpfsLimits `json:"tmpfs"`
	// RaydArgs are rayd's command-line flags.
	RaydArgs []string `json:"rayd_args"`
	// Env is added to rayd's environment (Spec.Env). It travels here, not
	// in the exec environment, so that it never shows in /proc/<pid>/environ.
	Env []string `json:"env,omitempty"`
	// DNS, when set, are the nameservers of the sandbox's resolv.conf
	// (rootless with Internet: slirp4netns's forwarder).
	DNS []string `json:"dns,omitempty"`
	// Reject are IPv4 prefixes the rootless init makes unreachable in its
	// network namespace ("prohibit" routes) before it drops its
	// capabilities: what slirp4netns would otherwise reach for it.
	Reject []string `json:"reject,omitempty"`
	// ExtraFDs name the descriptors that come with the go byte after the
	// launcher directory's (fdSlirpExit, fdMemoryEvents, fdLifecycle).
	ExtraFDs []string `json:"extra_fds,omitempty"`
	// PlatformDir says that, in plain mode, the directory descriptor that
	// comes with the go byte is the platform's services directory
	// (services_linux.go), not a launcher directory.
	PlatformDir bool `json:"platform_dir,omitempty"`
	// Template is "", templateRun or templateBuild: the layer's descriptor
	// comes as fdTemplate (see TemplateLayer).
	Template string `json:"template,omitempty"`
	// templateFD is that descriptor, in the init; usrIdmapFD a building
	// sandbox's idmapped /usr (fdUsrIdmap).
	templateFD int
	usrIdmapFD int
}

// MaybeRunInit runs the sandbox init and exits when this process was started
// as one (filepath.Base(os.Args[0]) == InitArgv0); otherwise it returns at
// once. Call it first thing in main() and in TestMain of any test that
// launches sandboxes.
func MaybeRunInit() {
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == SudoArgv0 {
		// The sandbox's sudo (this binary, bound at /usr/local/bin/sudo
		// in every sandbox: see setupSandboxBin).
		os.Exit(rayd.SudoMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == MountHelperArgv0 {
		// The S3 mount helper (this binary, bound beside sudo), which
		// rayd starts as uid 990 for each mount (s3mount_linux.go).
		os.Exit(mounts3.Main(os.Args[1:], os.Stderr))
	}
	if len(os.Args) == 0 || filepath.Base(os.Args[0]) != InitArgv0 {
		return
	}
	os.Exit(runInit(os.Args[1:]))
}

func runInit(args []string) int {
	if len(args) > 0 && args[0] == probeArg {
		fmt.Fprintln(os.Stdout, probeReply)
		fmt.Fprintln(os.Stdout, BuildStamp())
		return 0
	}
	if len(args) == 4 && args[0] == raydStageArg {
		return runRaydStage(args[1], args[2], args[3])
	}
	cfgFile := os.NewFile(initConfigFD, "config")
	syncFile := os.NewFile(initSyncFD, "sync")
	if cfgFile == nil || syncFile == nil {
		fmt.Fprintln(os.Stderr, InitArgv0+": started without the launcher's descriptors")
		return 2
	}
	syscall.CloseOnExec(initConfigFD)
	syscall.CloseOnExec(initSyncFD)
	markCloexec()

	cfg, err := readInitConfig(cfgFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, InitArgv0+": reading the configuration:", err)
		return 2
	}

	// Wait until the launcher has put us in our cgroups and wired our
	// network. EOF means it gave up (or died): leave quietly.
	dirFD, extra, ok := recvGo()
	if !ok {
		return 1
	}
	raydArgs, exitFD, platformFD := takeInitFDs(&cfg, initFDs(cfg.ExtraFDs, extra))
	fail := failer(syncFile)
	if cfg.Template != "" && cfg.templateFD < 0 {
		return fail(fmt.Errorf("a template sandbox without its layer"))
	}
	switch cfg.Mode {
	case modeIsolated:
		if dirFD < 0 {
			return fail(fmt.Errorf("no launcher directory received"))
		}
		if err := setupSandbox(&cfg, dirFD); err != nil {
			return fail(err)
		}
	case modeRootless:
		if dirFD < 0 {
			return fail(fmt.Errorf("no launcher directory received"))
		}
		lnFD, err := bindSocket(dirFD, dialSockName)
		if err != nil {
			_ = unix.Close(dirFD)
			return fail(err)
		}
		hooksFD, err := bindSocket(dirFD, hooksSockName)
		if err != nil {
			_ = unix.Close(dirFD)
			return fail(err)
		}
		if err := setupSandbox(&cfg, dirFD); err != nil {
			return fail(err)
		}
		// Never returns unless the exec fails.
		return fail(execRaydStage(&cfg, lnFD, hooksFD, exitFD, platformFD))
	case modePlain:
		if dirFD >= 0 && cfg.PlatformDir && platformFD < 0 {
			raydArgs = append(slices.Clip(raydArgs), raydPlatformDirFlag, strconv.Itoa(dirFD))
		} else if dirFD >= 0 {
			_ = unix.Close(dirFD)
		}
	default:
		return fail(fmt.Errorf("unknown mode %q", cfg.Mode))
	}
	return runRayd(syncFile, cfg.Env, raydArgs, fail, false)
}

// readInitConfig reads the launcher's configuration from f, which it
// closes.
func readInitConfig(f *os.File) (initConfig, error) {
	var cfg initConfig
	b, err := io.ReadAll(io.LimitReader(f, maxConfigLen))
	f.Close()
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	return cfg, err
}

// initFDs names the descriptors that came with the go byte after the
// launcher directory's, in the order of names (cfg.ExtraFDs); one beyond
// them or under a name already taken is closed.
func initFDs(names []string, extra []int) map[string]int {
	fds := map[string]int{}
	for i, fd := range extra {
		if i >= len(names) {
			_ = unix.Close(fd)
			continue
		}
		if _, dup := fds[names[i]]; dup {
			_ = unix.Close(fd)
			continue
		}
		fds[names[i]] = fd
	}
	return fds
}

// takeInitFDs hands each named descriptor to what uses it in cfg.Mode and
// closes those the mode has no use for: it returns rayd's arguments
// (cfg.RaydArgs with the memory events, lifecycle and platform directory
// flags of an isolated sandbox's rayd), the slirp4netns exit pipe of a
// rootless init and the platform's services directory (-1 when absent),
// and sets cfg's template descriptors.
func takeInitFDs(cfg *initConfig, fds map[string]int) (raydArgs []string, exitFD, platformFD int) {
	exitFD = -1
	if fd, ok := fds[fdSlirpExit]; ok {
		if cfg.Mode == modeRootless {
			exitFD = fd
		} else {
			_ = unix.Close(fd)
		}
	}
	raydArgs = cfg.RaydArgs
	for _, f := range []struct{ name, flag string }{{fdMemoryEvents, raydMemoryEventsFlag}, {fdLifecycle, raydLifecycleFlag}} {
		name, flag := f.name, f.flag
		if fd, ok := fds[name]; ok {
			if cfg.Mode == modeIsolated {
				raydArgs = append(raydArgs, flag, strconv.Itoa(fd))
			} else {
				_ = unix.Close(fd)
			}
		}
	}

	// The platform's services directory (services_linux.go): rayd keeps
	// it for its life; a rootless init keeps it across its exec.
	platformFD = -1
	if fd, ok := fds[fdPlatformDir]; ok {
		platformFD = fd
		if cfg.Mode == modeRootless {
			cfg.RaydArgs = append(slices.Clip(cfg.RaydArgs), raydPlatformDirFlag, strconv.Itoa(fd))
		} else {
			raydArgs = append(slices.Clip(raydArgs), raydPlatformDirFlag, strconv.Itoa(fd))
		}
	}

	cfg.templateFD, cfg.usrIdmapFD = -1, -1
	if fd, ok := fds[fdTemplate]; ok {
		if cfg.Mode == modeIsolated && cfg.Template != "" {
			cfg.templateFD = fd
		} else {
			_ = unix.Close(fd)
		}
	}
	if fd, ok := fds[fdUsrIdmap]; ok {
		if cfg.Mode == modeIsolated && cfg.Template == templateBuild {
			cfg.usrIdmapFD = fd
		} else {
			_ = unix.Close(fd)
		}
	}
	return raydArgs, exitFD, platformFD
}

// failer returns the init's way to fail: the error on stderr and, as one
// line, to the launcher over the sync socket; exit status 1.
func failer(syncFile *os.File) func(error) int {
	return func(err error) int {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		fmt.Fprintln(os.Stderr, InitArgv0+": "+msg)
		_, _ = syncFile.Write(append([]byte{syncError}, msg...))
		syncFile.Close()
		return 1
	}
}

// runRayd ends an init as rayd: its environment, its name in ps ("rayd"
// rather than "exe", the name of /proc/self/exe), the umask, and rayd
// itself, which reports on a copy of the sync socket once it serves, so
// that the launcher need not poll its ports (see release). nonDumpable
// makes rayd non-dumpable, for a sandbox whose code runs as rayd's own uid
// (rootless): it then cannot ptrace rayd, copy its descriptors
// (pidfd_getfd) or read its memory; rayd's children are dumpable again
// from their execve.
func runRayd(syncFile *os.File, env, args []string, fail func(error) int, nonDumpable bool) int {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			_ = os.Setenv(k, v)
		}
	}
	_ = os.WriteFile("/proc/self/comm", []byte("rayd"), 0)
	if nonDumpable {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return fail(fmt.Errorf("making rayd non-dumpable: %w", err))
		}
	}
	syscall.Umask(0o022)
	readyFD, err := unix.FcntlInt(uintptr(initSyncFD), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return fail(fmt.Errorf("duplicating the sync socket: %w", err))
	}
	if _, err := syncFile.Write([]byte{syncOK}); err != nil {
		return 1
	}
	syncFile.Close()
	return rayd.Main(append(args, "-ready-fd", strconv.Itoa(readyFD)), os.Stdout, os.Stderr)
}

// maxExtraFDs bounds the descriptors that come with the go byte after the
// launcher directory's.
const maxExtraFDs = 6

// recvGo waits for the launcher's go byte on the sync socket and returns
// the descriptors that came with it, close-on-exec: the launcher
// directory's (-1 if none) and the extra ones, in order (see initSyncFD).
// ok is false on EOF (the launcher gave up or died) or anything else.
func recvGo() (dirFD int, extra []int, ok bool) {
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4*(1+maxExtraFDs)))
	for {
		n, oobn, _, _, err := unix.Recvmsg(initSyncFD, b[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n != 1 || b[0] != syncGo {
			return -1, nil, false
		}
		dirFD = -1
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				fds, err := unix.ParseUnixRights(&m)
				if err != nil {
					continue
				}
				for _, fd := range fds {
					switch {
					case dirFD < 0:
						dirFD = fd
					case len(extra) < maxExtraFDs:
						extra = append(extra, fd)
					default:
						_ = unix.Close(fd)
					}
				}
			}
		}
		return dirFD, extra, true
	}
}

// bindSocket creates one of the rootless sandbox's sockets (dialSockName,
// hooksSockName) in its launcher directory (dirFD, as the init's mount
// namespace sees it, before the pivot: the sandbox never sees that path),
// listening, close-on-exec: execRaydStage hands it to rayd's stage. Never
// an abstract socket: those belong to the network namespace, which the
// sandbox's code shares.
func bindSocket(dirFD int, name string) (int, error) {
	if err := unix.Fchdir(dirFD); err != nil {
		return -1, fmt.Errorf("entering the launcher's directory: %w", err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", name, err)
	}
	_ = unix.Unlink(name)
	old := unix.Umask(0o177) // the socket is the platform's only (0600)
	err = unix.Bind(fd, &unix.SockaddrUnix{Name: name})
	unix.Umask(old)
	if err == nil {
		err = unix.Listen(fd, 64)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", name, err)
	}
	return fd, nil
}

// execRaydStage re-executes the init, in its sandbox, with no capability
// left: the second stage (runRaydStage) is rayd. It returns only on error.
// exitFD (-1: none), slirp4netns's exit pipe, goes through the exec and
// stays open, close-on-exec again in the second stage, for rayd's life;
// so does platformFD (-1: none), the platform's services directory, which
// cfg.RaydArgs names.
func execRaydStage(cfg *initConfig, lnFD, hooksFD, exitFD, platformFD int) error {
	b, err := json.Marshal(raydStage{RaydArgs: cfg.RaydArgs, Env: cfg.Env})
	if err != nil {
		return err
	}
	if len(b) > 60<<10 { // what a pipe holds without a reader
		return fmt.Errorf("rayd's configuration is too large")
	}
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		return err
	}
	if _, err := unix.Write(p[1], b); err != nil {
		return err
	}
	unix.Close(p[1])
	keep := []int{p[0], lnFD, hooksFD, initSyncFD}
	if exitFD >= 0 {
		keep = append(keep, exitFD)
	}
	if platformFD >= 0 {
		keep = append(keep, platformFD)
	}
	for _, fd := range keep {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return err
		}
	}
	// Ambient capabilities are per thread and survive an exec: clear them
	// on the thread that execs. As uid 1000 of its namespace, the new
	// image then starts with no capability at all.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	argv := []string{InitArgv0, raydStageArg, strconv.Itoa(p[0]), strconv.Itoa(lnFD), strconv.Itoa(hooksFD)}
	err = syscall.Exec("/proc/self/exe", argv, os.Environ())
	runtime.UnlockOSThread()
	return fmt.Errorf("re-executing as rayd: %w", err)
}

// runRaydStage is the second stage of a rootless init: rayd, without
// capabilities, serving the dial socket besides and the hooks on the hooks
// socket (--hooks-fd).
func runRaydStage(cfgArg, lnArg, hooksArg string) int {
	cfgFD, err1 := strconv.Atoi(cfgArg)
	lnFD, err2 := strconv.Atoi(lnArg)
	hooksFD, err3 := strconv.Atoi(hooksArg)
	if err1 != nil || err2 != nil || err3 != nil || cfgFD < 3 || lnFD < 3 || hooksFD < 3 {
		fmt.Fprintln(os.Stderr, InitArgv0+": bad rayd stage arguments")
		return 2
	}
	for _, fd := range []int{cfgFD, lnFD, hooksFD, initSyncFD} {
		syscall.CloseOnExec(fd)
	}
	markCloexec()
	syncFile := os.NewFile(initSyncFD, "sync")
	fail := failer(syncFile)
	cfgFile := os.NewFile(uintptr(cfgFD), "rayd-stage")
	b, err := io.ReadAll(io.LimitReader(cfgFile, maxConfigLen))
	cfgFile.Close()
	var st raydStage
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		return fail(fmt.Errorf("reading rayd's configuration: %w", err))
	}
	var caps [2]unix.CapUserData
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&hdr, &caps[0]); err != nil || caps[0].Effective|caps[1].Effective|caps[0].Permitted|caps[1].Permitted != 0 {
		return fail(fmt.Errorf("rayd's stage still holds capabilities (%#x %#x)", caps[1].Permitted, caps[0].Permitted))
	}
	lnFile := os.NewFile(uintptr(lnFD), "dial")
	ln, err := net.FileListener(lnFile)
	lnFile.Close()
	if err != nil {
		return fail(fmt.Errorf("dial socket: %w", err))
	}
	go serveDial(ln.(*net.UnixListener))
	// rayd takes the hooks socket over (a close-on-exec duplicate; it
	// closes hooksFD): no process it starts inherits it. Sandbox code runs
	// as rayd's own uid here, so rayd is made non-dumpable.
	return runRayd(syncFile, st.Env, append(st.RaydArgs, "-hooks-fd", strconv.Itoa(hooksFD)), fail, true)
}
