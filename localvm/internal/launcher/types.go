package launcher

import (
	"context"
	"time"
)

// InitArgv0 is the argv[0] under which a binary embedding localvm runs as a
// sandbox's init (see MaybeRunInit).
const InitArgv0 = "rayito-localvm-init"

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
}

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
	// ExitCode is rayd's exit status once Done is closed.
	ExitCode() (code int, ok bool)
	// Terminate kills everything in the sandbox, waits for it and removes
	// every trace: processes, mounts, namespaces, veth, nftables rules,
	// cgroups and the launcher's files. Idempotent.
	Terminate(ctx context.Context) error
}
