// Package localplatform is the contract between a local platform and its
// clients on one machine: where a user's platform keeps its state by
// default, and the file in which a serving platform records its endpoint,
// so that the CLI and the SDK find their user's own platform without
// configuration, even when another user's platform holds the default
// address.
package localplatform

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The local platform's images (templates). Both run the host's own /usr;
// RootImage has RAYITO_ALLOW_ROOT=1 in rayd's environment, the security
// model's "in the image": clients may run commands and file operations as
// root, and the sandbox's users have a working sudo. Image, the default,
// keeps every process of the sandbox's code at uid 1000 or above.
const (
	Image     = "local"
	RootImage = "local-root"
)

// DefaultEndpoint is where a platform serves unless told otherwise.
const DefaultEndpoint = "http://127.0.0.1:7450"

// EndpointEnv is the environment variable that names the local
// platform's endpoint, first in Endpoint's order.
const EndpointEnv = "RAYITO_ENDPOINT"

// EndpointFile is the file, in a platform's state directory, that holds
// the endpoint it serves (one line, e.g. "http://127.0.0.1:7450") while it
// serves.
const EndpointFile = "endpoint"

// maxRecord bounds what ReadEndpoint reads.
const maxRecord = 256

// DefaultStateDir is the default state directory of the user's local
// platform: $XDG_STATE_HOME/rayito/localvm when XDG_STATE_HOME is an
// absolute path, else /var/lib/rayito/localvm for root (euid 0), else
// $HOME/.local/state/rayito/localvm (home from getenv("HOME"), else
// os.UserHomeDir, else the temporary directory).
func DefaultStateDir(getenv func(string) string, euid int) string {
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "rayito", "localvm")
	}
	if euid == 0 {
		return "/var/lib/rayito/localvm"
	}
	home := getenv("HOME")
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	if home == "" {
		home = os.TempDir()
	}
	return filepath.Join(home, ".local", "state", "rayito", "localvm")
}

// ErrInvalidEndpoint: an endpoint that is not http://HOST:PORT on a
// loopback address.
var ErrInvalidEndpoint = errors.New("localplatform: the endpoint is not http://HOST:PORT on a loopback address")

// CheckEndpoint accepts exactly http://HOST:PORT where HOST is localhost
// or a loopback IP, with no path, user, query or fragment.
func CheckEndpoint(endpoint string) error {
	if !strings.HasPrefix(endpoint, "http://") { // exactly: url.Parse lowercases a scheme
		return ErrInvalidEndpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" ||
		(u.Path != "" && u.Path != "/") {
		return ErrInvalidEndpoint
	}
	if port, err := strconv.Atoi(u.Port()); err != nil || port < 1 || port > 65535 {
		return ErrInvalidEndpoint
	}
	h := u.Hostname()
	if h != "localhost" {
		ip := net.ParseIP(h)
		if ip == nil || !ip.IsLoopback() {
			return ErrInvalidEndpoint
		}
	}
	return nil
}

// WriteEndpoint records endpoint in stateDir (atomically, mode 0600).
func WriteEndpoint(stateDir, endpoint string) error {
	if err := CheckEndpoint(endpoint); err != nil {
		return err
	}
	f, err := os.CreateTemp(stateDir, "."+EndpointFile+"-*")
	if err != nil {
		return fmt.Errorf("localplatform: record the endpoint: %w", err)
	}
	_, werr := f.WriteString(endpoint + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(stateDir, EndpointFile))
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("localplatform: record the endpoint: %w", werr)
	}
	return nil
}

// RemoveEndpoint removes the record of endpoint from stateDir, unless it
// records another one by now (a newer platform's).
func RemoveEndpoint(stateDir, endpoint string) {
	if got, ok := ReadEndpoint(stateDir); ok && got == endpoint {
		_ = os.Remove(filepath.Join(stateDir, EndpointFile))
	}
}

// ReadEndpoint returns the endpoint recorded in stateDir, if there is a
// valid one: a regular file of at most 256 bytes holding one endpoint that
// passes CheckEndpoint. Anything else is as if there were none.
func ReadEndpoint(stateDir string) (string, bool) {
	f, err := os.Open(filepath.Join(stateDir, EndpointFile))
	if err != nil {
		return "", false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxRecord {
		return "", false
	}
	b := make([]byte, maxRecord+1)
	n, _ := f.Read(b)
	if n > maxRecord {
		return "", false
	}
	ep := strings.TrimSpace(string(b[:n]))
	if CheckEndpoint(ep) != nil {
		return "", false
	}
	return strings.TrimSuffix(ep, "/"), true
}

// Endpoint is the endpoint a client of the local platform uses: env's
// RAYITO_ENDPOINT when set, else the one recorded in the user's default
// state directory, else DefaultEndpoint. The bool tells whether it came
// from the record.
func Endpoint(getenv func(string) string, euid int) (string, bool) {
	if e := getenv(EndpointEnv); e != "" {
		return strings.TrimRight(e, "/"), false
	}
	if e, ok := ReadEndpoint(DefaultStateDir(getenv, euid)); ok {
		return e, true
	}
	return DefaultEndpoint, false
}

// What a local platform gives each sandbox's rayd for HOME persistence,
// the way AWS gives a microVM's rayd its execution role (the instance
// metadata service) and S3: both are served over one Unix socket, named
// ServicesSocket, in a directory whose descriptor rayd gets
// (-platform-dir-fd) and which nothing else in the sandbox can reach. A
// request's Host tells the metadata service (IMDSHost, IMDSv2 paths) from
// the S3-compatible store (S3Host, path-style).
const (
	ServicesSocket = "platform.sock"
	IMDSHost       = "imds.platform.internal"
	S3Host         = "s3.platform.internal"
	// DefaultBucket is the bucket of the platform's store that
	// persistence uses when none is named.
	DefaultBucket = "rayito-local"
	// Region is the region the platform's metadata service reports.
	Region = "local"
)
