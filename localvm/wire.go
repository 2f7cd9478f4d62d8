package localvm

// This file is the only one of package localvm that imports the launcher,
// authtoken and proxy packages.

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/authtoken"
	"github.com/rayito-dev/rayito/localvm/internal/launcher"
	proxypkg "github.com/rayito-dev/rayito/localvm/internal/proxy"
	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/localvm/internal/services"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// MaybeRunInit runs a sandbox's init and never returns when this process
// was started as one; otherwise it returns at once. localvm starts each
// sandbox by re-executing the current binary, so every binary that embeds
// localvm (and every test binary that launches sandboxes, in TestMain) must
// call MaybeRunInit first thing in main.
func MaybeRunInit() { launcher.MaybeRunInit() }

// ErrUnisolated is New's error when sandboxes cannot be isolated and
// Options.AllowUnisolated is not set. The error names the missing
// privilege and the ways out.
var ErrUnisolated = launcher.ErrUnisolated

// ErrSandboxBinary is New's error for an Options.SandboxBinary it cannot
// use; the message says why.
var ErrSandboxBinary = launcher.ErrBinary

// SandboxBinaryName is the file name of cmd/rayito-sandbox's binary, as
// releases ship it beside rayito.
const SandboxBinaryName = "rayito-sandbox"

// CheckSandboxBinary reports whether New would accept path as
// Options.SandboxBinary: nil, or an error wrapping ErrSandboxBinary that
// says why not. It starts the binary once, as a probe.
func CheckSandboxBinary(path string) error { return launcher.CheckBinary(path) }

// SandboxBinaryStamp names the code this binary's sandboxes would run,
// which a sandbox binary's must match (Options.SandboxBinary): the
// versions of localvm, rayd and proto ("localvm@v0.2.0 rayd@v0.2.0
// proto@v0.2.0") when the go command recorded them, else rayd's version
// and the release revision linked in ("rayd 0.2.0 <commit>"), else
// "devel", which matches any.
func SandboxBinaryStamp() string { return launcher.BuildStamp() }

// Isolation is how a platform's sandboxes are isolated.
type Isolation = launcher.Isolation

// The isolation modes (see docs/features.md, "localvm without root").
const (
	// IsolationFull: root. User, pid, mount, uts, ipc and net namespaces,
	// a host uid range of its own per sandbox, cgroup limits, a veth and
	// nftables policy.
	IsolationFull = launcher.IsolationFull
	// IsolationRootless: not root, unprivileged user namespaces. The same
	// namespaces, but every sandbox's ids are the caller's uid and gid on
	// the host, rayd and the sandbox's code share that uid, the network is
	// loopback only (Internet access is refused) and there are no cgroup
	// limits (limits are refused).
	IsolationRootless = launcher.IsolationRootless
	// IsolationNone: NOT isolated (Options.AllowUnisolated): plain
	// processes of the current user on loopback ports.
	IsolationNone = launcher.IsolationNone
)

// Isolation reports how the platform isolates its sandboxes.
func (s *Server) Isolation() Isolation {
	if i, ok := s.deps.launcher.(interface{ Isolation() launcher.Isolation }); ok {
		return i.Isolation()
	}
	if s.Privileged() {
		return IsolationFull
	}
	return IsolationNone
}

// wireConfig holds what only tests change: a launcher scope and subnet of
// their own, so that they never touch the real platform's sandboxes.
type wireConfig struct {
	scope  string
	subnet netip.Prefix
}

// authKeyFile is the auth-token key's file in the state directory.
const authKeyFile = "auth.key"

// servicesDir is the directory, in the state directory, of the platform's
// S3-compatible store (its objects and the credentials key).
const servicesDir = "s3"

// wire builds the real launcher, minter and proxy.
func wire(opts Options, wc wireConfig) (deps, error) {
	key, err := authtoken.LoadOrCreateKey(filepath.Join(opts.StateDir, authKeyFile))
	if err != nil {
		return deps{}, fmt.Errorf("localvm: auth key: %w", err)
	}
	minter, err := authtoken.NewMinter(key, nil)
	if err != nil {
		return deps{}, fmt.Errorf("localvm: auth key: %w", err)
	}
	// The store and credentials HOME persistence uses on this machine,
	// as S3 and the execution role on AWS (internal/services).
	svc, err := services.New(filepath.Join(opts.StateDir, servicesDir), opts.Logger)
	if err != nil {
		return deps{}, fmt.Errorf("localvm: %w", err)
	}
	l, err := launcher.New(launcher.Options{StateDir: opts.StateDir, Subnet: wc.subnet, Logger: opts.Logger, Scope: wc.scope, AllowUnisolated: opts.AllowUnisolated, KernelStart: opts.KernelStart, UpstreamCAs: opts.UpstreamCAs, DNS: opts.DNS, Services: svc.Sandbox, Binary: opts.SandboxBinary})
	if errors.Is(err, launcher.ErrUnisolated) {
		return deps{}, fmt.Errorf("localvm: %w (localvm.Options.AllowUnisolated; rayito: --unisolated or RAYITO_UNISOLATED=1)", err)
	}
	if err != nil {
		return deps{}, fmt.Errorf("localvm: launcher: %w", err)
	}
	return deps{
		launcher: l,
		minter:   mintAdapter{minter},
		dial:     l.DialContext,
		// Pre-signed transfers (transfers.go) use the same store.
		transfers: svc,
		newProxy: func(lookup func(string) (*registry.Target, bool)) proxy {
			return proxypkg.New(proxypkg.Options{
				Lookup: func(endpoint string) (proxypkg.Target, bool) {
					t, ok := lookup(endpoint)
					if !ok {
						return nil, false
					}
					return t, true
				},
				Verifier:       minter,
				Logger:         opts.Logger,
				EndpointSuffix: registry.EndpointSuffix,
				DialContext:    l.DialContext,
			})
		},
	}, nil
}

// mintAdapter turns authtoken's *InvalidError into the ValidationException
// the API answers.
type mintAdapter struct{ m *authtoken.Minter }

func (a mintAdapter) Mint(id string, ports []microvmsapi.AllowedPort, ttl time.Duration) (string, time.Time, error) {
	tok, exp, err := a.m.Mint(id, ports, ttl)
	var inv *authtoken.InvalidError
	if errors.As(err, &inv) {
		// Field and Reason name the input's fields and limits, not values.
		return "", time.Time{}, &registry.Error{Type: microvmsapi.ValidationException, Message: inv.Field + " " + inv.Reason + "."}
	}
	return tok, exp, err
}
