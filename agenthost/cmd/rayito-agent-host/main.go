// Command rayito-agent-host runs a user's agent behind the runtime
// contract of its target (docs/agent-host.md):
//
//	rayito-agent-host --target agentcore|microvm [--listen :8080] [--agent-port 8081] [--dir DIR] [--user USER] [--token-stdin] -- COMMAND [ARG...]
//
// The agent serves HTTP on 127.0.0.1:$PORT (GET /ping, POST
// /invocations); the host serves the same paths on --listen, checks the
// service token on MicroVMs, gives the agent its secret variables and
// restarts it when it ends.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/rayito-dev/rayito/agenthost/internal/host"
	"github.com/rayito-dev/rayito/agenthost/internal/smsecrets"
	"github.com/rayito-dev/rayito/agenthost/secretenv"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("rayito-agent-host", flag.ContinueOnError)
	target := fs.String("target", "", "agentcore or microvm")
	listen := fs.String("listen", ":8080", "the runtime contract's address")
	port := fs.Int("agent-port", 8081, "the agent's loopback port (its $PORT)")
	dir := fs.String("dir", "", "the agent's working directory")
	user := fs.String("user", "", "run the agent as `USER` (the host stays as it is, root: the agent cannot read its environment)")
	tokenStdin := fs.Bool("token-stdin", false, "read the service token (MicroVMs) from the first line of stdin, not from "+host.TokenVariable)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	environ := os.Environ()
	// The token and the secret list leave the process environment at once.
	for _, k := range []string{host.TokenVariable, secretenv.Variable, secretenv.NamesVariable} {
		_ = os.Unsetenv(k)
	}
	var token string
	if *tokenStdin {
		line, err := bufio.NewReader(io.LimitReader(os.Stdin, 1024)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			fmt.Fprintln(os.Stderr, "rayito-agent-host: reading the service token from stdin:", err)
			return 1
		}
		token = strings.TrimSpace(line)
	}
	cfg := host.Config{
		Token:  token,
		Target: host.Target(*target), Listen: *listen, ChildPort: *port, Dir: *dir, User: *user,
		Command: fs.Args(), Environ: environ, Stdout: os.Stdout, Stderr: os.Stderr, Logger: log,
	}
	if cfg.Target == host.TargetAgentCore {
		awsCfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			log.Error("agent_host_failed", "code", secretenv.CodeFetchFailed)
			return 1
		}
		cfg.Secrets = smsecrets.New(awsCfg)
	}
	h, err := host.New(ctx, cfg)
	if err != nil {
		var se *secretenv.Error
		if errors.As(err, &se) {
			log.Error("agent_host_failed", "code", se.Code, "variable", se.Name)
		} else {
			fmt.Fprintln(os.Stderr, "rayito-agent-host:", err)
		}
		return 1
	}
	ln, err := net.Listen("tcp", h.Listen())
	if err != nil {
		fmt.Fprintln(os.Stderr, "rayito-agent-host: listen:", err)
		return 1
	}
	if err := h.Run(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, "rayito-agent-host:", err)
		return 1
	}
	return 0
}
