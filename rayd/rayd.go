// Package rayd exposes the entry point of the guest daemon for the
// programs that embed it (the local platform runs rayd inside each
// sandbox by re-executing its own binary, without a separate build step),
// the sandbox's sudo client, its version and revision, and the one piece
// of rayd the local platform shares: who owns the client end of a local
// TCP connection. Everything else about rayd is internal.
package rayd

import (
	"io"
	"net"

	"github.com/rayito-dev/rayito/rayd/internal/daemon"
	"github.com/rayito-dev/rayito/rayd/internal/peercred"
	"github.com/rayito-dev/rayito/rayd/internal/sudo"
	"github.com/rayito-dev/rayito/rayd/internal/version"
)

// SudoSocket is where a sandbox's rayd serves sudo (its -sudo-socket)
// and where the client looks.
const SudoSocket = sudo.SocketPath

// SudoMain runs the sandbox's sudo client (a program embedding rayd runs
// it when started as "sudo": the local platform binds its own binary at
// /usr/local/bin/sudo in every sandbox) with args (without the program
// name) and returns its exit code. It asks rayd over a Unix socket that
// rayd serves only where root is allowed; elsewhere it says so and fails.
func SudoMain(args []string, stdout, stderr io.Writer) int {
	return sudo.Main(args, stdout, stderr)
}

// Version is rayd's semantic version without the leading v (its Health
// reports it as agent_version).
const Version = version.Version

// BuildRevision returns the commit this rayd was built from: the revision
// a release build links in, else the one the go command stamped ("-dirty"
// added for a work tree with changes), else "unknown" (go install
// module@version, go test).
func BuildRevision() string { return version.BuildRevision() }

// Main runs rayd with command-line args (without the program name) and
// returns its exit code. See `rayd -h` for the flags.
func Main(args []string, stdout, stderr io.Writer) int {
	return daemon.Main(args, stdout, stderr)
}

// TCPClientUID returns the uid (as seen from this process's user
// namespace) that owns the client end of a TCP connection this process
// accepted over a local interface: local and remote are the connection's
// LocalAddr and RemoteAddr. It asks the kernel (an exact sock_diag query,
// the /proc/self/net/tcp tables where that is unavailable), the mechanism
// rayd's hooks tell the platform from sandbox code with. A client in
// another network namespace or on another machine, or one that has already
// closed its socket, is an error. Call it when the connection is
// accepted, before reading from it.
func TCPClientUID(local, remote net.Addr) (uint32, error) {
	o, err := peercred.LookupTCP(local, remote)
	if err != nil {
		return 0, err
	}
	return o.UID, nil
}
