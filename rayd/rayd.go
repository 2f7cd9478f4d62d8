// Package rayd exposes one entry point of the guest daemon for the
// programs that embed it: the local platform runs rayd inside each
// sandbox by re-executing its own binary, without a separate build step.
// Everything else about rayd is internal.
package rayd

import (
	"io"

	"github.com/rayito-dev/rayito/rayd/internal/daemon"
)

// Main runs rayd with command-line args (without the program name) and
// returns its exit code. See `rayd -h` for the flags.
func Main(args []string, stdout, stderr io.Writer) int {
	return daemon.Main(args, stdout, stderr)
}
