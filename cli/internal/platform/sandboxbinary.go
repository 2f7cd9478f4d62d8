package platform

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/localvm"
)

// SandboxBinaryEnv names the executable a local platform started by this
// CLI runs its sandboxes from, like --sandbox-binary.
const SandboxBinaryEnv = "RAYITO_SANDBOX_BINARY"

// SandboxBinary picks localvm.Options.SandboxBinary for a local platform
// this CLI starts: flag (--sandbox-binary) when given, else
// $RAYITO_SANDBOX_BINARY, else the rayito-sandbox beside this executable
// (as releases ship it) when the platform would accept it; "" re-executes
// rayito itself. A path the user named is made absolute and returned as
// is: localvm refuses a bad one with an error that says why. A binary
// found beside rayito that the platform would refuse (another release, a
// file others can write), or in a directory others can write, is skipped,
// and warn gets why.
func SandboxBinary(getenv func(string) string, flag string, warn func(string)) (string, error) {
	named, from := flag, "--sandbox-binary"
	if named == "" {
		named, from = getenv(SandboxBinaryEnv), SandboxBinaryEnv
	}
	if named != "" {
		abs, err := filepath.Abs(named)
		if err != nil {
			return "", cliutil.Usagef("%s: %v", from, err)
		}
		return abs, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil
	}
	dir := filepath.Dir(self)
	beside := filepath.Join(dir, localvm.SandboxBinaryName)
	if _, err := os.Stat(beside); err != nil {
		return "", nil
	}
	// Not from a directory others can write (rayito run from /tmp): a
	// file planted there would be run, as a probe, by this user.
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm()&0o022 != 0 {
		warn(fmt.Sprintf("not using %s: its directory is writable by others; sandboxes start from rayito itself", beside))
		return "", nil
	}
	if err := localvm.CheckSandboxBinary(beside); err != nil {
		warn(fmt.Sprintf("not using %s (%v): sandboxes start from rayito itself", beside, err))
		return "", nil
	}
	return beside, nil
}
