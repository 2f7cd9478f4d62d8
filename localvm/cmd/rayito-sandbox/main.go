// Command rayito-sandbox is what the local platform's sandboxes run when
// it is given (rayito local up --sandbox-binary, or found beside rayito):
// a sandbox's init, its rayd, its sudo and its S3 mount helper, and
// nothing else. A platform can always re-execute its own binary instead;
// this one is smaller, so each sandbox starts sooner and idles in less
// memory (localvm.Options.SandboxBinary). It is not meant to be run by
// hand.
package main

import (
	"fmt"
	"os"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
)

func main() {
	launcher.MaybeRunInit()
	fmt.Fprintln(os.Stderr, "rayito-sandbox: started by hand. The local platform runs it for each sandbox (rayito local up --sandbox-binary PATH); build stamp:", launcher.BuildStamp())
	os.Exit(2)
}
