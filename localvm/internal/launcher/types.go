package launcher

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// InitArgv0 is the argv[0] under which a binary embedding localvm runs as a
// sandbox's init (see MaybeRunInit).
const InitArgv0 = "rayito-localvm-init"

// SudoArgv0 is the name under which a binary embedding localvm is the
// sandbox's sudo client (see MaybeRunInit): the launcher binds the binary
// at /usr/local/bin/sudo in every sandbox.
const SudoArgv0 = "sudo"

// Spec describes one sandbox to launch.
type Spec struct {
	// ID is the microVM id, "microvm-<uuid>".
	ID string
	// Internet allows outbound traffic to leave the host (NAT; rootless:
	// through slirp4netns, which must be installed); without it the
	// sandbox reaches nothing beyond its veth (rootless: nothing beyond its
	// loopback). Without Internet an unisolated launcher refuses the spec:
	// it cannot take the host's network away.
	Internet bool
	// MemoryBytes is the cgroup memory limit; 0 means 2 GiB (not enforced
	// without root: a launcher without cgroups refuses a non-zero value).
	MemoryBytes int64
	// PidsMax is the cgroup pids limit; 0 means 1024 (likewise).
	PidsMax int
	// LogPath receives rayd's stdout and stderr (created 0600, appended).
	LogPath string
	// Dir is the sandbox's private directory under the platform's state
	// dir (created 0700 by the caller); the launcher keeps its files there.
	Dir string
	// Env is added to rayd's own environment (e.g. RAYITO_ALLOW_ROOT).
	Env []string
	// Template, when set, gives the sandbox a template's layer: only the
	// root platform (namespaces and a user namespace) has templates.
	Template *TemplateLayer
}

// TemplateLayer is a template's root filesystem layer: a directory of the
// platform's (0755, its parents private) holding
//
//	usr/           laid over base/ (an overlayfs upper layer)
//	base/          the host's /usr as it was built on (TemplateBaseDir;
//	               without it, the host's live /usr)
//	opt/           the sandbox's /opt
//	home/          copied into the sandbox's /home/user at start
//	runtime.json   its proto/template.Runtime, written to /etc/rayito/template.json
//
// With Build, the sandbox builds the layer instead: usr/ is the writable
// upper layer of its /usr (work/ the overlay's work directory), opt/ and
// home/ are its /opt and /home/user, read-write, and context/ is bound
// read-only at BuildContextPath. The launcher gives usr/, work/ and opt/ to
// the sandbox's root and home/ to its user; whoever reads the layer
// afterwards owns it again.
type TemplateLayer struct {
	Dir   string
	Build bool
}

// TemplateBaseDir is the directory, in a template's layer, of its base.
const TemplateBaseDir = "base"

// BuildContextPath is where a building sandbox sees the template's copied
// files.
const BuildContextPath = "/run/rayito-build/context"

// Record is what the platform persists about a running sandbox so that a
// restarted platform can re-adopt it or clean up after it. JSON-encoded.
type Record struct {
	ID           string    `json:"id"`
	Pid          int       `json:"pid"`                // the sandbox's init (rayd), in the host's pid namespace
	PidStartTime uint64    `json:"pid_start_time"`     // field 22 of /proc/<pid>/stat, to detect pid reuse
	Privileged   bool      `json:"privileged"`         // launched with namespaces and cgroups
	Rootless     bool      `json:"rootless,omitempty"` // launched in an unprivileged user namespace (reached through Dir's dial socket)
	APIAddr      string    `json:"api_addr"`           // host-reachable address of rayd's API (port 8080 in the guest)
	HooksAddr    string    `json:"hooks_addr"`         // host-reachable address of rayd's hooks (port 9000 in the guest)
	GuestIP      string    `json:"guest_ip,omitempty"`
	HostIP       string    `json:"host_ip,omitempty"`
	Veth         string    `json:"veth,omitempty"`    // host-side veth name
	Cgroups      []string  `json:"cgroups,omitempty"` // cgroup directories created for it
	Internet     bool      `json:"internet,omitempty"`
	UIDBase      uint32    `json:"uid_base,omitempty"` // host uid/gid of root in its user namespace (65536 ids); 0: none
	Dir          string    `json:"dir"`
	StartedAt    time.Time `json:"started_at"`

	// SlirpPid and SlirpStartTime name the slirp4netns of a rootless
	// sandbox with Internet access (its user-space network stack).
	SlirpPid       int    `json:"slirp_pid,omitempty"`
	SlirpStartTime uint64 `json:"slirp_start_time,omitempty"`
}

