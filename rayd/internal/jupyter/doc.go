// Package jupyter is rayd's Jupyter client: it starts ipykernel processes
// (through the proc supervisor, so they follow the launch rules and count
// in the sandbox's process cap) and speaks the Jupyter wire protocol to
// them itself.
//
// # Library
//
// The protocol runs over ZeroMQ. rayd uses github.com/go-zeromq/zmq4, a
// maintained pure-Go ZeroMQ (ZMTP 3) implementation: rayd stays a static,
// cgo-free binary (no libzmq in the image, no C toolchain to build it),
// and the kernel is reached in-process with no hop. A sidecar (a Python
// jupyter_client relaying JSON lines over stdio) would add a second
// interpreter per sandbox, a process to supervise and a copy of every
// output, for no gain in speed. Only what rayd needs is used: DEALER
// sockets for shell and control, a SUB socket for iopub; the heartbeat
// channel is not used (the supervisor learns of a dead kernel from its
// exit).
//
// # Security
//
// Each kernel gets a fresh 32-byte random key (crypto/rand) when it starts,
// which is always after /run (RPCs need the token /run installs), so no two
// sandboxes cloned from one snapshot share a key. Every outgoing message is
// signed with HMAC-SHA256 and every incoming one is verified; one that
// does not verify is dropped (and counted, never logged in content).
//
// The channels use transport ipc: Unix sockets in a 0700 directory owned
// by the kernel's uid (inside a 0711 base directory rayd owns), next to
// the 0600 connection file holding the key. Processes of any other uid
// can neither connect to the sockets nor read the key, so they can
// neither send a kernel a message nor read a context's output.
//
// Residual risk: the kernel runs as the same uid as the sandbox user's own
// code, as it must (cells are the user's code). Code running as that uid
// can read its own kernels' connection files and so talk to, interrupt,
// or kill those kernels and read their output. That is no more than it can
// already do to its own processes (ptrace, /proc/pid/mem, signals); the
// boundary protects other uids, not the user from themselves.
//
// rayd signals a kernel only after /proc confirms that its pid is still
// rayd's own child, of the expected uid, with the start time recorded when
// it started (T12).
package jupyter
