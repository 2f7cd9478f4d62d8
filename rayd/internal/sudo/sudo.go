// Package sudo is the sandbox's sudo: a client program (Main, which a
// sandbox runs as /usr/local/bin/sudo on the local platform) and rayd's
// server of it (Server).
//
// A sandbox whose image allows root (RAYITO_ALLOW_ROOT=1 in rayd's
// environment, the security model's rule; the local platform's
// local-root template) gives its users what E2B's base template gives its
// user: passwordless sudo. There is no setuid program: the host's /usr is
// mounted nosuid, and none is needed. The client passes its standard
// descriptors and the command over a Unix socket to rayd, which starts the
// command as the target account (root by default) under the same identity
// rules as every other process (launch.Builder), with sudo's environment
// rules, in the calling program's own terminal or pipes, and reports its
// exit. rayd listens on that socket only when root is allowed: in any
// other sandbox there is nothing to talk to, and sudo says why (exit 1).
//
// Residual risk, by design: where root is allowed, every process of the
// sandbox may become root, as on E2B; root in a sandbox can undo what
// rayd enforces inside it (the network policy, the IMDS block) and read
// what rayd holds (secret values), so a sandbox that must be held to
// those is created from a template that does not allow root.
package sudo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// SocketPath is where rayd serves sudo inside a sandbox that allows root,
// and where the client looks.
const SocketPath = "/run/rayito/sudo.sock"

// maxRequest bounds a request's JSON body.
const maxRequest = 1 << 20

// magic starts every request: "RSU1", then the body's length (uint32,
// big endian); the client's descriptors 0, 1 and 2 travel with it
// (SCM_RIGHTS).
var magic = [4]byte{'R', 'S', 'U', '1'}

// headerLen is the length of the header: the magic and the length.
const headerLen = 8

// Request is what the client asks: the command, and what sudo's options
// said. The server decides everything else (environment, identity, path).
type Request struct {
	// Args are the command and its arguments; empty only with Login or
	// Shell (an interactive shell).
	Args []string `json:"args,omitempty"`
	// Env is the caller's environment: the server keeps of it only what
	// sudo keeps (TERM, the locale, ...), unless PreserveEnv or Preserve.
	Env []string `json:"env,omitempty"`
	// Cwd is the caller's working directory.
	Cwd string `json:"cwd,omitempty"`
	// User is the target account ("" is root): -u.
	User string `json:"user,omitempty"`
	// Login runs the target's login shell (with the command, if any): -i.
	Login bool `json:"login,omitempty"`
	// Shell runs the caller's $SHELL, or the target's shell (with the
	// command, if any): -s.
	Shell bool `json:"shell,omitempty"`
	// PreserveEnv keeps the caller's environment: -E.
	PreserveEnv bool `json:"preserve_env,omitempty"`
	// Preserve keeps these variables of the caller's environment:
	// --preserve-env=LIST.
	Preserve []string `json:"preserve,omitempty"`
	// SetEnv are VAR=value operands before the command.
	SetEnv []string `json:"set_env,omitempty"`
	// Chdir is the working directory to run in: -D.
	Chdir string `json:"chdir,omitempty"`
}

// Reply is one line the server sends: Error (the command did not start,
// or the request was refused) or Exit (it ended), which ends the
// exchange. Started is sent once it runs.
type Reply struct {
	Started bool   `json:"started,omitempty"`
	Exit    *int   `json:"exit,omitempty"`
	Signal  int    `json:"signal,omitempty"` // the signal that killed it, with Exit
	Error   string `json:"error,omitempty"`
}

// Forward is one line the client sends after its request: a signal it
// received, for the command's process group.
type Forward struct {
	Signal int `json:"signal"`
}

// header builds a request's header for a body of n bytes.
func header(n int) []byte {
	b := make([]byte, headerLen)
	copy(b, magic[:])
	binary.BigEndian.PutUint32(b[4:], uint32(n))
	return b
}

// parseHeader reads a header: the body's length.
func parseHeader(b []byte) (int, error) {
	if len(b) != headerLen || [4]byte(b[:4]) != magic {
		return 0, errors.New("not a sudo request")
	}
	n := binary.BigEndian.Uint32(b[4:])
	if n == 0 || n > maxRequest {
		return 0, fmt.Errorf("a request of %d bytes (at most %d)", n, maxRequest)
	}
	return int(n), nil
}

// shellEscape joins args for a shell's -c as sudo does for -s and -i:
// every character but letters, digits, '_', '-' and '$' escaped with a
// backslash.
func shellEscape(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		for _, r := range a {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '$') {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}
