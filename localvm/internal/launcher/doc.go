// Package launcher starts, watches, re-adopts and cleans up localvm's
// sandboxes: the local stand-ins for AWS Lambda MicroVMs.
//
// # Isolation is container-grade, not a VM
//
// A localvm sandbox is NOT a virtual machine. It is the guest daemon rayd
// running as PID 1 of fresh Linux namespaces (user, pid, mount, uts, ipc,
// net) and inside its own cgroup: the isolation of a container, with a
// shared kernel. It is a faithful stand-in for the data path of Lambda
// MicroVMs on one machine, for development and tests, not a security
// boundary against a kernel exploit. Code in a sandbox runs as uid 1000
// "user"; a sandbox whose code runs as root (RAYITO_ALLOW_ROOT) is root of
// its user namespace only, but shares the host's kernel.
//
// Each sandbox has a host identity of its own (uidrange_linux.go): its user
// namespace maps uids and gids 0–65535 onto a block of 65536 host ids
// allocated machine-wide, so rayd is host uid <base> and the user
// <base>+1000, and per-uid limits, file ownership and signals never cross
// sandboxes. rayd's oom_score_adj is -1000; its processes start at 1000.
//
// # Privileged mode (root)
//
// When the launcher runs as root and namespaces can be created, [Launcher.Launch]
// re-executes the current binary (/proc/self/exe; or starts
// Options.Binary, a rayito-sandbox, through the descriptor New opened:
// binary_linux.go) with argv[0] = [InitArgv0] in new namespaces. That child is the sandbox's init: it waits until the
// launcher has put it in its cgroups and wired its network, builds a root
// filesystem (package rootfs's steps, composed in sandboxfs_linux.go) in
// its private mount namespace (a tmpfs with a read-only /usr,
// a generated /etc, a private /tmp, /run, /proc and /dev, and /home/user on
// disk under the sandbox's directory; no /sys and nothing of the host's
// /root, /home or the platform's state), pivots into it, sets the hostname
// and runs rayd in-process, listening on :8080 (API) and :9000 (hooks).
// Configuration reaches the child over a pipe, never in argv or the
// environment, and the child's environment is built from scratch: nothing
// of the launcher's environment leaks into a sandbox.
//
// Resources:
//
//   - cgroups (package cgroup), detected at run time: cgroup v2 (/sys/fs/cgroup/rayito-localvm/<id>,
//     memory.max, pids.max, cgroup.kill) or cgroup v1 (memory, pids and freezer
//     hierarchies, .../rayito-localvm/<id>, killed through the freezer).
//   - a veth pair per sandbox (package hostnet): host side rl-<8 hex> with the first address of a
//     /30 taken from [Options.Subnet], guest side eth0 with the second one and a
//     default route through the host side.
//   - one nftables table (package hostnet), inet rayito_localvm: sandboxes cannot reach the
//     host's own services (input from rl-* is dropped unless it belongs to a
//     connection the host opened), and forwarding from a sandbox is dropped
//     unless it has Internet access, in which case it is accepted and
//     masqueraded (and net.ipv4.ip_forward is turned on, never off). Link-local
//     destinations (169.254.0.0/16, where cloud metadata services live) and
//     other sandboxes stay unreachable in every case.
//
// Pre-booted sandboxes (pool_linux.go): the platform may launch sandboxes
// before the request they serve, with no Internet access and the default
// limits ([Launcher.PoolSupport]: privileged sandboxes only);
// [Instance.Assign] then installs the request's egress rules and writes its
// limits to the cgroup again. A sandbox's conntrack entries (its NATed
// flows, the platform's connections to rayd) are deleted when it is
// terminated, and Sweep deletes those of every free address of the
// subnet, so that nothing of a former holder of an address applies to the
// next.
//
// Suspend (suspend_linux.go): [Instance.Freeze] and [Instance.Thaw] use
// the sandbox cgroup's freezer (v1 freezer.state, v2 cgroup.freeze), which
// only privileged sandboxes have ([Launcher.SuspendSupport]); Terminate
// thaws what it kills. rayd gets its cgroup's memory events file
// (-memory-events-fd; the platform reads the same OOM kill counter,
// [Instance.OOMKills]) and the write end of a lifecycle FIFO in the
// launcher directory (-lifecycle-fd), on which it asks to be suspended
// ([Instance.SuspendRequests]); both are close-on-exec in rayd, and a
// re-adopted sandbox's FIFO is reopened.
//
// Files: under each Spec.Dir the launcher keeps one directory, launcher/,
// holding the sandbox's /home/user (home/), the mount point of its root
// (root/), the lifecycle FIFO (lifecycle) and, in unprivileged mode, rayd's
// state (rayd/). Terminate and
// Cleanup delete it, /home/user included: like a microVM's disk, a sandbox's
// home does not outlive the sandbox. Spec.LogPath and the rest of Spec.Dir
// are the platform's.
//
// # Rootless mode (not root, unprivileged user namespaces)
//
// Without root, where the kernel lets an ordinary user create user
// namespaces, each sandbox gets user, pid, mount, uts, ipc and net
// namespaces and the same root filesystem (see rootless_linux.go). The user
// namespace maps one id: the sandbox's uid and gid 1000 are the caller's
// own, which rayd and the sandbox's code share. The network namespace has
// only loopback, plus, with Internet access, tap0 of a slirp4netns the
// launcher starts for it as the caller (slirp_linux.go: the host's
// loopback disabled, link-local and the host's addresses made unreachable
// by routes the sandbox cannot change; it ends with the sandbox); the
// platform reaches rayd through a Unix socket in the sandbox's launcher
// directory ([Launcher.DialContext]). Because rayd and
// the code share a uid, the owner of a loopback connection cannot tell the
// platform from the code: rayd serves the platform's hooks on a second Unix
// socket there (hooks.sock, bound before the pivot, so outside the
// sandbox's filesystem; rayd's --hooks-fd), and its port 9000 inside the
// sandbox answers "illegal" (or acts on a forged /suspend or /resume, which only
// hurts its own sandbox) and counts it as an anomaly. There
// is no cgroup: [Launcher.Check] refuses explicit limits, and Internet
// access when slirp4netns is not installed.
//
// # Unisolated mode (opt-in only)
//
// Where neither works, [New] fails with an error wrapping [ErrUnisolated]
// unless [Options.AllowUnisolated]. Then the launcher runs rayd as a plain
// child process of the current user on two free loopback ports, with no
// namespaces, no cgroup and no network policy: its processes have the
// user's access to the machine. The launcher warns at New and at every
// launch, rayd reports ISOLATION_NONE in Health, and a spec without
// Internet access (which would need a network namespace) is refused.
//
// # Wiring
//
// A program that embeds the launcher must call [MaybeRunInit] first thing in
// main (and tests in TestMain): when the binary was started as a sandbox's
// init it never returns. [New] checks this wiring by starting the binary
// once as a probe.
//
// The platform persists each sandbox's [Record]. After a restart it calls
// [Launcher.Sweep] with the records it still wants, [Launcher.Adopt] for each
// of them, and [Launcher.Cleanup] for records whose sandbox has died. Only one
// platform manages a scope's sandboxes (localvm derives [Options.Scope] from
// its state dir): Sweep removes every sandbox of its scope it is not told to
// keep, and nothing of other scopes.
//
// # Packages
//
// The launcher orchestrates; the kernel plumbing lives in three packages
// it imports, none of which imports it: localvm/internal/cgroup (cgroup
// layout, limits, kill, freezer, OOM counter), localvm/internal/rootfs (the
// steps of a sandbox's root filesystem: generated /etc, bounded tmpfs,
// /dev, bind mounts, pivot_root) and localvm/internal/hostnet (veth pairs
// behind the Netlink interface, the nftables table behind NFT). The
// launcher keeps the init, the sandboxes' names, addresses and uid
// blocks, adoption and cleanup, suspend, the pre-booted pool's
// assignment (with its conntrack cleanup) and rootless mode with its
// slirp4netns.
//
// The launcher never sees tokens, run payloads or commands: it logs ids,
// addresses and errors only.
package launcher
