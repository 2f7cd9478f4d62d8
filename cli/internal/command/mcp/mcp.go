// Package mcp is `rayito mcp`: an MCP server (cli/internal/mcpserver)
// over stdio, or over streamable HTTP on 127.0.0.1 with a bearer token,
// on the platform the CLI's other commands use.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/mcpserver"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	"github.com/rayito-dev/rayito/cli/internal/version"
	"github.com/rayito-dev/rayito/dashboard/hostguard"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// cleanupTimeout bounds the kills when the server stops.
const cleanupTimeout = time.Minute

// Command is `rayito mcp`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve an MCP server: tools for an agent to create sandboxes and use them",
		Description: "Speaks MCP on stdin/stdout (the default) or, with --http, streamable HTTP at /mcp on\n" +
			"127.0.0.1 (another address only with --allow-remote), with a bearer token printed once on\n" +
			"stderr (or kept in --token-file). Tools: create, run_command, run_code, read_file,\n" +
			"write_file, list_files, list_sandboxes, kill. They act on the sandboxes this server\n" +
			"created and on other sandboxes of yours whose id the client names (--only-own: only its\n" +
			"own). The sandboxes it created are killed when it stops (stdin closed, Ctrl-C, SIGTERM)\n" +
			"unless --keep. --json prints the startup information as JSON on stderr. docs/mcp.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "http", Usage: "serve streamable HTTP on `ADDR` (host:port; port 0 picks one) instead of stdio"},
			&cli.BoolFlag{Name: "allow-remote", Usage: "with --http, allow an address that is not loopback"},
			&cli.StringSliceFlag{Name: "allowed-host", Usage: "with --http, also answer requests for `HOST` (a DNS name or an IP address) besides 127.0.0.1, localhost, [::1] and the bound address"},
			&cli.StringFlag{Name: "token-file", Usage: "with --http, the bearer token's `FILE`: read when it exists (mode 0600), else written with a new token; the token is then not printed"},
			&cli.BoolFlag{Name: "keep", Usage: "do not kill the sandboxes this server created when it stops (needs a running platform: rayito local up, or AWS)"},
			&cli.BoolFlag{Name: "only-own", Usage: "the tools use only the sandboxes this server created"},
			&cli.IntFlag{Name: "max-sandboxes", Value: mcpserver.DefaultMaxSandboxes, Usage: "at most `N` sandboxes of this server alive at once"},
			&cli.BoolFlag{Name: "json", Usage: "print the startup information (transport, url, token file) as JSON on stderr"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Present() {
				return cliutil.Usagef("mcp takes no arguments")
			}
			return run(ctx, cmd, f)
		},
	}
}

// startInfo is what --json prints on stderr at start.
type startInfo struct {
	Transport    string   `json:"transport"`
	URL          string   `json:"url,omitempty"`
	Address      string   `json:"address,omitempty"`
	Token        string   `json:"token,omitempty"`
	TokenFile    string   `json:"token_file,omitempty"`
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	Backend      string   `json:"backend"`
	Endpoint     string   `json:"endpoint,omitempty"`
	InProcess    bool     `json:"in_process_platform"`
	OnlyOwn      bool     `json:"only_own"`
	Keep         bool     `json:"keep"`
	MaxSandboxes int      `json:"max_sandboxes"`
}

func run(ctx context.Context, cmd *cli.Command, f *cliutil.Factory) error {
	// From the start: a signal while the platform starts still cleans up.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	addr := cmd.String("http")
	if addr == "" {
		for _, fl := range []string{"allow-remote", "allowed-host", "token-file"} {
			if cmd.IsSet(fl) {
				return cliutil.Usagef("--%s goes with --http", fl)
			}
		}
	}
	max := cmd.Int("max-sandboxes")
	if max < 1 || max > 1000 {
		return cliutil.Usagef("--max-sandboxes must be 1 to 1000")
	}
	var ln net.Listener
	if addr != "" {
		var err error
		if ln, err = listen(addr, cmd.Bool("allow-remote")); err != nil {
			return err
		}
		defer ln.Close()
	}
	keep := cmd.Bool("keep")
	var (
		t   *platform.Target
		err error
	)
	if keep {
		// An in-process platform ends its sandboxes with this process:
		// --keep needs one that outlives it.
		t, err = platform.Existing(ctx, f.Getenv)
		if err != nil {
			return fmt.Errorf("--keep needs a running platform (rayito local up, or RAYITO_BACKEND=aws): %w", err)
		}
	} else if t, err = platform.Ensure(ctx, f.Getenv, f.IO.Err, false); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = t.Close(cctx)
	}()
	dir, err := rayito.TokenStoreDir(f.Getenv)
	if err != nil {
		return err
	}
	backend, _ := platform.Backend(f.Getenv)
	srv := mcpserver.New(mcpserver.Options{
		SDK:          append(t.Options, rayito.WithTokenStoreDir(dir)),
		OnlyOwn:      cmd.Bool("only-own"),
		MaxSandboxes: int(max),
		Version:      version.Version,
	})
	info := startInfo{Transport: "stdio", Backend: string(backend), Endpoint: t.Endpoint, InProcess: t.InProcess,
		OnlyOwn: cmd.Bool("only-own"), Keep: keep, MaxSandboxes: int(max)}

	var serveErr error
	if ln == nil {
		if err := announce(cmd, f, info); err != nil {
			return err
		}
		serveErr = srv.MCP().Run(ctx, srv.StdioTransport(f.IO.In, f.IO.Out))
	} else {
		serveErr = serveHTTP(ctx, cmd, f, srv, ln, info)
	}
	if errors.Is(serveErr, context.Canceled) || errors.Is(serveErr, io.EOF) {
		serveErr = nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	killed, err := srv.Close(cctx, keep)
	switch {
	case keep && len(srv.Owned()) > 0:
		fmt.Fprintf(f.IO.Err, "rayito: mcp: kept %s it created (--keep)\n", sandboxes(len(srv.Owned())))
	case len(killed) > 0:
		fmt.Fprintf(f.IO.Err, "rayito: mcp: killed %s it created\n", sandboxes(len(killed)))
	}
	return errors.Join(serveErr, err)
}