// Instance is a launched sandbox.
type Instance interface {
	ID() string
	Record() Record
	// APIAddr and HooksAddr are host-reachable addresses of rayd.
	APIAddr() string
	HooksAddr() string
	// GuestAddr returns a host-reachable address of a guest port (privileged
	// mode only; unprivileged sandboxes share the host's network and only
	// expose rayd's API).
	GuestAddr(port int) (string, error)
	// Done is closed when the sandbox's init (rayd) has exited.
	Done() <-chan struct{}
	// ExitCode is rayd's exit status once Done is closed: its exit code,
	// or 128+n when signal n killed it.
	ExitCode() (code int, ok bool)
	// ExitStatus is how rayd ended once Done is closed. ok is false
	// before, and for an adopted sandbox (not this process's child: only
	// its parent could collect the status).
	ExitStatus() (st ExitStatus, ok bool)
	// Freeze stops every process of the sandbox (the cgroup freezer: v1
	// freezer.state FROZEN, v2 cgroup.freeze 1) and returns once the
	// kernel reports the cgroup frozen. Thaw lets them run again. Both
	// are idempotent; without a freezer (rootless, unisolated) they fail
	// with an error wrapping ErrNoFreezer.
	Freeze(ctx context.Context) error
	Thaw(ctx context.Context) error
	// OOMKills reads the sandbox cgroup's OOM kill counter (memory.events
	// oom_kill on cgroup v2, memory.oom_control oom_kill on v1); ok is
	// false without one.
	OOMKills() (n uint64, ok bool)
	// OOMBaseline is OOMKills while rayd is alive and nothing is killing
	// it (no SIGKILL pending, not exiting): a count that cannot include a
	// kill of rayd itself. ok is false otherwise.
	OOMBaseline() (n uint64, ok bool)
	// SuspendRequests delivers rayd's requests to be suspended (its
	// lifecycle deadline with on_timeout=pause has passed), coalesced: at
	// most one is pending. Nil (never ready) for sandboxes without the
	// lifecycle channel.
	SuspendRequests() <-chan struct{}
	// Assign gives a sandbox launched for the platform's pool of
	// pre-booted sandboxes (launched with no Internet access and the
	// default limits) what the request it is handed out for asks: its
	// Internet access (the nftables rules Launch would have installed)
	// and its limits (written to its cgroup again). Limits other than the
	// ones it was launched with cannot be applied (rayd and the tmpfs
	// sizes were set from them): the error wraps ErrAssignLimits and the
	// sandbox is unchanged. Only privileged sandboxes can be assigned
	// (ErrNotPrivileged otherwise); a sandbox whose rayd has exited fails
	// with ErrGone.
	Assign(ctx context.Context, a Assignment) error
	// Terminate kills everything in the sandbox, waits for it and removes
	// every trace: processes, mounts, namespaces, veth, nftables rules,
	// conntrack entries, cgroups and the launcher's files. Idempotent.
	Terminate(ctx context.Context) error
}

// Assignment is what Instance.Assign applies to a pre-booted sandbox: the
// fields of Spec that a request decides.
type Assignment struct {
	// Internet, MemoryBytes and PidsMax as in Spec (0: the defaults).
	Internet    bool
	MemoryBytes int64
	PidsMax     int
}

// ErrAssignLimits is Assign's error for limits other than the ones the
// sandbox was launched with.
var ErrAssignLimits = errors.New("launcher: a pre-booted sandbox keeps the limits it was launched with")

// ExitStatus is how a sandbox's rayd ended.
type ExitStatus struct {
	// Code is the exit code when Signal is 0.
	Code int
	// Signal is the signal that killed rayd; 0 when it exited.
	Signal syscall.Signal
}

// ErrNoFreezer is the error of Freeze and Thaw for sandboxes without a
// cgroup freezer (rootless and unisolated ones).
var ErrNoFreezer = errors.New("launcher: suspend needs the root platform's cgroup freezer")
