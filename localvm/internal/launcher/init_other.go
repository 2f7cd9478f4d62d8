//go:build !linux

package launcher

import (
	"fmt"
	"os"
	"path/filepath"
)

// MaybeRunInit runs the sandbox init and exits when this process was started
// as one (filepath.Base(os.Args[0]) == InitArgv0); otherwise it returns at
// once. Sandboxes need Linux: elsewhere an init exits with an error.
func MaybeRunInit() {
	if len(os.Args) == 0 || filepath.Base(os.Args[0]) != InitArgv0 {
		return
	}
	fmt.Fprintln(os.Stderr, InitArgv0+": localvm sandboxes need Linux")
	os.Exit(2)
}
