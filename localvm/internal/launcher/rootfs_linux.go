package launcher

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// tmpfsLimits are the size bounds of a sandbox's writable tmpfs mounts, in
// bytes. /etc (16 MiB) and the root (64 MiB, only mount points and
// symlinks) are fixed, /dev is 64 KiB.
type tmpfsLimits struct {
	Home  int64 `json:"home"`
	Tmp   int64 `json:"tmp"`
	Run   int64 `json:"run"`
	Shm   int64 `json:"shm"`
	VarTm int64 `json:"var_tmp"`
}

// tmpfsSizes bounds the writable tmpfs mounts of a sandbox with memBytes of
// memory (tmpfs pages are charged to its memory cgroup, so that a full
// tmpfs is ENOSPC rather than an OOM kill while the rest of the memory is
// free): /home/user half the memory, /tmp a quarter, /var/tmp an eighth,
// /run and /dev/shm a sixteenth each, at most 64 MiB (2 GiB: 1024, 512,
// 256, 64, 64 MiB).
func tmpfsSizes(memBytes int64) tmpfsLimits {
	if memBytes <= 0 {
		memBytes = DefaultMemoryBytes
	}
	const mib = 1 << 20
	small := min(memBytes/16, 64*mib)
	return tmpfsLimits{Home: max(memBytes/2, mib), Tmp: max(memBytes/4, mib), VarTm: max(memBytes/8, mib), Run: max(small, mib), Shm: max(small, mib)}
}

func sizeOpt(n int64) string {
	if n <= 0 {
		n = 1 << 20
	}
	return "size=" + strconv.FormatInt(n, 10)
}

// setupSandbox runs in the init, in its private mount namespace (and new
// user, pid, uts, ipc and net namespaces): it builds the sandbox's root
// filesystem on cfg.RootDir, pivots into it and sets the hostname. The
// init enters the launcher's directory (dirFD, opened in its own mount
// namespace), which RootDir is relative to.
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
	if err := mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
		return err
	}
	if err := mkdir(filepath.Join(root, "usr"), 0o755); err != nil {
		return err
	}
	if cfg.Template != "" {
		if err := setupTemplate(cfg, root, cfg.templateFD); err != nil {
			return err
		}
	} else if err := bindReadOnly("/usr", filepath.Join(root, "usr")); err != nil {
		return err
	}
	// /bin, /sbin, /lib*: symlinks into /usr on merged-/usr hosts, else
	// read-only binds.
	for _, name := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		host := "/" + name
		fi, err := os.Lstat(host)
		if err != nil {
			continue
		}
		dst := filepath.Join(root, name)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		case fi.IsDir():
			if err := mkdir(dst, 0o755); err != nil {
				return err
			}
			if err := bindReadOnly(host, dst); err != nil {
				return err
			}
		}
	}
	var etcExtra map[string][]byte
	if cfg.Template == templateRun {
		var err error
		if etcExtra, err = templateEtc(cfg.templateFD); err != nil {
			return err
		}
	}
	if err := setupEtc(filepath.Join(root, "etc"), cfg.Hostname, cfg.DNS, etcExtra); err != nil {
		return err
	}
	// /home/user: a private tmpfs of bounded size owned by the sandbox's
	// user, like /tmp: a sandbox that fills it gets ENOSPC, and nothing it
	// writes there reaches the host's disk (a home on disk had no bound).
	home := filepath.Join(root, "home", "user")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	homeOpts := fmt.Sprintf("mode=0750,uid=%d,gid=%d,%s", sandboxUID, sandboxUID, sizeOpt(cfg.Tmpfs.Home))
	if cfg.Template == templateBuild {
		// The layer's own home, read-write.
		if err := setupTemplateHome(cfg, home, cfg.templateFD); err != nil {
			return err
		}
	} else if err := unix.Mount("tmpfs", home, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, homeOpts); err != nil {
		return fmt.Errorf("mounting /home/user: %w", err)
	} else if cfg.Template == templateRun {
		if err := setupTemplateHome(cfg, home, cfg.templateFD); err != nil {
			return err
		}
	}
	// /tmp and /var/tmp (1777) and /run (0755, rayd's state is /run/rayd):
	// private tmpfs of bounded size.
	if err := os.MkdirAll(filepath.Join(root, "var", "tmp"), 0o755); err != nil {
		return err
	}
	for path, opts := range map[string]string{
		"tmp":     "mode=1777," + sizeOpt(cfg.Tmpfs.Tmp),
		"var/tmp": "mode=1777," + sizeOpt(cfg.Tmpfs.VarTm),
		"run":     "mode=0755," + sizeOpt(cfg.Tmpfs.Run),
	} {
		p := filepath.Join(root, path)
		if err := mkdir(p, 0o755); err != nil {
			return err
		}
		if err := mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return err
		}
	}
	if cfg.Mode != modeRootless {
		// /root: root's home (E2B programs write there as user "root"),
		// private and bounded like /tmp; nobody else may enter it. A
		// rootless sandbox has no root.
		p := filepath.Join(root, "root")
		if err := mkdir(p, 0o700); err != nil {
			return err
		}
		if err := mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,uid=0,gid=0,"+sizeOpt(cfg.Tmpfs.Tmp)); err != nil {
			return err
		}
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
	if err := mkdir(filepath.Join(root, "proc"), 0o555); err != nil {
		return err
	}
	if err := mount("proc", filepath.Join(root, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	if err := setupDev(filepath.Join(root, "dev"), cfg.Tmpfs.Shm); err != nil {
		return err
	}
	if err := setupFUSE(filepath.Join(root, "dev")); err != nil {
		fmt.Fprintf(os.Stderr, "%s: no FUSE for S3 mounts: %v\n", InitArgv0, err)
	}

	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if cfg.Mode == modeRootless {
		// Every file the init made belongs to the sandbox's user (the
		// only uid of its namespace): make the root and /dev read-only
		// so that its code cannot add to them, as it cannot when root
		// owns them. Then loopback, which nobody else brings up here.
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
		if err := rejectRoutes(cfg.Reject); err != nil {
			return err
		}
	}
	return nil
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
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		return fmt.Errorf("the host has no /usr/local/bin: %v", err)
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
	if err := bindReadOnly(sudoLink, filepath.Join(target, SudoArgv0)); err != nil {
		return err
	}
	return bindReadOnly(sudoLink, filepath.Join(target, MountHelperArgv0))
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

func mount(source, target, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mounting %s on %s: %w", fstype, target, err)
	}
	return nil
}

func mkdir(path string, mode os.FileMode) error {
	if err := os.Mkdir(path, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// bindReadOnly bind-mounts src on dst, read-only, nosuid and nodev.
func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s: %w", src, err)
	}
	if err := remountBind(dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("remounting %s read-only: %w", src, err)
	}
	return nil
}

// remountBind remounts the bind mount dst with flags added to the flags it
// has: in a user namespace the flags of a mount copied from the host are
// locked, and a remount that would clear one (noexec, an atime mode) is
// refused.
func remountBind(dst string, flags uintptr) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return err
	}
	for _, f := range [][2]uintptr{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f[0] != 0 {
			flags |= f[1]
		}
	}
	return unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|flags, "")
}

