// Command rayd is Rayito's guest daemon: it serves the RPC API (processes,
// and in later releases terminals, files, code) behind an access token, and
// the platform's lifecycle hooks. See internal/daemon.
package main

import (
	"os"
	"path/filepath"

	"github.com/rayito-dev/rayito/rayd/internal/daemon"
	"github.com/rayito-dev/rayito/rayd/internal/sudo"
)

func main() {
	// Started as "sudo" (an image's link to rayd): the sandbox's sudo
	// client (package sudo).
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == "sudo" {
		os.Exit(sudo.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(daemon.Main(os.Args[1:], os.Stdout, os.Stderr))
}
