// Package launcher starts, watches, re-adopts and cleans up localvm's
// sandboxes: the local stand-ins for AWS Lambda MicroVMs.
//
// # Isolation is container-grade, not a VM
//
// A localvm sandbox is NOT a virtual machine. It is the guest daemon rayd
// running as PID 1 of fresh Linux namespaces (pid, mount, uts, ipc, net) and
// inside its own cgroup: the isolation of a container, with a shared kernel.
// It is a faithful stand-in for the data path of Lambda MicroVMs on one
// machine, for development and tests, not a security boundary against a
// kernel exploit. Code in a sandbox runs as uid 1000 "user"; a sandbox whose
// code runs as root (RAYITO_ALLOW_ROOT) is not isolated from the host in any
// meaningful way.
//
// # Privileged mode (root)
//
// When the launcher runs as root and namespaces can be created, [Launcher.Launch]
// re-executes the current binary (/proc/self/exe) with argv[0] = [InitArgv0]
// in new namespaces. That child is the sandbox's init: it waits until the
// launcher has put it in its cgroups and wired its network, builds a root
// filesystem in its private mount namespace (a tmpfs with a read-only /usr,
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
//   - cgroups, detected at run time: cgroup v2 (/sys/fs/cgroup/rayito-localvm/<id>,
//     memory.max, pids.max, cgroup.kill) or cgroup v1 (memory, pids and freezer
//     hierarchies, .../rayito-localvm/<id>, killed through the freezer).
//   - a veth pair per sandbox: host side rl-<8 hex> with the first address of a
//     /30 taken from [Options.Subnet], guest side eth0 with the second one and a
//     default route through the host side.
//   - one nftables table, inet rayito_localvm: sandboxes cannot reach the
//     host's own services (input from rl-* is dropped unless it belongs to a
//     connection the host opened), and forwarding from a sandbox is dropped
//     unless it has Internet access, in which case it is accepted and
//     masqueraded (and net.ipv4.ip_forward is turned on, never off). Link-local
//     destinations (169.254.0.0/16, where cloud metadata services live) and
//     other sandboxes stay unreachable in every case.
//
// Files: under each Spec.Dir the launcher keeps one directory, launcher/,
// holding the sandbox's /home/user (home/), the mount point of its root
// (root/) and, in unprivileged mode, rayd's state (rayd/). Terminate and
// Cleanup delete it, /home/user included: like a microVM's disk, a sandbox's
// home does not outlive the sandbox. Spec.LogPath and the rest of Spec.Dir
// are the platform's.
//
// # Unprivileged mode
//
// Without root (or when namespaces cannot be created) the launcher runs rayd
// as a plain child process of the current user on two free loopback ports,
// with no namespaces, no cgroup and no network policy. Its processes run as
// the current user with the user's access to the machine: such sandboxes are
// not isolated at all, and the launcher says so once, at Warn level.
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
// platform (one [Options.Scope]) should manage a machine's sandboxes: Sweep
// removes every sandbox of its scope it is not told to keep.
//
// The launcher never sees tokens, run payloads or commands: it logs ids,
// addresses and errors only.
package launcher
