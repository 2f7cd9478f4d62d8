// Package local is `rayito local`: run the local platform (localvm) in the
// foreground (serve) or in the background (up, down, status).
package local

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	"github.com/rayito-dev/rayito/localvm"
)

// Command returns `rayito local`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "local",
		Usage: "run the local platform on this machine",
		Commands: []*cli.Command{
			serveCommand(f),
			upCommand(f),
			downCommand(f),
			statusCommand(f),
		},
	}
}

func stateDirFlag() cli.Flag {
	return &cli.StringFlag{Name: "state-dir", Usage: "the platform's state `DIR`ectory (default: " + localvm.DefaultStateDir() + ")"}
}

func stateDir(cmd *cli.Command) string {
	if d := cmd.String("state-dir"); d != "" {
		return d
	}
	return localvm.DefaultStateDir()
}

// listenAddr is host:port of the configured endpoint (--endpoint or
// RAYITO_ENDPOINT).
func listenAddr(f *cliutil.Factory) (string, error) { return platform.ListenAddr(f.Getenv) }

func pidFile(dir string) string { return filepath.Join(dir, "serve.pid") }

// readPid returns the pid of a background `local serve`, or 0.
func readPid(dir string) int {
	b, err := os.ReadFile(pidFile(dir))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0
	}
	return pid
}
