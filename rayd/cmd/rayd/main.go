// Command rayd is Rayito's guest daemon: it serves the RPC API (processes,
// and in later releases terminals, files, code) behind an access token, and
// the platform's lifecycle hooks. See internal/daemon.
package main

import (
	"os"

	"github.com/rayito-dev/rayito/rayd/internal/daemon"
)

func main() {
	os.Exit(daemon.Main(os.Args[1:], os.Stdout, os.Stderr))
}
