package launcher

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/rootfs"
)

// tmpfsSizes are the tmpfs bounds of a sandbox with memBytes of memory
// (DefaultMemoryBytes when not positive): see rootfs.TmpfsSizes.
func tmpfsSizes(memBytes int64) rootfs.TmpfsLimits {
	if memBytes <= 0 {
		memBytes = DefaultMemoryBytes
	}
	return rootfs.TmpfsSizes(memBytes)
}

// setupSandbox runs in the init, in its private mount namespace (and new
// user, pid, uts, ipc and net namespaces): it builds the sandbox's root
// filesystem on cfg.RootDir (package rootfs's steps, the template's
// layers and the sandbox's programs), pivots into it and sets the
// hostname. The init enters the launcher's directory (dirFD, opened in
// its own mount namespace), which RootDir is relative to.
func setupSandbox(cfg *initConfig, dirFD int) error {
	err := unix.Fchdir(dirFD)
	_ = unix.Close(dirFD)
	if err != nil {
		return fmt.Errorf("entering the launcher's directory: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	root := cfg.RootDir
	if err := rootfs.Base(root); err != nil {
		return err
	}
	if cfg.Template != "" {
		if err := setupTemplate(cfg, root, cfg.templateFD); err != nil {
			return err
		}
	} else if err := rootfs.BindReadOnly("/usr", filepath.Join(root, "usr")); err != nil {
		return err
	}
	if err := rootfs.HostDirs(root); err != nil {
		return err
	}
	var etcExtra map[string][]byte
	if cfg.Template == templateRun {
		var err error
		if etcExtra, err = templateEtc(cfg.templateFD); err != nil {
			return err
		}
	}
	if err := rootfs.Etc(filepath.Join(root, "etc"), cfg.Hostname, cfg.DNS, etcExtra); err != nil {
		return err
	}
	if err := setupHome(cfg, filepath.Join(root, "home", "user")); err != nil {
		return err
	}
	// A rootless sandbox has no root, so no /root.
	if err := rootfs.Scratch(root, cfg.Tmpfs, cfg.Mode != modeRootless); err != nil {
		return err
	}
	if cfg.Template == templateBuild {
		if err := setupBuildContext(root, cfg.templateFD); err != nil {
			return err
		}
		// No read-only layer over /usr/local/bin while it is being built
		// (the build runs as root: no sudo needed).
	} else if err := setupSandboxBin(root); err != nil {
		// The sandbox goes without python and sudo, as before them.
		fmt.Fprintf(os.Stderr, "%s: no python or sudo in /usr/local/bin: %v\n", InitArgv0, err)
	}
	if err := rootfs.Proc(root); err != nil {
		return err
	}
	if err := rootfs.Dev(filepath.Join(root, "dev"), cfg.Tmpfs.Shm); err != nil {
		return err
	}
	if err := setupFUSE(filepath.Join(root, "dev")); err != nil {
		fmt.Fprintf(os.Stderr, "%s: no FUSE for S3 mounts: %v\n", InitArgv0, err)
	}
	if err := rootfs.Pivot(root); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if cfg.Mode == modeRootless {
		return sealRootless(cfg.Reject)
	}
	return nil
}

// setupHome mounts /home/user: a private tmpfs of bounded size owned by the
// sandbox's user, like /tmp: a sandbox that fills it gets ENOSPC, and
// nothing it writes there reaches the host's disk (a home on disk had no
// bound). A template's build binds the layer's own home there instead,
// and a template's run fills the tmpfs from it.
func setupHome(cfg *initConfig, home string) error {
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	if cfg.Template == templateBuild {
		// The layer's own home, read-write.
		return setupTemplateHome(cfg, home, cfg.templateFD)
	}
	homeOpts := fmt.Sprintf("mode=0750,uid=%d,gid=%d,%s", sandboxUID, sandboxUID, rootfs.SizeOpt(cfg.Tmpfs.Home))
	if err := unix.Mount("tmpfs", home, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, homeOpts); err != nil {
		return fmt.Errorf("mounting /home/user: %w", err)
	}
	if cfg.Template == templateRun {
		return setupTemplateHome(cfg, home, cfg.templateFD)
	}
	return nil
}

// sealRootless finishes a rootless sandbox's setup, after the pivot: every
// file the init made belongs to the sandbox's user (the only uid of its
// namespace), so the root and /dev become read-only, so that its code
// cannot add to them, as it cannot when root owns them. Then loopback,
// which nobody else brings up here, and the "prohibit" routes of reject.
func sealRootless(reject []string) error {
	for _, dir := range []string{"/dev", "/"} {
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|noexecIf(dir == "/dev")|nodevIf(dir == "/"), ""); err != nil {
			return fmt.Errorf("remounting %s read-only: %w", dir, err)
		}
	}
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("bringing up loopback: %w", err)
	}
	return rejectRoutes(reject)
}