// sandboxes is "1 sandbox", "2 sandboxes".
func sandboxes(n int) string {
	if n == 1 {
		return "1 sandbox"
	}
	return strconv.Itoa(n) + " sandboxes"
}

// listen opens the HTTP transport's socket: loopback only unless
// allowRemote.
func listen(addr string, allowRemote bool) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, cliutil.Usagef("--http must be HOST:PORT, like 127.0.0.1:8765")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return nil, cliutil.Usagef("--http's port must be 0 to 65535")
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return nil, cliutil.Usagef("--http's host must be an IP address (or localhost), got %q", host)
	}
	if !ip.IsLoopback() && !allowRemote {
		return nil, cliutil.Usagef("--http %s is not a loopback address: anyone who reaches it and has the token drives your sandboxes; pass --allow-remote to mean it", addr)
	}
	return net.Listen("tcp", net.JoinHostPort(ip.String(), port))
}

// serveHTTP serves srv on ln until ctx ends.
func serveHTTP(ctx context.Context, cmd *cli.Command, f *cliutil.Factory, srv *mcpserver.Server, ln net.Listener, info startInfo) error {
	tcp := ln.Addr().(*net.TCPAddr)
	bind, _ := netip.AddrFromSlice(tcp.IP)
	guard, err := hostguard.New(tcp.Port, hostguard.Options{Bind: bind.Unmap().String(), AllowedHosts: cmd.StringSlice("allowed-host")})
	if err != nil {
		return cliutil.Usage(err)
	}
	token := mcpserver.NewToken()
	if file := cmd.String("token-file"); file != "" {
		var created bool
		if token, created, err = mcpserver.LoadOrCreateToken(file); err != nil {
			return err
		}
		info.TokenFile = file
		if created {
			fmt.Fprintf(f.IO.Err, "rayito: mcp: wrote a new bearer token to %s\n", file)
		}
	} else {
		info.Token = token
	}
	host := ln.Addr().String()
	if bind.Unmap().IsUnspecified() {
		host = net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
	}
	info.Transport, info.Address, info.URL = "http", ln.Addr().String(), "http://"+host+mcpserver.Path
	info.AllowedHosts = cmd.StringSlice("allowed-host")
	if err := announce(cmd, f, info); err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           mcpserver.HTTPHandler(srv, guard, token),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       5 * time.Minute,
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	return nil
}

// announce says on stderr how to reach the server; stdout is MCP's on
// stdio, so nothing else goes there.
func announce(cmd *cli.Command, f *cliutil.Factory, info startInfo) error {
	if cmd.Bool("json") {
		return cliutil.PrintJSON(f.IO.Err, info)
	}
	switch {
	case info.Transport == "stdio":
		fmt.Fprintln(f.IO.Err, "rayito: mcp: serving MCP on stdin/stdout; "+keepNote(info.Keep))
	case info.Token != "":
		fmt.Fprintf(f.IO.Err, "rayito: mcp: serving MCP at %s\nrayito: mcp: bearer token (shown once): %s\n", info.URL, info.Token)
	default:
		fmt.Fprintf(f.IO.Err, "rayito: mcp: serving MCP at %s; bearer token in %s\n", info.URL, info.TokenFile)
	}
	return nil
}

func keepNote(keep bool) string {
	if keep {
		return "the sandboxes it creates outlive it (--keep)"
	}
	return "the sandboxes it creates end with it"
}