// etcCopies are host files copied into the sandbox's /etc: public package
// data only (no credentials, no host-specific secrets such as npmrc or
// pip.conf). Symlinks are reproduced as symlinks.
var etcCopies = []string{
	"ld.so.cache", "ld.so.conf", "profile", "bash.bashrc", "inputrc", "protocols", "services",
	"gai.conf", "host.conf", "mime.types", "locale.alias", "debian_version", "magic", "magic.mime",
	"timezone", "localtime", "os-release", "system-release", "redhat-release",
	"matplotlibrc", // Debian's matplotlib finds its defaults here
}

// etcBinds are host directories bound read-only into the sandbox's /etc:
// CA certificates, Debian's alternatives, loader, font and Jupyter
// configuration.
var etcBinds = []string{
	"ssl", "ca-certificates", "pki", "crypto-policies", "alternatives", "ld.so.conf.d", "fonts", "profile.d",
	"jupyter", // kernel and server configuration of Jupyter packages
}

const maxEtcCopy = 8 << 20

// setupEtc mounts a small tmpfs on dir, writes the generated account and
// network files, copies or binds the allow-listed host files and makes it
// read-only.
func setupEtc(dir, hostname string, dns []string, extra map[string][]byte) error {
	if err := mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=16m"); err != nil {
		return err
	}
	hostResolv, _ := readLimited("/etc/resolv.conf", 64<<10)
	stubResolv, _ := readLimited("/run/systemd/resolve/resolv.conf", 64<<10)
	shell := "/bin/sh"
	if _, err := os.Stat("/usr/bin/bash"); err == nil {
		shell = "/bin/bash"
	} else if _, err := os.Stat("/bin/bash"); err == nil {
		shell = "/bin/bash"
	}
	files := map[string]string{
		"passwd":        passwdFile(shell),
		"group":         groupFile(),
		"hostname":      hostname + "\n",
		"hosts":         hostsFile(hostname),
		"resolv.conf":   resolvConf(hostResolv, stubResolv),
		"nsswitch.conf": nsswitchConf,
	}
	if len(dns) > 0 {
		files["resolv.conf"] = resolvConf([]byte("nameserver "+strings.Join(dns, "\nnameserver ")+"\n"), nil)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := os.Symlink("../proc/self/mounts", filepath.Join(dir, "mtab")); err != nil {
		return err
	}
	for name, content := range extra {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			return err
		}
	}
	for _, name := range etcCopies {
		if err := copyEtc("/etc/"+name, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	for _, pattern := range append(etcBinds, "python3*") {
		matches, _ := filepath.Glob("/etc/" + pattern)
		for _, host := range matches {
			fi, err := os.Lstat(host)
			if err != nil {
				continue
			}
			dst := filepath.Join(dir, filepath.Base(host))
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				if err := copyEtc(host, dst); err != nil {
					return err
				}
			case fi.IsDir():
				if err := mkdir(dst, 0o755); err != nil {
					return err
				}
				if err := bindReadOnly(host, dst); err != nil {
					return err
				}
			}
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("remounting /etc read-only: %w", err)
	}
	return nil
}

// copyEtc copies a regular file (up to maxEtcCopy bytes, mode 0644) or
// reproduces a symlink; a missing source is skipped.
func copyEtc(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return nil
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return nil
		}
		return os.Symlink(target, dst)
	case fi.Mode().IsRegular():
		b, err := readLimited(src, maxEtcCopy)
		if err != nil {
			return nil // unreadable or too large: leave it out
		}
		return os.WriteFile(dst, b, 0o644)
	}
	return nil
}