// sandboxBinDir is the sandbox's own directory of programs (relative to
// its root): python where the host has none, and the mount point of sudo.
const sandboxBinDir = "run/rayito/bin"

// setupSandboxBin gives the sandbox the names E2B's programs expect on
// every PATH (a login shell's too) without writing to the host's /usr: a
// read-only overlay of sandboxBinDir over the host's /usr/local/bin, with
//
//   - python, a link to /usr/bin/python3 when the host has no python;
//   - sudo: this very binary (linked into the launcher's directory by the
//     launcher, sudo_linux.go), bound read-only and nosuid, which runs as
//     the sudo client when started as sudo (MaybeRunInit);
//     it asks rayd, which serves it only where root is allowed (the
//     sudo package), and says otherwise that root is not allowed here.
//
// It fails, and the sandbox goes without them, where the host has no
// /usr/local/bin or the kernel no overlayfs in a user namespace.
func setupSandboxBin(root string) error {
	// Relative to the init's working directory, the launcher's (root is
	// relative to it): the kernel resolves overlayfs's layers there too.
	bin := filepath.Join(root, sandboxBinDir)
	target := filepath.Join(root, "usr", "local", "bin")
	if fi, err := os.Stat(target); err != nil {
		return fmt.Errorf("the host has no /usr/local/bin: %w", err)
	} else if !fi.IsDir() {
		return errors.New("the host has no /usr/local/bin: not a directory")
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		return err
	}
	if hostHas("python") == "" && hostHas("python3") == "/usr/bin/python3" {
		if err := os.Symlink("/usr/bin/python3", filepath.Join(bin, "python")); err != nil {
			return err
		}
	}
	// sudo only where the launcher linked it (sudo_linux.go).
	_, err := os.Stat(sudoLink)
	hasSudo := err == nil
	if hasSudo {
		if err := os.WriteFile(filepath.Join(bin, SudoArgv0), nil, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(bin, MountHelperArgv0), nil, 0o755); err != nil {
			return err
		}
	}
	esc := strings.NewReplacer(`\`, `\\`, ",", `\,`, ":", `\:`)
	if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV,
		"lowerdir="+esc.Replace(bin)+":"+esc.Replace(target)); err != nil {
		return fmt.Errorf("overlay on /usr/local/bin: %w", err)
	}
	if !hasSudo {
		return errors.New("no sudo: the launcher could not place its binary")
	}
	if err := rootfs.BindReadOnly(sudoLink, filepath.Join(target, SudoArgv0)); err != nil {
		return err
	}
	return rootfs.BindReadOnly(sudoLink, filepath.Join(target, MountHelperArgv0))
}

// hostHas is the path of name in the host's /usr/local/bin or /usr/bin
// (what the sandbox sees there), or "".
func hostHas(name string) string {
	for _, dir := range []string{"/usr/local/bin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// rejectRoutes makes each IPv4 prefix unreachable from this network
// namespace: a "prohibit" route (connect fails with EACCES, nothing is
// sent), which only a holder of CAP_NET_ADMIN here could remove.
func rejectRoutes(prefixes []string) error {
	for _, p := range prefixes {
		pfx, err := netip.ParsePrefix(p)
		if err != nil || !pfx.Addr().Is4() {
			return fmt.Errorf("bad prefix to reject %q", p)
		}
		pfx = pfx.Masked()
		dst := &net.IPNet{IP: pfx.Addr().AsSlice(), Mask: net.CIDRMask(pfx.Bits(), 32)}
		if err := netlink.RouteAdd(&netlink.Route{Dst: dst, Type: unix.RTN_PROHIBIT}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("blocking %s: %w", p, err)
		}
	}
	return nil
}

func noexecIf(b bool) uintptr {
	if b {
		return unix.MS_NOEXEC
	}
	return 0
}

func nodevIf(b bool) uintptr {
	if b {
		return unix.MS_NODEV
	}
	return 0
}
