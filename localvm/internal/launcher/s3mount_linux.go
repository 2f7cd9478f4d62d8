package launcher

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
)

// S3 mounts in a sandbox (docs/s3-mounts.md): rayd mounts /dev/fuse itself
// and starts the mount helper, which is this very binary (bound at
// /usr/local/bin/rayito-mount-s3 beside sudo, setupSandboxBin) run as
// MountHelperArgv0 (MaybeRunInit).
const (
	// MountHelperArgv0 is the name this binary runs the S3 mount helper
	// under.
	MountHelperArgv0 = "rayito-mount-s3"
	// mountHelperPath is where the sandbox sees it.
	mountHelperPath = "/usr/local/bin/" + MountHelperArgv0
	// fuseDir holds the sandbox's FUSE device: a directory only root
	// (rayd) may enter, so the sandbox's code cannot open /dev/fuse.
	fuseDir    = "rayito-fuse"
	fuseDevice = "/dev/" + fuseDir + "/fuse"
)

// mountArgs are rayd's flags for S3 mounts in an isolated sandbox.
func mountArgs() []string {
	return []string{"--mount-helper", mountHelperPath, "--fuse-device", fuseDevice}
}

// mountEnv is what the platform adds to rayd's environment for S3 mounts:
// its own RAYITO_ALLOWED_MOUNT_BUCKETS (the operator's allow-list, as an
// image's environment is on AWS). Templates add theirs (SetEnvs), which
// rayd reads from the template's configuration.
func mountEnv(env []string) []string {
	if v := os.Getenv(ps3.AllowEnv); v != "" {
		return append(append([]string(nil), env...), ps3.AllowEnv+"="+v)
	}
	return env
}

// setupFUSE binds the host's /dev/fuse into the sandbox's dev directory,
// under fuseDir (mode 0700, root's). Without it rayd reports no S3 mounts.
func setupFUSE(dev string) error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return err
	}
	dir := filepath.Join(dev, fuseDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	dst := filepath.Join(dir, "fuse")
	if err := os.WriteFile(dst, nil, 0o600); err != nil {
		return err
	}
	if err := unix.Mount("/dev/fuse", dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding /dev/fuse: %w", err)
	}
	return nil
}
