// Package platform finds the control plane a CLI command talks to: AWS
// when RAYITO_BACKEND=aws, else the user's local platform (at
// RAYITO_ENDPOINT, else where the user's platform recorded it serves, else
// the default address) when it answers, else a local platform started in
// this process for the duration of the command. A local platform serves
// only the user it runs as; another user's is never used.
package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// UnisolatedEnv, set to 1, opts in to unisolated sandboxes like
// --unisolated (rayito local serve|up, rayito run).
const UnisolatedEnv = "RAYITO_UNISOLATED"

// UnisolatedWarning is what stderr gets for every sandbox that is NOT
// isolated (and once when such a platform starts).
const UnisolatedWarning = "rayito: WARNING: this sandbox is NOT isolated: the local platform cannot isolate sandboxes here (not root, and no unprivileged user namespaces) and was started with --unisolated (or " + UnisolatedEnv + "=1); its commands run as your user, with your access to files, processes and the network"

// WarnIfUnisolated writes UnisolatedWarning to w when sbx's daemon says it
// is not isolated. It says nothing on AWS or when the daemon cannot be
// asked.
func WarnIfUnisolated(ctx context.Context, w io.Writer, sbx *rayito.Sandbox) {
	if ok, err := sbx.Isolated(ctx); err == nil && !ok {
		fmt.Fprintln(w, UnisolatedWarning)
	}
}

// unavailableError: nothing answers at the local platform's endpoint. It
// is worded as the SDK words it, and errors.Is matches
// rayito.ErrPlatformUnavailable.
type unavailableError struct{ endpoint string }

func (e unavailableError) Error() string {
	return "no local platform at " + e.endpoint + "; start one with `rayito local up`"
}

func (e unavailableError) Is(target error) bool { return target == rayito.ErrPlatformUnavailable }

// Target is where SDK calls go.
type Target struct {
	// Options select the backend and endpoint for the SDK.
	Options []rayito.Option
	// Endpoint is the local platform's URL ("" on AWS).
	Endpoint string
	// InProcess is set when this process runs the platform; Close stops
	// it and terminates its sandboxes.
	InProcess bool
	stop      func(context.Context) error
}

// Close stops an in-process platform (terminating its sandboxes); it does
// nothing otherwise.
func (t *Target) Close(ctx context.Context) error {
	if t.stop == nil {
		return nil
	}
	return t.stop(ctx)
}

// Endpoint returns the configured local endpoint: RAYITO_ENDPOINT, else
// the one the user's own platform recorded in its default state directory
// (it serves elsewhere than the default when another user's platform holds
// that), else the default (localplatform.Endpoint, as the SDK reads it).
func Endpoint(getenv func(string) string) string {
	ep, _ := localplatform.Endpoint(getenv, os.Geteuid())
	return ep
}

// Probe is what answers at a local platform's endpoint.
type Probe struct {
	// Mine: a local platform answers there and serves this user.
	Mine bool
	// OtherUser: a local platform of another user answers there (it
	// serves only its owner); Owner is its uid, -1 when not said.
	OtherUser bool
	Owner     int
}

// ProbeEndpoint asks the local platform at endpoint for one sandbox of
// its list (2 s at most).
func ProbeEndpoint(ctx context.Context, endpoint string) Probe {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+microvmsapi.PathMicrovms+"?maxResults=1", nil)
	if err != nil {
		return Probe{Owner: -1}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Probe{Owner: -1}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusForbidden && resp.Header.Get(microvmsapi.ErrorTypeHeader) == microvmsapi.NotOwnerException {
		owner, err := strconv.Atoi(resp.Header.Get(microvmsapi.OwnerHeader))
		if err != nil || owner < 0 {
			owner = -1
		}
		return Probe{OtherUser: true, Owner: owner}
	}
	return Probe{Mine: resp.StatusCode == http.StatusOK, Owner: -1}
}

// Answers reports whether a local platform of this user answers at
// endpoint.
func Answers(ctx context.Context, endpoint string) bool { return ProbeEndpoint(ctx, endpoint).Mine }

// OtherUserText says whose platform answers at endpoint.
func (p Probe) OtherUserText(endpoint string) string {
	who := "another user"
	if p.Owner >= 0 {
		who = "another user (uid " + strconv.Itoa(p.Owner) + ")"
	}
	return "the local platform at " + endpoint + " belongs to " + who + " and serves only them"
}

// notOwnerError: the platform at the endpoint is another user's. errors.Is
// matches rayito.ErrNotPlatformOwner (and so ErrPermissionDenied).
type notOwnerError struct {
	endpoint string
	probe    Probe
}

