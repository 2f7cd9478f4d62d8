package rootfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// TmpfsLimits are the size bounds of a sandbox's writable tmpfs mounts, in
// bytes. /etc (16 MiB) and the root (64 MiB, only mount points and
// symlinks) are fixed, /dev is 64 KiB.
type TmpfsLimits struct {
	Home  int64 `json:"home"`
	Tmp   int64 `json:"tmp"`
	Run   int64 `json:"run"`
	Shm   int64 `json:"shm"`
	VarTm int64 `json:"var_tmp"`
}

// TmpfsSizes bounds the writable tmpfs mounts of a sandbox with memBytes of
// memory (tmpfs pages are charged to its memory cgroup, so that a full
// tmpfs is ENOSPC rather than an OOM kill while the rest of the memory is
// free): /home/user half the memory, /tmp a quarter, /var/tmp an eighth,
// /run and /dev/shm a sixteenth each, at most 64 MiB (2 GiB: 1024, 512,
// 256, 64, 64 MiB), and none less than 1 MiB.
func TmpfsSizes(memBytes int64) TmpfsLimits {
	const mib = 1 << 20
	small := min(memBytes/16, 64*mib)
	return TmpfsLimits{Home: max(memBytes/2, mib), Tmp: max(memBytes/4, mib), VarTm: max(memBytes/8, mib), Run: max(small, mib), Shm: max(small, mib)}
}

// SizeOpt is a tmpfs's size option for n bytes (1 MiB when n is not
// positive).
func SizeOpt(n int64) string {
	if n <= 0 {
		n = 1 << 20
	}
	return "size=" + strconv.FormatInt(n, 10)
}

// Mount mounts source on target, with an error that names both.
func Mount(source, target, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mounting %s on %s: %w", fstype, target, err)
	}
	return nil
}

// Mkdir makes the directory path; one that exists is not an error.
func Mkdir(path string, mode os.FileMode) error {
	if err := os.Mkdir(path, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// BindReadOnly bind-mounts src on dst, read-only, nosuid and nodev.
func BindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s: %w", src, err)
	}
	if err := RemountBind(dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return fmt.Errorf("remounting %s read-only: %w", src, err)
	}
	return nil
}

// BindWritable bind-mounts src on dst, nosuid and nodev.
func BindWritable(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s: %w", src, err)
	}
	return RemountBind(dst, unix.MS_NOSUID|unix.MS_NODEV)
}

// RemountBind remounts the bind mount dst with flags added to the flags it
// has: in a user namespace the flags of a mount copied from the host are
// locked, and a remount that would clear one (noexec, an atime mode) is
// refused.
func RemountBind(dst string, flags uintptr) error {
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

// Etc mounts a small tmpfs on dir, writes the generated account and
// network files (resolv.conf naming dns when set, else the host's
// resolvers: see ResolvConf), the extra files (paths relative to dir),
// copies or binds the allow-listed host files and makes it read-only.
func Etc(dir, hostname string, dns []string, extra map[string][]byte) error {
	if err := Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=16m"); err != nil {
		return err
	}
	hostResolv, _ := ReadLimited("/etc/resolv.conf", 64<<10)
	stubResolv, _ := ReadLimited("/run/systemd/resolve/resolv.conf", 64<<10)
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
		"resolv.conf":   ResolvConf(hostResolv, stubResolv),
		"nsswitch.conf": nsswitchConf,
	}
	if len(dns) > 0 {
		files["resolv.conf"] = ResolvConf([]byte("nameserver "+strings.Join(dns, "\nnameserver ")+"\n"), nil)
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
				if err := Mkdir(dst, 0o755); err != nil {
					return err
				}
				if err := BindReadOnly(host, dst); err != nil {
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
		b, err := ReadLimited(src, maxEtcCopy)
		if err != nil {
			return nil // unreadable or too large: leave it out
		}
		return os.WriteFile(dst, b, 0o644)
	}
	return nil
}

