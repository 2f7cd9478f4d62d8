package daemon

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/rayd/internal/peercred"
)

// listenChildEnv makes the test binary run listenChild with the
// arguments in listenArgsEnv (one a line) instead of the tests; with
// listenUpLoEnv it first brings up the loopback of the fresh network
// namespace it was started in.
const (
	listenChildEnv = "RAYD_TEST_LISTEN_CHILD"
	listenArgsEnv  = "RAYD_TEST_LISTEN_ARGS"
	listenUpLoEnv  = "RAYD_TEST_LISTEN_UP_LO"
	// listenExitEnv names a file listenChild writes Main's exit code to:
	// the parent's supervisor (tests share one, which reaps every child of
	// the test binary) may reap the child before exec.Cmd.Wait does.
	listenExitEnv = "RAYD_TEST_LISTEN_EXIT_FILE"
)

// listenChild runs Main (rayd) with the arguments of listenArgsEnv until
// it is signalled, then exits with its code.
func listenChild() {
	if os.Getenv(listenUpLoEnv) == "1" {
		if err := loopbackUp(); err != nil {
			fmt.Fprintln(os.Stderr, "loopback up:", err)
			os.Exit(3)
		}
	}
	code := Main(strings.Split(os.Getenv(listenArgsEnv), "\n"), os.Stdout, os.Stderr)
	if f := os.Getenv(listenExitEnv); f != "" {
		_ = os.WriteFile(f, []byte(strconv.Itoa(code)), 0o600)
	}
	os.Exit(code)
}

// loopbackUp sets lo up (a fresh network namespace has it down, without
// 127.0.0.1 or ::1).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// startListenChild starts rayd (the test binary in listenChild mode) with
// args plus a state dir and a ready descriptor, in a network namespace of
// its own when netns, waits until it serves and returns its pid; it is
// stopped when the test ends.
func startListenChild(t *testing.T, netns bool, args ...string) int {
	t.Helper()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer readyR.Close()
	args = append(args, "-state-dir", filepath.Join(t.TempDir(), "state"), "-ready-fd", "3")
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), listenChildEnv+"=1", listenArgsEnv+"="+strings.Join(args, "\n"))
	if netns {
		cmd.Env = append(cmd.Env, listenUpLoEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	}
	cmd.ExtraFiles = []*os.File{readyW}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		readyW.Close()
		t.Fatal(err)
	}
	readyW.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	_ = readyR.SetReadDeadline(time.Now().Add(30 * time.Second))
	if got, err := io.ReadAll(readyR); err != nil || string(got) != "R" {
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("rayd %q is not ready (%q, %v); its output:\n%s", args, got, err, logs.String())
	}
	return cmd.Process.Pid
}

// tcpListeners returns the addresses of the listening TCP sockets process
// pid holds, read from its descriptors and its network namespace's
// /proc/net/tcp and tcp6.
func tcpListeners(t *testing.T, pid int) []netip.AddrPort {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[uint64]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if s, ok := strings.CutPrefix(l, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	var out []netip.AddrPort
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			if table == "tcp6" && os.IsNotExist(err) {
				continue // no IPv6
			}
			t.Fatal(err)
		}
		err = peercred.ParseTable(f, func(r peercred.Row) bool {
			if r.State == peercred.StateListen && inodes[r.Inode] {
				out = append(out, r.LocalIP)
			}
			return true
		})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return out
}

// hasIPv6Loopback reports whether this machine's kernel has IPv6 (a fresh
// namespace's lo then gets ::1 when it comes up).
func hasIPv6Loopback() bool {
	_, err := os.Stat("/proc/net/if_inet6")
	return err == nil
}

// rayd started with only -api-addr on a loopback address holds no socket
// anywhere else: the hooks and the E2B envd and code-interpreter ports
// follow the API's host (before, they listened on [::]:9000, [::]:49983
// and [::]:49999). As root rayd runs in a network namespace of its own,
// where those fixed ports are free, and every listener is checked; without
// root the hooks get a port of their own and the E2B ports may be taken by
// another process (then rayd serves without them), so what is checked is
// that nothing listens beyond the loopback address.
func TestListenersFollowAPIAddr(t *testing.T) {
	t.Parallel()
	root := os.Geteuid() == 0
	if !root {
		t.Log("not root: rayd shares this network namespace, so the fixed ports are checked only when free")
	}
	hosts := []string{"127.0.0.1"}
	if root && hasIPv6Loopback() {
		hosts = append(hosts, "::1")
	}
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			t.Parallel()
			ip := netip.MustParseAddr(host)
			args := []string{"-api-addr", netip.AddrPortFrom(ip, 0).String()}
			if !root {
				args = append(args, "-hooks-addr", netip.AddrPortFrom(ip, 0).String())
			}
			pid := startListenChild(t, root, args...)
			got := tcpListeners(t, pid)
			ports := map[uint16]bool{}
			for _, ap := range got {
				if ap.Addr().Unmap() != ip {
					t.Errorf("rayd listens on %s, beyond %s", ap, host)
				}
				ports[ap.Port()] = true
			}
			if !root {
				if len(got) < 2 {
					t.Errorf("listeners %v: want at least the API and the hooks", got)
				}
				return
			}
			if len(got) != 4 || !ports[9000] || !ports[49983] || !ports[49999] {
				t.Errorf("listeners %v: want the API, the hooks (9000) and the E2B ports (49983, 49999), on %s", got, host)
			}
		})
	}
}
