package templates

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/fscopy"
)

// A build's limits: the memory of its sandbox, and the size of the tmpfs
// its layer is written to (charged to that memory as it is written).
const (
	buildMemory  = 8 << 30
	maxLayerSize = 6 << 30
)

// mountScratch mounts a bounded tmpfs beside layer for a build (the
// launcher's TemplateLayer.Dir in build mode) with layer/context bound
// read-only into it, and returns its path.
func mountScratch(layer string) (string, error) {
	scratch := layer + ".scratch"
	if err := os.Mkdir(scratch, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount("tmpfs", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size="+strconv.Itoa(maxLayerSize)); err != nil {
		_ = os.Remove(scratch)
		return "", fmt.Errorf("mounting the scratch tmpfs: %w", err)
	}
	ctxDir := filepath.Join(scratch, "context")
	err := os.Mkdir(ctxDir, 0o755)
	if err == nil {
		err = unix.Mount(filepath.Join(layer, "context"), ctxDir, "", unix.MS_BIND, "")
	}
	if err == nil {
		err = unix.Mount("", ctxDir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
	}
	if err != nil {
		unmountScratch(scratch)
		return "", fmt.Errorf("binding the context: %w", err)
	}
	return scratch, nil
}

// unmountScratch unmounts and removes a scratch space.
func unmountScratch(scratch string) {
	_ = unix.Unmount(filepath.Join(scratch, "context"), unix.MNT_DETACH)
	_ = unix.Unmount(scratch, unix.MNT_DETACH)
	_ = os.RemoveAll(scratch)
}

// copyLayer copies the usr/, opt/ and home/ a build wrote in scratch into
// layer, overlayfs whiteouts and opaque directories included. Owners are
// set afterwards (finishLayer).
func copyLayer(scratch, layer string) error {
	for _, d := range []string{"usr", "opt", "home"} {
		if err := fscopy.Tree(filepath.Join(scratch, d), filepath.Join(layer, d), fscopy.Options{UID: -1, Overlay: true}); err != nil {
			return err
		}
	}
	return nil
}