// ReadLimited reads the file at path, of at most max bytes (larger is an
// error).
func ReadLimited(path string, max int64) ([]byte, error) {
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

// hostsFile is the sandbox's generated /etc/hosts.
func hostsFile(hostname string) string {
	return "127.0.0.1\tlocalhost\n" +
		"127.0.1.1\t" + hostname + "\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"ff02::1\tip6-allnodes\n" +
		"ff02::2\tip6-allrouters\n"
}

// nsswitchConf is the sandbox's /etc/nsswitch.conf: files, and DNS for
// hosts.
const nsswitchConf = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n" +
	"protocols: files\nservices: files\nethers: files\nrpc: files\n"

// fallbackNameserver replaces loopback resolvers, which are unreachable
// from a sandbox's network namespace.
const fallbackNameserver = "1.1.1.1"

// ResolvConf builds the sandbox's /etc/resolv.conf from the host's
// nameserver lines. A loopback resolver (such as systemd-resolved's
// 127.0.0.53) is replaced by the upstream servers systemd-resolved lists,
// if any, else by 1.1.1.1. At most three servers (the resolver's limit).
func ResolvConf(host, systemdUpstream []byte) string {
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
			if !s.IsLoopback() && !slices.Contains(out, s.String()) {
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

// nameservers are the addresses of conf's nameserver lines (IPv4-mapped
// ones unmapped; those with a zone and unparsable ones left out).
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

// Dev mounts a tmpfs on dir with the host's harmless device nodes
// bound in, a private devpts instance and a /dev/shm of shm bytes.
func Dev(dir string, shm int64) error {
	if err := Mkdir(dir, 0o755); err != nil {
		return err
	}
	if err := Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
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
	if err := Mkdir(pts, 0o755); err != nil {
		return err
	}
	if err := Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return err
	}
	shmDir := filepath.Join(dir, "shm")
	if err := Mkdir(shmDir, 0o755); err != nil {
		return err
	}
	if err := Mount("tmpfs", shmDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,"+SizeOpt(shm)); err != nil {
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

// Base mounts the root's tmpfs on root (mode 0755, 64 MiB: mount points
// and symlinks only) and makes its usr directory, the mount point of the
// host's /usr or of a template's.
func Base(root string) error {
	if err := Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
		return err
	}
	return Mkdir(filepath.Join(root, "usr"), 0o755)
}

// HostDirs gives root the host's /bin, /sbin and /lib*: symlinks into /usr
// on merged-/usr hosts, else read-only binds.
func HostDirs(root string) error {
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
			if err := Mkdir(dst, 0o755); err != nil {
				return err
			}
			if err := BindReadOnly(host, dst); err != nil {
				return err
			}
		}
	}
	return nil
}

// Scratch mounts root's private tmpfs of bounded size: /tmp and /var/tmp
// (1777) and /run (0755), and, with rootHome, /root (0700, root's, sized
// like /tmp).
func Scratch(root string, limits TmpfsLimits, rootHome bool) error {
	if err := os.MkdirAll(filepath.Join(root, "var", "tmp"), 0o755); err != nil {
		return err
	}
	for path, opts := range map[string]string{
		"tmp":     "mode=1777," + SizeOpt(limits.Tmp),
		"var/tmp": "mode=1777," + SizeOpt(limits.VarTm),
		"run":     "mode=0755," + SizeOpt(limits.Run),
	} {
		p := filepath.Join(root, path)
		if err := Mkdir(p, 0o755); err != nil {
			return err
		}
		if err := Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return err
		}
	}
	if !rootHome {
		return nil
	}
	p := filepath.Join(root, "root")
	if err := Mkdir(p, 0o700); err != nil {
		return err
	}
	return Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,uid=0,gid=0,"+SizeOpt(limits.Tmp))
}

// Proc mounts a proc (nosuid, nodev, noexec) on root's /proc.
func Proc(root string) error {
	if err := Mkdir(filepath.Join(root, "proc"), 0o555); err != nil {
		return err
	}
	return Mount("proc", filepath.Join(root, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// Pivot makes root the root of this mount namespace (pivot_root), detaches
// the old one and enters the new.
func Pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the old root: %w", err)
	}
	return unix.Chdir("/")
}
