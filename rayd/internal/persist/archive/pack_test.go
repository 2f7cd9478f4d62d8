package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

const uid = 1000

// home makes a directory owned by uid 1000 (reachable by it) and the
// User for it, with a safefs acting as that user.
func home(t *testing.T) (*safefs.FS, safefs.User, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: acts as uid 1000 with setfsuid, chowns, mounts")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := filepath.Join(dir, "home")
	if err := os.Mkdir(h, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(h, uid, uid); err != nil {
		t.Fatal(err)
	}
	f, err := safefs.New(safefs.Options{Privileged: true, DiskReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	return f, safefs.User{UID: uid, GID: uid, Groups: []uint32{uid}, Home: h}, h
}

// as runs fn and chowns what it made under root to uid 1000.
func build(t *testing.T, root string, fn func(p func(string) string)) {
	t.Helper()
	fn(func(rel string) string { return filepath.Join(root, rel) })
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// tree describes a directory tree: path -> "d 0755", "f 0644 <content>",
// "l <target>", with the owner when it is not uid 1000.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		var s string
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			s = "d " + octal(st.Mode)
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if len(b) > 64 {
				b = []byte(strings.Repeat("…", 1) + string(rune('0'+len(b)%10)))
			}
			s = "f " + octal(st.Mode) + " " + string(b)
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			s = "l " + target
		default:
			s = "other"
		}
		if st.Uid != uid || st.Gid != uid {
			s += " owned by " + string(rune('0'+st.Uid%10))
		}
		out[rel] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func octal(m uint32) string {
	const digits = "01234567"
	m &= 0o7777
	return string([]byte{digits[m>>9&7], digits[m>>6&7], digits[m>>3&7], digits[m&7]})
}

func diff(t *testing.T, got, want map[string]string) {
	t.Helper()
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s: got %q, want %q", k, got[k], want[k])
		}
	}
}

// TestRoundTrip packs a HOME with files, directories, links, modes,
// excluded caches, special files, another uid's unreadable file, a hard
// link and a mount point, and extracts it into an empty HOME.
func TestRoundTrip(t *testing.T) {
	f, u, src := home(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	build(t, src, func(p func(string) string) {
		must(t, os.MkdirAll(p("proj/src"), 0o755))
		must(t, os.WriteFile(p("proj/src/main.py"), []byte("print(42)\n"), 0o644))
		must(t, os.WriteFile(p("proj/run.sh"), []byte("#!/bin/sh\n"), 0o755))
		must(t, os.WriteFile(p("secret"), []byte("s"), 0o600))
		must(t, os.WriteFile(p("empty"), nil, 0o644))
		must(t, os.WriteFile(p("big.bin"), big, 0o644))
		must(t, os.WriteFile(p("ünï cødé.txt"), []byte("u"), 0o644))
		must(t, os.Symlink("proj/src/main.py", p("rel-link")))
		must(t, os.Symlink("/etc/passwd", p("abs-link")))
		must(t, os.Symlink("does/not/exist", p("dangling")))
		must(t, os.Symlink("proj", p("dir-link")))
		must(t, os.MkdirAll(p(".cache/pip"), 0o755))
		must(t, os.WriteFile(p(".cache/pip/x"), []byte("c"), 0o644))
		must(t, os.MkdirAll(p("proj/src/__pycache__"), 0o755))
		must(t, os.WriteFile(p("proj/src/__pycache__/m.pyc"), []byte("c"), 0o644))
		must(t, os.MkdirAll(p(".local/share/jupyter/runtime"), 0o700))
		must(t, os.WriteFile(p(".local/share/jupyter/runtime/kernel-1.json"), []byte("{}"), 0o600))
		must(t, os.WriteFile(p("debug.log"), []byte("l"), 0o644))
		must(t, os.MkdirAll(p("ro-dir"), 0o755))
		must(t, os.WriteFile(p("ro-dir/f"), []byte("r"), 0o444))
		must(t, os.Link(p("secret"), p("secret-hardlink")))
		must(t, unix.Mkfifo(p("fifo"), 0o644))
		must(t, os.WriteFile(p("setuid"), []byte("x"), 0o755))
		must(t, os.Chmod(p("setuid"), 0o4755|os.ModeSetuid))
		must(t, os.Mkdir(p("mnt"), 0o755))
	})
	must(t, os.Chmod(filepath.Join(src, "ro-dir"), 0o555))
	// Another uid's file the user cannot read, and a directory it cannot
	// list.
	other := filepath.Join(src, "root-only")
	must(t, os.WriteFile(other, []byte("nope"), 0o600))
	must(t, os.Mkdir(filepath.Join(src, "root-dir"), 0o700))
	must(t, os.WriteFile(filepath.Join(src, "root-dir", "x"), []byte("nope"), 0o644))
	// A mount point: the walk stays on HOME's file system.
	must(t, unix.Mount("tmpfs", filepath.Join(src, "mnt"), "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { unix.Unmount(filepath.Join(src, "mnt"), unix.MNT_DETACH) })
	must(t, os.WriteFile(filepath.Join(src, "mnt", "elsewhere"), []byte("m"), 0o644))

	ex, err := ParseExcludes([]string{"*.log"})
	must(t, err)
	var archive bytes.Buffer
	var progressed int
	c, err := Pack(t.Context(), f, u, src, ex, &archive, func(Counts) { progressed++ })
	must(t, err)
	// Files: main.py, run.sh, secret, its hard link, empty, big.bin,
	// ünï cødé.txt, ro-dir/f, setuid; directories: proj, proj/src, ro-dir,
	// and .local/share/jupyter (its runtime is excluded).
	wantPack := Counts{Files: 9, Directories: 6, Symlinks: 4, ContentBytes: uint64(len(big)) + 10 + 10 + 1 + 1 + 1 + 1 + 1, Special: 1, Unreadable: 2, OtherDevice: 1}
	if c != wantPack {
		t.Errorf("pack counts %+v\nwant %+v", c, wantPack)
	}
	if progressed != int(c.Files) {
		t.Errorf("progress called %d times for %d files", progressed, c.Files)
	}
	if archive.Len() > len(big)/10 {
		t.Errorf("archive of %d bytes: not compressed", archive.Len())
	}

	plan, err := Scan(bytes.NewReader(archive.Bytes()), 0)
	must(t, err)
	if plan.Files != c.Files || plan.Directories != c.Directories || plan.Symlinks != c.Symlinks || plan.ContentBytes != c.ContentBytes {
		t.Errorf("scan %+v disagrees with pack %+v", plan, c)
	}

	_, _, dst := home(t)
	u.Home = dst
	x, err := f.NewExtractor(t.Context(), u, dst)
	must(t, err)
	ec, err := Extract(t.Context(), x, bytes.NewReader(archive.Bytes()), nil)
	must(t, err)
	if ec.Files != c.Files || ec.Directories != c.Directories || ec.Symlinks != c.Symlinks || ec.Conflicts != 0 {
		t.Errorf("extract counts %+v", ec)
	}
	want := map[string]string{
		"proj":                 "d 0755",
		"proj/src":             "d 0755",
		"proj/src/main.py":     "f 0644 print(42)\n",
		"proj/run.sh":          "f 0755 #!/bin/sh\n",
		"secret":               "f 0600 s",
		"secret-hardlink":      "f 0600 s",
		"empty":                "f 0644 ",
		"big.bin":              "f 0644 …6",
		"ünï cødé.txt":         "f 0644 u",
		"rel-link":             "l proj/src/main.py",
		"abs-link":             "l /etc/passwd",
		"dangling":             "l does/not/exist",
		"dir-link":             "l proj",
		"ro-dir":               "d 0555",
		"ro-dir/f":             "f 0444 r",
		"setuid":               "f 0755 x",
		".local":               "d 0700",
		".local/share":         "d 0700",
		".local/share/jupyter": "d 0700",
	}
	diff(t, tree(t, dst), want)
	got, err := os.ReadFile(filepath.Join(dst, "big.bin"))
	if err != nil || !bytes.Equal(got, big) {
		t.Errorf("big.bin differs (%d bytes, %v)", len(got), err)
	}
	st, err := os.Stat(filepath.Join(dst, "proj/src/main.py"))
	must(t, err)
	sst, _ := os.Stat(filepath.Join(src, "proj/src/main.py"))
	if !st.ModTime().Equal(sst.ModTime().Truncate(time.Second)) {
		t.Errorf("mtime %v, want %v", st.ModTime(), sst.ModTime().Truncate(time.Second))
	}
}

// extractInto runs Scan then Extract of a into a fresh HOME, with a
// directory "outside" beside it that must stay untouched. It returns the
// HOME, the outside directory and both errors.
func extractInto(t *testing.T, a []byte, prepare func(home, outside string)) (string, string, Counts, error, error) {
	t.Helper()
	f, u, h := home(t)
	outside := filepath.Join(filepath.Dir(h), "outside")
	must(t, os.Mkdir(outside, 0o777))
	must(t, os.WriteFile(filepath.Join(outside, "target"), []byte("untouched"), 0o666))
	if prepare != nil {
		prepare(h, outside)
	}
	_, serr := Scan(bytes.NewReader(a), 0)
	x, err := f.NewExtractor(t.Context(), u, h)
	must(t, err)
	c, eerr := Extract(context.Background(), x, bytes.NewReader(a), nil)
	return h, outside, c, serr, eerr
}

func outsideUntouched(t *testing.T, outside string) {
	t.Helper()
	des, err := os.ReadDir(outside)
	must(t, err)
	if len(des) != 1 {
		t.Errorf("outside holds %d entries, want only target", len(des))
	}
	b, err := os.ReadFile(filepath.Join(outside, "target"))
	if err != nil || string(b) != "untouched" {
		t.Errorf("outside/target = %q, %v", b, err)
	}
}

// TestCraftedArchives extracts hostile archives: each is refused before
// anything is written, or its hostile entries are left out and counted;
// nothing outside HOME changes, nothing is owned by another uid.
func TestCraftedArchives(t *testing.T) {
	reg := func(name string, size int64, mode int64) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: size, Uid: 0, Gid: 0}
	}
	t.Run("dotdot refused", func(t *testing.T) {
		a := tgz(t, reg("../outside/target", 1, 0o644))
		h, out, _, serr, eerr := extractInto(t, a, nil)
		if !errors.Is(serr, ErrUnsafe) || !errors.Is(eerr, ErrUnsafe) {
			t.Errorf("scan %v, extract %v; want ErrUnsafe", serr, eerr)
		}
		outsideUntouched(t, out)
		diff(t, tree(t, h), map[string]string{})
	})
	t.Run("absolute refused", func(t *testing.T) {
		a := tgz(t, reg("/tmp/rayito-abs-test", 1, 0o644))
		_, out, _, serr, eerr := extractInto(t, a, nil)
		if !errors.Is(serr, ErrUnsafe) || !errors.Is(eerr, ErrUnsafe) {
			t.Errorf("scan %v, extract %v; want ErrUnsafe", serr, eerr)
		}
		if _, err := os.Lstat("/tmp/rayito-abs-test"); err == nil {
			t.Error("/tmp/rayito-abs-test was written")
		}
		outsideUntouched(t, out)
	})
	t.Run("devices and fifo skipped", func(t *testing.T) {
		a := tgz(t,
			tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666},
			tar.Header{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8, Mode: 0o666},
			tar.Header{Name: "pipe", Typeflag: tar.TypeFifo, Mode: 0o666},
			reg("ok", 2, 0o644))
		h, out, c, serr, eerr := extractInto(t, a, nil)
		if serr != nil || eerr != nil {
			t.Fatalf("scan %v, extract %v", serr, eerr)
		}
		if c.Special != 3 || c.Files != 1 {
			t.Errorf("counts %+v", c)
		}
		diff(t, tree(t, h), map[string]string{"ok": "f 0644 xx"})
		outsideUntouched(t, out)
	})
	t.Run("hard link to /etc/shadow skipped", func(t *testing.T) {
		before, err := os.Stat("/etc/shadow")
		a := tgz(t, tar.Header{Name: "shadow", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"},
			tar.Header{Name: "shadow2", Typeflag: tar.TypeLink, Linkname: "../../../../../../etc/shadow"})
		h, _, c, serr, eerr := extractInto(t, a, nil)
		if serr != nil || eerr != nil {
			t.Fatalf("scan %v, extract %v", serr, eerr)
		}
		if c.HardLinks != 2 {
			t.Errorf("counts %+v", c)
		}
		diff(t, tree(t, h), map[string]string{})
		if err == nil {
			after, _ := os.Stat("/etc/shadow")
			if after.Sys().(*syscall.Stat_t).Nlink != before.Sys().(*syscall.Stat_t).Nlink {
				t.Error("/etc/shadow gained a link")
			}
		}
	})
	t.Run("setuid setgid sticky dropped", func(t *testing.T) {
		a := tgz(t, reg("suid", 1, 0o4755), reg("sgid", 1, 0o2755),
			tar.Header{Name: "sticky/", Typeflag: tar.TypeDir, Mode: 0o1777})
		h, _, c, serr, eerr := extractInto(t, a, nil)
		if serr != nil || eerr != nil {
			t.Fatalf("scan %v, extract %v", serr, eerr)
		}
		if c.ModesSanitized != 3 {
			t.Errorf("counts %+v", c)
		}
		diff(t, tree(t, h), map[string]string{"suid": "f 0755 x", "sgid": "f 0755 x", "sticky": "d 0777"})
	})
	t.Run("symlink then through the symlink refused", func(t *testing.T) {
		a := tgz(t, tar.Header{Name: "escape", Typeflag: tar.TypeSymlink, Linkname: "../outside"},
			reg("escape/target", 5, 0o644))
		h, out, _, serr, eerr := extractInto(t, a, nil)
		if !errors.Is(serr, ErrUnsafe) || !errors.Is(eerr, ErrUnsafe) {
			t.Errorf("scan %v, extract %v; want ErrUnsafe", serr, eerr)
		}
		outsideUntouched(t, out)
		_ = h
	})
	t.Run("existing link at an entry's path replaced, never followed", func(t *testing.T) {
		a := tgz(t, reg("planted", 3, 0o644),
			tar.Header{Name: "planted-dir/", Typeflag: tar.TypeDir, Mode: 0o755},
			reg("planted-dir/target", 3, 0o644),
			tar.Header{Name: "planted-link", Typeflag: tar.TypeSymlink, Linkname: "x"})
		h, out, c, serr, eerr := extractInto(t, a, func(h, out string) {
			must(t, os.Symlink(filepath.Join(out, "target"), filepath.Join(h, "planted")))
			must(t, os.Symlink(out, filepath.Join(h, "planted-dir")))
			must(t, os.Symlink(filepath.Join(out, "target"), filepath.Join(h, "planted-link")))
			for _, n := range []string{"planted", "planted-dir", "planted-link"} {
				must(t, os.Lchown(filepath.Join(h, n), uid, uid))
			}
		})
		if serr != nil || eerr != nil || c.Conflicts != 0 {
			t.Fatalf("scan %v, extract %v, counts %+v", serr, eerr, c)
		}
		diff(t, tree(t, h), map[string]string{"planted": "f 0644 xxx", "planted-dir": "d 0755", "planted-dir/target": "f 0644 xxx", "planted-link": "l x"})
		outsideUntouched(t, out)
	})
	t.Run("existing link above an entry never followed", func(t *testing.T) {
		// No directory entry replaces the link: the file is a conflict.
		a := tgz(t, reg("via/target", 4, 0o644), reg("kept", 1, 0o644))
		h, out, c, serr, eerr := extractInto(t, a, func(h, out string) {
			must(t, os.Symlink(out, filepath.Join(h, "via")))
			must(t, os.Lchown(filepath.Join(h, "via"), uid, uid))
		})
		if serr != nil || eerr != nil {
			t.Fatalf("scan %v, extract %v", serr, eerr)
		}
		if c.Conflicts != 1 || c.Files != 1 {
			t.Errorf("counts %+v", c)
		}
		outsideUntouched(t, out)
		diff(t, tree(t, h), map[string]string{"via": "l " + out, "kept": "f 0644 x"})
	})
	t.Run("ownership is the user's", func(t *testing.T) {
		a := tgz(t, tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: 0},
			tar.Header{Name: "d/f", Typeflag: tar.TypeReg, Mode: 0o644, Uid: 0, Gid: 0, Uname: "root", Size: 1},
			tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "d", Uid: 4242})
		h, _, _, serr, eerr := extractInto(t, a, nil)
		if serr != nil || eerr != nil {
			t.Fatalf("scan %v, extract %v", serr, eerr)
		}
		diff(t, tree(t, h), map[string]string{"d": "d 0755", "d/f": "f 0644 x", "l": "l d"})
	})
	t.Run("directories without write or search permission", func(t *testing.T) {
		a := tgz(t, tar.Header{Name: "ro/", Typeflag: tar.TypeDir, Mode: 0o500},
			tar.Header{Name: "ro/sub/", Typeflag: tar.TypeDir, Mode: 0o000},
			reg("ro/sub/f", 1, 0o400), reg("ro/g", 1, 0o000))
		h, _, c, serr, eerr := extractInto(t, a, nil)
		if serr != nil || eerr != nil || c.Files != 2 {
			t.Fatalf("scan %v, extract %v, counts %+v", serr, eerr, c)
		}
		for _, rel := range []string{"ro/sub/f", "ro/g"} {
			if _, err := os.Lstat(filepath.Join(h, rel)); err != nil {
				t.Errorf("%s: %v", rel, err)
			}
		}
		for rel, want := range map[string]os.FileMode{"ro": 0o500, "ro/sub": 0, "ro/g": 0} {
			st, err := os.Lstat(filepath.Join(h, rel))
			if err != nil || st.Mode().Perm() != want {
				t.Errorf("%s: %v %v, want %o", rel, st.Mode(), err, want)
			}
		}
	})
	t.Run("a file over a directory", func(t *testing.T) {
		a := tgz(t, reg("emptydir", 1, 0o644), reg("fulldir", 1, 0o644))
		h, _, c, serr, eerr := extractInto(t, a, func(h, _ string) {
			must(t, os.Mkdir(filepath.Join(h, "emptydir"), 0o755))
			must(t, os.Mkdir(filepath.Join(h, "fulldir"), 0o755))
			must(t, os.WriteFile(filepath.Join(h, "fulldir", "keep"), []byte("k"), 0o644))
			for _, p := range []string{"emptydir", "fulldir", "fulldir/keep"} {
				must(t, os.Chown(filepath.Join(h, p), uid, uid))
			}
		})
		if serr != nil || eerr != nil {
			t.Fatalf("scan %v, extract %v", serr, eerr)
		}
		if c.Conflicts != 1 || c.Files != 1 {
			t.Errorf("counts %+v", c)
		}
		diff(t, tree(t, h), map[string]string{"emptydir": "f 0644 x", "fulldir": "d 0755", "fulldir/keep": "f 0644 k"})
	})
	t.Run("disk reserve", func(t *testing.T) {
		// A 2 MiB file into a HOME on a 1 MiB file system.
		a := tgz(t, reg("huge", 2<<20, 0o644))
		f, u, h := home(t)
		must(t, unix.Mount("tmpfs", h, "tmpfs", 0, "size=1m,mode=0755,uid=1000,gid=1000"))
		t.Cleanup(func() { unix.Unmount(h, unix.MNT_DETACH) })
		f, err := safefs.New(safefs.Options{Privileged: true})
		must(t, err)
		x, err := f.NewExtractor(t.Context(), u, h)
		must(t, err)
		_, err = Extract(t.Context(), x, bytes.NewReader(a), nil)
		if !errors.Is(err, safefs.ErrDiskReserve) && !errors.Is(err, safefs.ErrDiskFull) {
			t.Errorf("extract: %v, want disk reserve or full", err)
		}
		des, _ := os.ReadDir(h)
		if len(des) != 0 {
			t.Errorf("HOME holds %d entries after a failed write", len(des))
		}
	})
}
