package launcher

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
)

// ErrGone reports that a sandbox's init is no longer running (or its pid now
// belongs to another process).
var ErrGone = errors.New("launcher: sandbox is gone")

// ErrNotPrivileged reports an operation that needs a privileged launcher,
// such as adopting or cleaning up a sandbox launched with namespaces.
var ErrNotPrivileged = errors.New("launcher: needs root and namespaces")

// ErrUnisolated reports that this launcher cannot isolate sandboxes (no
// root and no usable unprivileged user namespaces) and was not allowed to
// start unisolated ones (Options.AllowUnisolated). The error New returns
// wraps it and names the missing privilege and the ways out.
var ErrUnisolated = errors.New("launcher: sandboxes cannot be isolated")

// ErrNeedsPrivilege reports a Spec option that this launcher's isolation
// cannot enforce (a network policy, limits); the error names the missing
// privilege or package.
var ErrNeedsPrivilege = errors.New("launcher: not enforceable without privileges")

// ErrBinary is New's error for an Options.Binary it cannot use: not a
// safe executable, not a sandbox init, or from another release.
var ErrBinary = errors.New("launcher: unusable sandbox binary")

// ErrNoPool is the error of PoolSupport for launchers whose sandboxes
// cannot be pre-booted.
var ErrNoPool = errors.New("launcher: pre-booted sandboxes need the root platform")

// Isolation is how a launcher isolates its sandboxes.
type Isolation string

const (
	// IsolationFull: root; user, pid, mount, uts, ipc and net namespaces,
	// a uid range of its own per sandbox, cgroup limits, a veth and
	// nftables policy.
	IsolationFull Isolation = "full"
	// IsolationRootless: no root; an unprivileged user namespace (every
	// sandbox's ids are the caller's uid and gid) with pid, mount, uts, ipc
	// and net namespaces; only loopback; no cgroup limits.
	IsolationRootless Isolation = "rootless"
	// IsolationNone: rayd is a plain child process of the caller, with the
	// caller's access to the machine. Only with Options.AllowUnisolated.
	IsolationNone Isolation = "none"
)

// DefaultSubnet is the default pool of sandbox addresses: one /30 per
// sandbox.
var DefaultSubnet = netip.MustParsePrefix("10.213.0.0/16")

// Defaults for Spec fields left zero.
const (
	DefaultMemoryBytes = 2 << 30
	DefaultPidsMax     = 1024
)

// Guest ports of rayd.
const (
	guestAPIPort   = 8080
	guestHooksPort = 9000
)

// Options configure a Launcher.
type Options struct {
	// StateDir is the platform's state directory (0700). Required and
	// absolute: every Spec.Dir must lie inside it. Sandboxes never see it.
	StateDir string
	// Subnet is the pool of sandbox addresses, one /30 per sandbox.
	// Zero means DefaultSubnet.
	Subnet netip.Prefix
	// Logger receives the launcher's logs (never tokens, payloads or
	// commands). Nil means slog.Default().
	Logger *slog.Logger
	// Scope separates launchers that must not see each other's sandboxes
	// on one machine, such as test suites running beside a real platform.
	// localvm derives it from the platform's state dir (4 characters,
	// claimed machine-wide); tests of this package use explicit scopes of
	// at most 3 characters. "" is the legacy scope of platforms that
	// predate per-state-dir scopes: cgroups under rayito-localvm, veths
	// rl-*, nftables table rayito_localvm. A scope of 1 to 4 characters
	// [a-z0-9] uses rayito-localvm-<scope>, rs<scope>-* and
	// rayito_localvm_<scope> instead.
	Scope string
	// AllowUnisolated lets the launcher start unisolated sandboxes (plain
	// processes of the caller) when it can isolate none: without it, New
	// fails with an error wrapping ErrUnisolated.
	AllowUnisolated bool
	// KernelStart is rayd's -kernel-start in every sandbox (lazy, preload
	// or eager); "" leaves rayd's default (lazy).
	KernelStart string
	// UpstreamCAs is rayd's -upstream-ca in every sandbox (PEM).
	UpstreamCAs []byte
	// DNS, when set, are the nameservers of every fully isolated
	// sandbox's resolv.conf instead of the host's (rootless sandboxes
	// always use slirp4netns's forwarder).
	DNS []netip.Addr

	// Services, when set, gives the handler of the platform's services
	// for one sandbox's rayd (the metadata service and S3-compatible
	// store of HOME persistence), served on a socket only that rayd
	// reaches (services_linux.go). Nil: none (rayd then looks for AWS's).
	Services func(sandboxID string) http.Handler
	// Binary, when set, is the absolute path of the executable sandboxes
	// start from instead of this binary: one whose main calls
	// MaybeRunInit first and links little else (localvm's
	// cmd/rayito-sandbox), so that every sandbox's init, rayd, sudo and
	// mount helper run none of this binary's other package
	// initialization. It is opened once, by New, and must be a regular
	// executable file of root or of this user that nobody else can
	// write, from the same release (BuildStamp); otherwise New fails
	// with an error wrapping ErrBinary.
	Binary string

	// Test hooks (unexported on purpose).

	// forceUnprivileged runs sandboxes in unprivileged mode even as root.
	forceUnprivileged bool
	// noRootless makes a launcher that is not root behave as if
	// unprivileged user namespaces were unusable.
	noRootless bool
	// noSlirp makes a rootless launcher behave as if slirp4netns were not
	// installed.
	noSlirp bool
	// unprivCred, when set in unprivileged mode, runs rayd as this uid/gid
	// (tests use it to be a non-root rayd while running as root).
	unprivCred *credential
}

