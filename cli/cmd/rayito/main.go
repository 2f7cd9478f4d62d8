// Command rayito is Rayito's command line: run a command in a fresh
// sandbox, manage sandboxes, and run the local platform. See internal/app.
package main

import (
	"context"
	"os"

	"github.com/rayito-dev/rayito/cli/internal/app"
	"github.com/rayito-dev/rayito/localvm"
)

func main() {
	// When this binary was re-executed as a sandbox's init, run it and
	// exit: the local platform launches rayd from its own binary.
	localvm.MaybeRunInit()
	os.Exit(app.Main(context.Background(), os.Args, app.Stdio()))
}