func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}

// passwdFile is the sandbox's generated /etc/passwd.
func passwdFile(shell string) string {
	return "root:x:0:0:root:/root:" + shell + "\n" +
		"user:x:1000:1000:user:/home/user:" + shell + "\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
}

// groupFile is the sandbox's generated /etc/group.
func groupFile() string {
	return "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"
}

func hostsFile(hostname string) string {
	return "127.0.0.1\tlocalhost\n" +
		"127.0.1.1\t" + hostname + "\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"ff02::1\tip6-allnodes\n" +
		"ff02::2\tip6-allrouters\n"
}

const nsswitchConf = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n" +
	"protocols: files\nservices: files\nethers: files\nrpc: files\n"

// fallbackNameserver replaces loopback resolvers, which are unreachable
// from a sandbox's network namespace.
const fallbackNameserver = "1.1.1.1"

// resolvConf builds the sandbox's /etc/resolv.conf from the host's
// nameserver lines. A loopback resolver (such as systemd-resolved's
// 127.0.0.53) is replaced by the upstream servers systemd-resolved lists,
// if any, else by 1.1.1.1. At most three servers (the resolver's limit).
func resolvConf(host, systemdUpstream []byte) string {
	servers := nameservers(host)
	var out []string
	loopback := false
	for _, s := range servers {
		if s.IsLoopback() {
			loopback = true
			continue
		}
		out = append(out, s.String())
	}
	if loopback {
		for _, s := range nameservers(systemdUpstream) {
			if !s.IsLoopback() && !contains(out, s.String()) {
				out = append(out, s.String())
			}
		}
	}
	if len(out) == 0 {
		out = []string{fallbackNameserver}
	}
	if len(out) > 3 {
		out = out[:3]
	}
	var b strings.Builder
	for _, s := range out {
		b.WriteString("nameserver " + s + "\n")
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func nameservers(conf []byte) []netip.Addr {
	var out []netip.Addr
	sc := bufio.NewScanner(bytes.NewReader(conf))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(f[1])
		if err != nil || a.Zone() != "" {
			continue
		}
		out = append(out, a.Unmap())
	}
	return out
}

// setupDev mounts a tmpfs on dir with the host's harmless device nodes
// bound in, a private devpts instance and a /dev/shm of shm bytes.
func setupDev(dir string, shm int64) error {
	if err := mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, name := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		host := "/dev/" + name
		if _, err := os.Stat(host); err != nil {
			continue
		}
		dst := filepath.Join(dir, name)
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount(host, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %s: %w", host, err)
		}
	}
	pts := filepath.Join(dir, "pts")
	if err := mkdir(pts, 0o755); err != nil {
		return err
	}
	if err := mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return err
	}
	shmDir := filepath.Join(dir, "shm")
	if err := mkdir(shmDir, 0o755); err != nil {
		return err
	}
	if err := mount("tmpfs", shmDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,"+sizeOpt(shm)); err != nil {
		return err
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}