type credential struct{ UID, GID uint32 }

// names are the machine-wide names a launcher owns.
type names struct {
	cgroupParent string // directory under each cgroup hierarchy
	vethPrefix   string // host-side veth prefix
	table        string // nftables table (family inet)
	commentTag   string // prefix of the comment carried by per-sandbox rules
}

func namesFor(scope string) (names, error) {
	if scope == "" {
		return names{"rayito-localvm", "rl-", "rayito_localvm", "rayito-localvm:"}, nil
	}
	if len(scope) > 4 { // rs<scope>-<8 hex digits> is at most 15 bytes
		return names{}, fmt.Errorf("launcher: scope %q is longer than 4 characters", scope)
	}
	for _, c := range scope {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return names{}, fmt.Errorf("launcher: scope %q has a character outside [a-z0-9]", scope)
		}
	}
	return names{"rayito-localvm-" + scope, "rs" + scope + "-", "rayito_localvm_" + scope, "rayito-localvm-" + scope + ":"}, nil
}

// vethName is the host-side veth of sandbox id: the prefix and 8 hex
// digits of the id's SHA-256 (at most 15 bytes, the kernel's limit).
func (n names) vethName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return n.vethPrefix + hex.EncodeToString(sum[:4])
}

func (n names) isVeth(name string) bool {
	if !strings.HasPrefix(name, n.vethPrefix) || len(name) != len(n.vethPrefix)+8 {
		return false
	}
	_, err := hex.DecodeString(name[len(n.vethPrefix):])
	return err == nil
}

// isTableName reports whether table is a launcher's table name
// (namesFor): rayito_localvm, or rayito_localvm_ and a scope.
func isTableName(table string) bool {
	scope, ok := strings.CutPrefix(table, "rayito_localvm")
	if !ok {
		return false
	}
	if scope == "" {
		return true
	}
	scope, ok = strings.CutPrefix(scope, "_")
	if !ok || scope == "" || len(scope) > 4 {
		return false
	}
	for _, c := range scope {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// maxIDLen bounds a sandbox id: it names cgroup directories and appears in
// nftables comments (at most 128 bytes with the tag).
const maxIDLen = 100

// validID reports whether id is safe to use in paths and names.
func validID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("launcher: invalid sandbox id: length %d, want 1..%d", len(id), maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok || i == 0 && (c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("launcher: invalid sandbox id: only [A-Za-z0-9._-] allowed, starting with a letter or digit")
		}
	}
	return nil
}

// hostnameFor is the sandbox's hostname: the first 12 characters of its id.
func hostnameFor(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// within reports whether path is strictly inside dir (both absolute and
// clean).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// checkDir validates a sandbox directory against the platform's state dir.
func checkDir(stateDir, dir string) error {
	if dir == "" || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("launcher: sandbox dir must be an absolute, clean path")
	}
	if !within(stateDir, dir) {
		return fmt.Errorf("launcher: sandbox dir must be inside the platform's state dir")
	}
	return nil
}

// launcherDir is the directory under a sandbox's Dir that holds the
// launcher's own files (root mount point, home, rayd's state); Terminate
// and Cleanup remove it and nothing else of Dir.
func launcherDir(dir string) string { return filepath.Join(dir, "launcher") }

// subnetSlot returns the i-th /30 of pool with its host and guest
// addresses.
func subnetSlot(pool netip.Prefix, i int) (slot netip.Prefix, host, guest netip.Addr) {
	b := pool.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(i) * 4
	base := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	slot = netip.PrefixFrom(base, 30)
	host = base.Next()
	guest = host.Next()
	return slot, host, guest
}

// slotCount is the number of /30s in pool.
func slotCount(pool netip.Prefix) int {
	return 1 << (30 - pool.Bits())
}

func checkSubnet(p netip.Prefix) (netip.Prefix, error) {
	if !p.IsValid() {
		return DefaultSubnet, nil
	}
	if !p.Addr().Is4() || p.Bits() > 30 || p.Bits() < 8 {
		return netip.Prefix{}, fmt.Errorf("launcher: subnet %s: want an IPv4 prefix between /8 and /30", p)
	}
	return p.Masked(), nil
}
