// Package platform finds the control plane a CLI command talks to: AWS
// when RAYITO_BACKEND=aws, else the local platform at RAYITO_ENDPOINT when
// one answers, else a local platform started in this process for the
// duration of the command.
package platform

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

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

// Endpoint returns the configured local endpoint.
func Endpoint(getenv func(string) string) string {
	if e := getenv("RAYITO_ENDPOINT"); e != "" {
		return strings.TrimRight(e, "/")
	}
	return rayito.DefaultLocalEndpoint
}

// Answers reports whether a local platform answers at endpoint.
func Answers(ctx context.Context, endpoint string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+microvmsapi.PathMicrovms+"?maxResults=1", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode == http.StatusOK
}

// Existing returns the configured platform without starting one: an error
// when the local platform does not answer.
func Existing(ctx context.Context, getenv func(string) string) (*Target, error) {
	if getenv("RAYITO_BACKEND") == string(rayito.BackendAWS) {
		return &Target{Options: []rayito.Option{rayito.WithBackend(rayito.BackendAWS)}}, nil
	}
	ep := Endpoint(getenv)
	if !Answers(ctx, ep) {
		return nil, fmt.Errorf("no local platform answers at %s: start one with `rayito local up`", ep)
	}
	return &Target{Endpoint: ep, Options: []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(ep)}}, nil
}

// randomScope names an in-process platform's scope: "r" and two random
// characters of [a-z0-9].
func randomScope() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [2]byte
	_, _ = rand.Read(b[:])
	return "r" + string(alphabet[int(b[0])%len(alphabet)]) + string(alphabet[int(b[1])%len(alphabet)])
}

// Ensure returns the configured platform, starting a local one in this
// process when none answers. stderr receives one line saying so.
func Ensure(ctx context.Context, getenv func(string) string, stderr io.Writer) (*Target, error) {
	if t, err := Existing(ctx, getenv); err == nil {
		return t, nil
	}
	stateDir, err := os.MkdirTemp("", "rayito-run-")
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if getenv("RAYITO_DEBUG") == "1" {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// A scope and subnet of its own: this platform's start-up sweep must
	// not touch the sandboxes of the machine's main platform.
	srv, err := localvm.New(ctx, localvm.Options{
		StateDir: stateDir, Logger: log,
		Scope: randomScope(), Subnet: netip.MustParsePrefix("10.216.0.0/16"),
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
