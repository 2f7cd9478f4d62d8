package launcher

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/rayd"
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
)

// initConfig is what the launcher tells the init, over fd 3.
type initConfig struct {
	Mode     string `json:"mode"`
	ID       string `json:"id"`
	Hostname string `json:"hostname,omitempty"`
	// RootDir is the host path of the (empty) directory the new root is
	// mounted on, in the init's private mount namespace.
	RootDir string `json:"root_dir,omitempty"`
	// HomeDir is the host path of the directory that becomes /home/user.
	HomeDir string `json:"home_dir,omitempty"`
	// RaydArgs are rayd's command-line flags.
	RaydArgs []string `json:"rayd_args"`
	// Env is added to rayd's environment (Spec.Env). It travels here, not
	// in the exec environment, so that it never shows in /proc/<pid>/environ.
	Env []string `json:"env,omitempty"`
}

// MaybeRunInit runs the sandbox init and exits when this process was started
// as one (filepath.Base(os.Args[0]) == InitArgv0); otherwise it returns at
// once. Call it first thing in main() and in TestMain of any test that
// launches sandboxes.
func MaybeRunInit() {
	if len(os.Args) == 0 || filepath.Base(os.Args[0]) != InitArgv0 {
		return
	}
	os.Exit(runInit(os.Args[1:]))
}

func runInit(args []string) int {
	if len(args) > 0 && args[0] == probeArg {
		fmt.Fprintln(os.Stdout, probeReply)
		return 0
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

	var cfg initConfig
	b, err := io.ReadAll(io.LimitReader(cfgFile, maxConfigLen))
	cfgFile.Close()
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, InitArgv0+": reading the configuration:", err)
		return 2
	}

	// Wait until the launcher has put us in our cgroups and wired our
	// network. EOF means it gave up (or died): leave quietly.
	var go1 [1]byte
	if n, _ := syncFile.Read(go1[:]); n != 1 || go1[0] != syncGo {
		return 1
	}

	fail := func(err error) int {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		fmt.Fprintln(os.Stderr, InitArgv0+": "+msg)
		_, _ = syncFile.Write(append([]byte{syncError}, msg...))
		syncFile.Close()
		return 1
	}
	switch cfg.Mode {
	case modeIsolated:
		if err := setupSandbox(&cfg); err != nil {
			return fail(err)
		}
	case modePlain:
	default:
		return fail(fmt.Errorf("unknown mode %q", cfg.Mode))
	}
	for _, kv := range cfg.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			_ = os.Setenv(k, v)
		}
	}
	// ps shows "rayd" rather than "exe" (the name of /proc/self/exe).
	_ = os.WriteFile("/proc/self/comm", []byte("rayd"), 0)
	syscall.Umask(0o022)
	// rayd reports on a copy of the sync socket once it serves, so that
	// the launcher need not poll its ports (see release).
	readyFD, err := unix.FcntlInt(uintptr(initSyncFD), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return fail(fmt.Errorf("duplicating the sync socket: %w", err))
	}
	if _, err := syncFile.Write([]byte{syncOK}); err != nil {
		return 1
	}
	syncFile.Close()
	return rayd.Main(append(cfg.RaydArgs, "-ready-fd", strconv.Itoa(readyFD)), os.Stdout, os.Stderr)
}
