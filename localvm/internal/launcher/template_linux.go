package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/localvm/internal/fscopy"
	"github.com/rayito-dev/rayito/localvm/internal/rootfs"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

// fdTemplate names the template layer's descriptor among the extra ones;
// fdUsrIdmap a building sandbox's idmapped /usr (a detached mount).
const (
	fdTemplate  = "template"
	fdUsrIdmap  = "usr-idmap"
	usrLowerDir = "usr-lower" // its mount point in the launcher directory, while the overlay is made
)

// Template modes of the init (initConfig.Template).
const (
	templateRun   = "run"
	templateBuild = "build"
)

// homeSeedDir is the copy of a template's home/ in the launcher directory,
// owned by the sandbox's user, that the init copies into /home/user.
const homeSeedDir = "home-seed"

// maxHomeSeed bounds what a template may put in a sandbox's home.
const maxHomeSeed = 1 << 30

// ErrTemplate is wrapped by the errors about a template's layer.
var ErrTemplate = errors.New("template layer")

// prepareTemplate readies spec.Template, if any, for a sandbox whose root
// is host uid base (its user base+sandboxUID): in build mode its writable
// directories become the sandbox's, else its home is copied for the
// sandbox's user into the launcher directory ld.
func prepareTemplate(spec Spec, ld string, base uint32) error {
	t := spec.Template
	if t == nil {
		return nil
	}
	if !filepath.IsAbs(t.Dir) || filepath.Clean(t.Dir) != t.Dir {
		return fmt.Errorf("%w: the directory must be an absolute, clean path", ErrTemplate)
	}
	fi, err := os.Lstat(t.Dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %v", ErrTemplate, errOr(err, "not a directory"))
	}
	root, user := int(base), int(base+sandboxUID)
	if t.Build {
		for _, d := range []string{"usr", "work", "opt", "home", "context"} {
			if err := os.MkdirAll(filepath.Join(t.Dir, d), 0o755); err != nil {
				return err
			}
		}
		for d, uid := range map[string]int{"usr": root, "work": root, "opt": root, "home": user} {
			if err := os.Lchown(filepath.Join(t.Dir, d), uid, uid); err != nil {
				return err
			}
		}
		return os.Chmod(filepath.Join(t.Dir, "home"), 0o750)
	}
	if err := fscopy.Tree(filepath.Join(t.Dir, "home"), filepath.Join(ld, homeSeedDir), fscopy.Options{UID: user, Limit: maxHomeSeed}); err != nil {
		return fmt.Errorf("%w: its home: %w", ErrTemplate, err)
	}
	return nil
}

// idmappedUsr returns a detached, read-only copy of the host's /usr whose
// owners appear through the user namespace of process pid (host root is
// its root): the lower layer a building sandbox's root can copy up from
// (in the sandbox, the host's root files belong to nobody otherwise, and
// its root could not write over them).
func idmappedUsr(pid int) (int, error) {
	ns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(ns)
	fd, err := unix.OpenTree(unix.AT_FDCWD, "/usr", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return -1, fmt.Errorf("open_tree /usr: %w", err)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(ns)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("idmapping /usr: %w", err)
	}
	return fd, nil
}

// openInInit opens dir (O_PATH) through the root of process pid: in its
// mount namespace.
func openInInit(pid int, dir string) (int, error) {
	return unix.Open("/proc/"+strconv.Itoa(pid)+"/root"+dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// setupTemplate runs in the init, in setupSandbox, after the root's /usr
// mount point exists and before anything is laid over /usr: it mounts the
// template's layers. fd is the layer's descriptor.
func setupTemplate(cfg *initConfig, root string, fd int) error {
	layer := "/proc/self/fd/" + strconv.Itoa(fd)
	esc := strings.NewReplacer(`\`, `\\`, ",", `\,`, ":", `\:`)
	usr := filepath.Join(root, "usr")
	opt := filepath.Join(root, "opt")
	if err := rootfs.Mkdir(opt, 0o755); err != nil {
		return err
	}
	switch cfg.Template {
	case templateRun:
		// The layer's base (the host's /usr as it was at the end of the
		// build), else the host's live /usr.
		lower := "/usr"
		if fi, err := os.Lstat(layer + "/" + TemplateBaseDir); err == nil && fi.IsDir() {
			lower = layer + "/" + TemplateBaseDir
		}
		if err := rootfs.Mount("overlay", usr, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV,
			"userxattr,lowerdir="+esc.Replace(layer+"/usr")+":"+esc.Replace(lower)); err != nil {
			return err
		}
		return rootfs.BindReadOnly(layer+"/opt", opt)
	case templateBuild:
		// The idmapped /usr, attached in the launcher directory (the
		// init's cwd) for as long as the overlay takes to mount.
		if cfg.usrIdmapFD < 0 {
			return errors.New("a building sandbox without its idmapped /usr")
		}
		if err := rootfs.Mkdir(usrLowerDir, 0o700); err != nil {
			return err
		}
		if err := unix.MoveMount(cfg.usrIdmapFD, "", unix.AT_FDCWD, usrLowerDir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("attaching the idmapped /usr: %w", err)
		}
		_ = unix.Close(cfg.usrIdmapFD)
		err := rootfs.Mount("overlay", usr, "overlay", unix.MS_NOSUID|unix.MS_NODEV,
			"userxattr,lowerdir="+esc.Replace(usrLowerDir)+",upperdir="+esc.Replace(layer+"/usr")+",workdir="+esc.Replace(layer+"/work"))
		_ = unix.Unmount(usrLowerDir, unix.MNT_DETACH)
		_ = os.Remove(usrLowerDir)
		if err != nil {
			return err
		}
		return rootfs.BindWritable(layer+"/opt", opt)
	}
	return fmt.Errorf("unknown template mode %q", cfg.Template)
}

// setupTemplateHome fills /home/user (home, mounted) from the template:
// the seed the launcher prepared (run) or the layer's home itself (build).
func setupTemplateHome(cfg *initConfig, home string, fd int) error {
	if cfg.Template == templateBuild {
		return rootfs.BindWritable("/proc/self/fd/"+strconv.Itoa(fd)+"/home", home)
	}
	seed := homeSeedDir // relative to the launcher directory, the init's cwd
	if err := fscopy.Tree(seed, home, fscopy.Options{UID: sandboxUID, Limit: maxHomeSeed}); err != nil {
		return fmt.Errorf("copying the template's home: %w", err)
	}
	return os.RemoveAll(seed)
}

// setupBuildContext binds the template's context read-only at
// BuildContextPath (under the root's /run, mounted).
func setupBuildContext(root string, fd int) error {
	dst := filepath.Join(root, BuildContextPath)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	return rootfs.BindReadOnly("/proc/self/fd/"+strconv.Itoa(fd)+"/context", dst)
}

// templateEtc is the file the template's runtime configuration becomes in
// the generated /etc (relative to it).
func templateEtc(fd int) (map[string][]byte, error) {
	b, err := rootfs.ReadLimited("/proc/self/fd/"+strconv.Itoa(fd)+"/runtime.json", ptemplate.MaxSpecLen)
	if err != nil {
		return nil, fmt.Errorf("reading the template's runtime configuration: %w", err)
	}
	if _, err := ptemplate.DecodeRuntime(b); err != nil {
		return nil, err
	}
	return map[string][]byte{strings.TrimPrefix(ptemplate.RuntimePath, "/etc/"): b}, nil
}