func (e notOwnerError) Error() string {
	return e.probe.OtherUserText(e.endpoint) + "; start your own with `rayito local up`"
}

func (e notOwnerError) Is(target error) bool {
	return target == rayito.ErrNotPlatformOwner || target == rayito.ErrPermissionDenied
}

// Backend is RAYITO_BACKEND: local (the default) or aws; anything else is
// a usage error.
func Backend(getenv func(string) string) (rayito.Backend, error) {
	b, err := rayito.ParseBackend(getenv(rayito.EnvBackend))
	if err != nil {
		return "", cliutil.EnvUsagef("%s must be local or aws, got %q", rayito.EnvBackend, getenv(rayito.EnvBackend))
	}
	return b, nil
}

// Check validates the environment that selects the platform (the backend
// and the endpoint) without contacting anything.
func Check(getenv func(string) string) error {
	b, err := Backend(getenv)
	if err != nil || b == rayito.BackendAWS {
		return err
	}
	_, err = ListenAddr(getenv)
	return err
}

// ListenAddr is host:port of the configured local endpoint.
func ListenAddr(getenv func(string) string) (string, error) {
	ep := Endpoint(getenv)
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" || u.Scheme != "http" || (u.Path != "" && u.Path != "/") {
		return "", cliutil.EnvUsagef("the endpoint (--endpoint or RAYITO_ENDPOINT) must look like http://127.0.0.1:7450, got %q", ep)
	}
	return u.Host, nil
}

// Existing returns the configured platform without starting one: an error
// when no local platform of this user answers (another user's platform at
// the endpoint is a notOwnerError).
func Existing(ctx context.Context, getenv func(string) string) (*Target, error) {
	if err := Check(getenv); err != nil {
		return nil, err
	}
	if b, _ := Backend(getenv); b == rayito.BackendAWS {
		return &Target{Options: []rayito.Option{rayito.WithBackend(rayito.BackendAWS)}}, nil
	}
	ep := Endpoint(getenv)
	switch p := ProbeEndpoint(ctx, ep); {
	case p.OtherUser:
		return nil, notOwnerError{ep, p}
	case !p.Mine:
		return nil, unavailableError{ep}
	}
	return &Target{Endpoint: ep, Options: []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(ep)}}, nil
}

// Ensure returns the configured platform, starting a local one in this
// process when none answers. stderr receives one line saying so.
// allowUnisolated (or RAYITO_UNISOLATED=1) lets that platform start
// sandboxes that are NOT isolated where it cannot isolate any.
func Ensure(ctx context.Context, getenv func(string) string, stderr io.Writer, allowUnisolated bool) (*Target, error) {
	if err := Check(getenv); err != nil {
		return nil, err
	}
	t, err := Existing(ctx, getenv)
	switch {
	case err == nil:
		return t, nil
	case errors.Is(err, rayito.ErrNotPlatformOwner):
		// Say which platform the command runs on: not the one at the
		// endpoint, which is another user's.
		var ne notOwnerError
		errors.As(err, &ne)
		fmt.Fprintf(stderr, "rayito: %s; this command runs on a platform of its own, started in this process\n", ne.probe.OtherUserText(ne.endpoint))
	}
	bin, err := SandboxBinary(getenv, "", func(w string) { fmt.Fprintln(stderr, "rayito: "+w) })
	if err != nil {
		return nil, err
	}
	stateDir, err := os.MkdirTemp("", "rayito-run-")
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if getenv("RAYITO_DEBUG") == "1" {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// A state dir of its own (so a scope of its own: it never touches the
	// sandboxes of the machine's main platform) and a subnet of its own.
	srv, err := localvm.New(ctx, localvm.Options{
		StateDir: stateDir, Logger: log,
		Subnet:          netip.MustParsePrefix("10.216.0.0/16"),
		AllowUnisolated: allowUnisolated || getenv(UnisolatedEnv) == "1",
		SandboxBinary:   bin,
	})
	if err != nil {
		os.RemoveAll(stateDir)
		return nil, fmt.Errorf("start the local platform: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close(ctx)
		os.RemoveAll(stateDir)
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	ep := "http://" + ln.Addr().String()
	stop := func(ctx context.Context) error {
		err := srv.TerminateAll(ctx)
		cancel()
		if serr := <-served; serr != nil && !errors.Is(serr, context.Canceled) {
			err = errors.Join(err, serr)
		}
		err = errors.Join(err, srv.Close(ctx))
		_ = os.RemoveAll(stateDir)
		return err
	}
	return &Target{
		Endpoint:  ep,
		InProcess: true,
		Options:   []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(ep)},
		stop:      stop,
	}, nil
}
