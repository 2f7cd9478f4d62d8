// Package cliutil holds what every rayito command shares: its streams and
// environment (Factory), the exit-code table and error wording (errors.go),
// flags, JSON output and the exec loop of run and exec.
package cliutil

import (
	"encoding/json"
	"io"
	"os"

	"golang.org/x/term"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// IO is a command's standard streams.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Factory is what a command takes from its process: its streams and its
// environment. Commands read the environment only through Getenv, so a
// test can run them in process with an environment of its own.
type Factory struct {
	IO IO
	// Env is the process environment (os.Getenv).
	Env func(string) string
	// Endpoint is the global --endpoint flag; it wins over RAYITO_ENDPOINT.
	Endpoint string
}

// Getenv reads the environment, with --endpoint standing in for
// RAYITO_ENDPOINT.
func (f *Factory) Getenv(k string) string {
	if k == rayito.EnvEndpoint && f.Endpoint != "" {
		return f.Endpoint
	}
	if f.Env == nil {
		return os.Getenv(k)
	}
	return f.Env(k)
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// PrintJSON writes v as indented JSON.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
