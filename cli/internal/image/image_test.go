package image

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// testLock is a lock of the right form (its hash is made up).
const testLock = "ipykernel==6.29.5 \\\n    --hash=sha256:abababababababababababababababababababababababababababababababab\n"

const testTemplate = "FROM " + BaseImage + "@sha256:" + Placeholder + "\nCOPY a.txt /a.txt\n"

// writeTree makes a source tree under dir with the given umask and file
// times.
func writeTree(t *testing.T, dir string, umask int, mtime time.Time) {
	t.Helper()
	old := syscall.Umask(umask)
	defer syscall.Umask(old)
	files := map[string]string{
		TemplateName:     testTemplate,
		DigestName:       testDigest + "\n",
		LockName:         testLock,
		"a.txt":          "a\n",
		"sub/b.txt":      "b\n",
		"sub/deep/c.bin": strings.Repeat("c", 5000),
		"Zeta":           "upper case sorts first\n",
		"bin/tool":       "#!/bin/sh\necho hi\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		mode := fs.FileMode(0o666)
		if name == "bin/tool" {
			mode = 0o777
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o777); err != nil {
		t.Fatal(err)
	}
	_ = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error {
		return os.Chtimes(p, mtime, mtime)
	})
}

func build(t *testing.T, dir string, opts Options) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := Build(&buf, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(buf.Bytes())
	if got := hex.EncodeToString(h[:]); got != sum {
		t.Fatalf("Build returned sha256 %s, the bytes hash to %s", sum, got)
	}
	return buf.Bytes(), sum
}

func TestBuildTwiceIdentical(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, 0o022, time.Now())
	b1, s1 := build(t, dir, Options{})
	b2, s2 := build(t, dir, Options{})
	if !bytes.Equal(b1, b2) || s1 != s2 {
		t.Fatalf("two builds of one tree differ: %s, %s", s1, s2)
	}
}

func TestBuildIndependentOfMtimeAndUmask(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeTree(t, a, 0o022, time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	writeTree(t, b, 0o077, time.Date(2030, 7, 8, 9, 10, 11, 0, time.UTC))
	_, sa := build(t, a, Options{})
	_, sb := build(t, b, Options{})
	if sa != sb {
		t.Fatalf("copies with other mtimes and umask: %s vs %s", sa, sb)
	}
}

func TestBuildEntries(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, 0o077, time.Now())
	data, _ := build(t, dir, Options{})
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Comment != "" {
		t.Errorf("archive comment %q", zr.Comment)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if len(f.Extra) != 0 || f.Comment != "" {
			t.Errorf("%s: extra %x, comment %q", f.Name, f.Extra, f.Comment)
		}
		if !f.Modified.Equal(Epoch) {
			t.Errorf("%s: modified %v, want %v", f.Name, f.Modified, Epoch)
		}
		want := fs.FileMode(0o644)
		switch {
		case strings.HasSuffix(f.Name, "/"):
			want = fs.ModeDir | 0o755
		case f.Name == "bin/tool":
			want = 0o755
		}
		if f.Mode() != want {
			t.Errorf("%s: mode %v, want %v", f.Name, f.Mode(), want)
		}
		if !strings.HasSuffix(f.Name, "/") && f.Method != zip.Deflate {
			t.Errorf("%s: method %d, want Deflate", f.Name, f.Method)
		}
	}
	want := "Dockerfile Zeta a.txt bin/ bin/tool empty/ requirements.lock sub/ sub/b.txt sub/deep/ sub/deep/c.bin"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("entries:\n got %s\nwant %s", got, want)
	}
	rc, err := zr.Open(DockerfileName)
	if err != nil {
		t.Fatal(err)
	}
	var df bytes.Buffer
	_, _ = df.ReadFrom(rc)
	wantDF := "FROM " + BaseImage + "@" + testDigest + "\nCOPY a.txt /a.txt\n"
	if df.String() != wantDF {
		t.Errorf("Dockerfile:\n%s\nwant\n%s", df.String(), wantDF)
	}
}

func TestBuildDigestOption(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, 0o022, time.Now())
	_, s1 := build(t, dir, Options{})
	_, s2 := build(t, dir, Options{BaseDigest: "sha256:" + strings.Repeat("f", 64)})
	if s1 == s2 {
		t.Fatal("another base digest gave the same artifact")
	}
}

func TestBuildRefusesSymlinks(t *testing.T) {
	cases := []struct {
		name string
		make func(dir string) error
		path string
	}{
		{"file at the root", func(d string) error { return os.Symlink("/etc/passwd", filepath.Join(d, "passwd")) }, "passwd"},
		{"file deep", func(d string) error { return os.Symlink("../a.txt", filepath.Join(d, "sub", "deep", "link")) }, "sub/deep/link"},
		{"directory", func(d string) error { return os.Symlink("/etc", filepath.Join(d, "sub", "etc")) }, "sub/etc"},
		{"dangling", func(d string) error { return os.Symlink("nowhere", filepath.Join(d, "zz")) }, "zz"},
		{"the digest", func(d string) error {
			os.Remove(filepath.Join(d, DigestName))
			return os.Symlink("a.txt", filepath.Join(d, DigestName))
		}, DigestName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, 0o022, time.Now())
			if err := c.make(dir); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, err := Build(&buf, dir, Options{})
			var se *SymlinkError
			if !errors.As(err, &se) || se.Path != c.path {
				t.Fatalf("err %v, want a *SymlinkError for %s", err, c.path)
			}
			if !strings.Contains(err.Error(), c.path) {
				t.Errorf("%q does not name %s", err, c.path)
			}
			if buf.Len() != 0 {
				t.Errorf("%d bytes written for a refused tree", buf.Len())
			}
		})
	}
	t.Run("the source directory", func(t *testing.T) {
		real := t.TempDir()
		writeTree(t, real, 0o022, time.Now())
		link := filepath.Join(t.TempDir(), "image")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		_, err := Build(&bytes.Buffer{}, link, Options{})
		var se *SymlinkError
		if !errors.As(err, &se) || se.Path != "." || !strings.Contains(err.Error(), link) {
			t.Fatalf("err %v, want a *SymlinkError for the directory %s", err, link)
		}
	})
}

func TestBuildRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, 0o022, time.Now())
	if err := syscall.Mkfifo(filepath.Join(dir, "sub", "fifo"), 0o644); err != nil {
		t.Skip(err)
	}
	_, err := Build(&bytes.Buffer{}, dir, Options{})
	var ie *IrregularFileError
	if !errors.As(err, &ie) || ie.Path != "sub/fifo" {
		t.Fatalf("err %v, want an *IrregularFileError for sub/fifo", err)
	}
}

func TestBuildDigestErrors(t *testing.T) {
	for name, content := range map[string]*string{
		"missing":   nil,
		"empty":     ptr(""),
		"no prefix": ptr(strings.Repeat("a", 64)),
		"short":     ptr("sha256:abc"),
		"upper":     ptr("sha256:" + strings.Repeat("A", 64)),
		"two lines": ptr(testDigest + "\n" + testDigest + "\n"),
		"sha512":    ptr("sha512:" + strings.Repeat("a", 128)),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, 0o022, time.Now())
			p := filepath.Join(dir, DigestName)
			os.Remove(p)
			if content != nil {
				if err := os.WriteFile(p, []byte(*content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Build(&bytes.Buffer{}, dir, Options{})
			var de *DigestError
			if !errors.As(err, &de) || de.Path != p {
				t.Fatalf("err %v, want a *DigestError for %s", err, p)
			}
			if !strings.Contains(err.Error(), DigestCommand) {
				t.Errorf("%q does not say how to get the digest", err)
			}
		})
	}
	dir := t.TempDir()
	writeTree(t, dir, 0o022, time.Now())
	var de *DigestError
	if _, err := Build(&bytes.Buffer{}, dir, Options{BaseDigest: "latest"}); !errors.As(err, &de) {
		t.Fatalf("Options.BaseDigest latest: err %v, want a *DigestError", err)
	}
}

func TestBuildTemplateErrors(t *testing.T) {
	var te *TemplateError
	dir := t.TempDir()
	writeTree(t, dir, 0o022, time.Now())
	os.Remove(filepath.Join(dir, TemplateName))
	if _, err := Build(&bytes.Buffer{}, dir, Options{}); !errors.As(err, &te) {
		t.Errorf("no template: err %v, want a *TemplateError", err)
	}

	dir = t.TempDir()
	writeTree(t, dir, 0o022, time.Now())
	os.WriteFile(filepath.Join(dir, DockerfileName), []byte("FROM x\n"), 0o644)
	if _, err := Build(&bytes.Buffer{}, dir, Options{}); !errors.As(err, &te) {
		t.Errorf("a Dockerfile beside the template: err %v, want a *TemplateError", err)
	}

	dir = t.TempDir()
	writeTree(t, dir, 0o022, time.Now())
	os.WriteFile(filepath.Join(dir, "dockerfile"), []byte("FROM x\n"), 0o644)
	if _, err := Build(&bytes.Buffer{}, dir, Options{}); !errors.As(err, &te) {
		t.Errorf("a lowercase dockerfile beside the template: err %v, want a *TemplateError", err)
	}

	dir = t.TempDir()
	writeTree(t, dir, 0o022, time.Now())
	os.WriteFile(filepath.Join(dir, TemplateName), []byte("FROM "+BaseImage+"\n"), 0o644)
	if _, err := Build(&bytes.Buffer{}, dir, Options{}); !errors.As(err, &te) {
		t.Errorf("a template without the placeholder: err %v, want a *TemplateError", err)
	}
}

// TestBuildRepositoryImage builds the repository's image/ with a test
// digest (no base.digest is committed): no links, a usable template.
func TestBuildRepositoryImage(t *testing.T) {
	// A copy with a lock of the right form (none is committed either).
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-R", repoImageDir+"/.", dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, LockName), []byte(testLock), 0o644); err != nil {
		t.Fatal(err)
	}
	data, _ := build(t, dir, Options{BaseDigest: testDigest})
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := zr.Open(DockerfileName)
	if err != nil {
		t.Fatal(err)
	}
	var df bytes.Buffer
	_, _ = df.ReadFrom(rc)
	if !strings.Contains(df.String(), "\nFROM "+BaseImage+"@"+testDigest+"\n") {
		t.Errorf("the artifact's Dockerfile does not name the base by the digest:\n%s", df.String())
	}
	if strings.Contains(df.String(), Placeholder) {
		t.Errorf("the artifact's Dockerfile still holds %s", Placeholder)
	}
}

func ptr(s string) *string { return &s }
