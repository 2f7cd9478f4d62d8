package template

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

func fullTemplate() *Template {
	return FromBaseImage("python:3.12-slim").
		RunCmd("apt-get update && apt-get install -y curl").
		Copy("app", "/srv/app", WithOwner(UserUser)).
		Copy("requirements.txt", "/srv/").
		PipInstall("requests", "uvicorn[standard]==0.30.*").
		SetEnvs(map[string]string{"B": `say "hi" $HOME \o/`, "A": "1"}).
		Workdir("/srv/app").
		SetUser(UserUser).
		SetStartCmd("python3 -m http.server 8000", 8000)
}

func fullContext(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"app/main.py":      "print('hi')\n",
		"app/lib/util.py":  "X = 1\n",
		"app/lib/link.py":  "->util.py",
		"app/empty/":       "",
		"requirements.txt": "requests\n",
		"unrelated.txt":    "not copied\n",
	})
	if err := os.Chmod(filepath.Join(dir, "app/main.py"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCompileLayout(t *testing.T) {
	t.Parallel()
	a, err := Compile(t.Context(), fullTemplate(), fullContext(t))
	if err != nil {
		t.Fatal(err)
	}
	ents, names := readZip(t, a)
	want := []string{
		"Dockerfile",
		"context/",
		"context/app/",
		"context/app/empty/",
		"context/app/lib/",
		"context/app/lib/link.py",
		"context/app/lib/util.py",
		"context/app/main.py",
		"context/requirements.txt",
		"template.json",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("entries:\n%q\nwant\n%q", names, want)
	}
	modes := map[string]fs.FileMode{
		"Dockerfile":               0o644,
		"context/":                 fs.ModeDir | 0o755,
		"context/app/main.py":      0o755,
		"context/app/lib/util.py":  0o644,
		"context/app/lib/link.py":  fs.ModeSymlink | 0o777,
		"context/requirements.txt": 0o644,
		"template.json":            0o644,
	}
	for n, m := range modes {
		if got := ents[n].mode; got != m {
			t.Errorf("%s: mode %v, want %v", n, got, m)
		}
	}
	if got := ents["context/app/lib/link.py"].data; got != "util.py" {
		t.Errorf("link content %q, want its target", got)
	}
	for n, e := range ents {
		h := e.hdr
		if len(h.Extra) != 0 || h.ModifiedDate != msdos1980 || h.ModifiedTime != 0 || !h.Modified.Equal(time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)) && !h.Modified.IsZero() {
			t.Errorf("%s: extra %x, date %#x, time %#x: want no extra field and 1980-01-01 00:00", n, h.Extra, h.ModifiedDate, h.ModifiedTime)
		}
	}
	spec, err := ptemplate.Decode([]byte(ents["template.json"].data))
	if err != nil {
		t.Fatalf("template.json: %v", err)
	}
	if !reflect.DeepEqual(spec, a.Spec) {
		t.Errorf("template.json = %+v, want %+v", spec, a.Spec)
	}
	if c := spec.Steps[2].Copy; c == nil || c.Dst != "/srv/requirements.txt" || c.Src != "requirements.txt" || c.Owner != "" {
		t.Errorf("copy into a directory: %+v", c)
	}
	if c := spec.Steps[1].Copy; c == nil || c.Dst != "/srv/app" || c.Owner != UserUser {
		t.Errorf("copy of a directory: %+v", c)
	}
	if ents["Dockerfile"].data != a.Dockerfile {
		t.Error("the zip's Dockerfile differs from Artifact.Dockerfile")
	}
	wantDockerfile := `# The template as a Dockerfile layer, written by rayito's SDK (sdk/template).
# COPY sources are under context/ in the template's artifact.
FROM python:3.12-slim
RUN ["/bin/sh", "-c", "apt-get update && apt-get install -y curl"]
COPY --chown=user ["context/app", "/srv/app"]
COPY ["context/requirements.txt", "/srv/requirements.txt"]
RUN ["/bin/sh", "-c", "python3 -m pip install --no-cache-dir 'requests' 'uvicorn[standard]==0.30.*'"]
ENV A="1" B="say \"hi\" \$HOME \\o/"
WORKDIR /srv/app
USER user
# rayito start (run by the platform when a sandbox starts; not an instruction): {"cmd":"python3 -m http.server 8000","ready_port":8000}
`
	if a.Dockerfile != wantDockerfile {
		t.Errorf("Dockerfile:\n%s\nwant\n%s", a.Dockerfile, wantDockerfile)
	}
	sum := sha256.Sum256(a.Zip)
	if a.SHA256 != hex.EncodeToString(sum[:]) || a.Size != int64(len(a.Zip)) || a.Path != "" {
		t.Errorf("SHA256 %s size %d path %q do not describe the zip", a.SHA256, a.Size, a.Path)
	}
	if a.Files != 4 || a.Bytes != int64(len("print('hi')\n")+len("X = 1\n")+len("util.py")+len("requests\n")) {
		t.Errorf("Files %d Bytes %d", a.Files, a.Bytes)
	}
}

// TestDeterministic: copies of one tree made in another order, with other
// mtimes and permission bits (another umask), give the same zip.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	d1 := fullContext(t)
	d2 := t.TempDir()
	writeTree(t, d2, map[string]string{"app/empty/": "", "requirements.txt": "requests\n"})
	writeTree(t, d2, map[string]string{"app/lib/link.py": "->util.py", "app/lib/util.py": "X = 1\n", "unrelated.txt": "other content\n"})
	writeTree(t, d2, map[string]string{"app/main.py": "print('hi')\n"})
	if err := os.Chmod(filepath.Join(d2, "app/main.py"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"requirements.txt", "app/lib/util.py"} {
		if err := os.Chmod(filepath.Join(d2, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := filepath.WalkDir(d2, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, old, old)
	}); err != nil {
		t.Fatal(err)
	}
	a1, err := Compile(t.Context(), fullTemplate(), d1)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := Compile(t.Context(), fullTemplate(), d2)
	if err != nil {
		t.Fatal(err)
	}
	a3, err := Compile(t.Context(), fullTemplate(), d1, WithSpillThreshold(10))
	if err != nil {
		t.Fatal(err)
	}
	defer a3.Close()
	if a1.SHA256 != a2.SHA256 || a1.SHA256 != a3.SHA256 || !bytes.Equal(a1.Zip, a2.Zip) {
		t.Fatalf("hashes differ: %s %s %s", a1.SHA256, a2.SHA256, a3.SHA256)
	}
	// The map order of SetEnvs does not matter either.
	b1, _ := Compile(t.Context(), FromBaseImage("alpine").SetEnvs(map[string]string{"A": "1", "B": "2", "C": "3"}), "")
	b2, _ := Compile(t.Context(), FromBaseImage("alpine").SetEnvs(map[string]string{"C": "3", "B": "2", "A": "1"}), "")
	if b1.SHA256 != b2.SHA256 {
		t.Error("env order changes the hash")
	}
}

func TestSpillAndSave(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	a, err := Compile(t.Context(), fullTemplate(), fullContext(t), WithSpillThreshold(64), WithTempDir(tmp))
	if err != nil {
		t.Fatal(err)
	}
	if a.Zip != nil || a.Path == "" || filepath.Dir(a.Path) != tmp {
		t.Fatalf("Zip %d bytes, Path %q: want a temporary file in %s", len(a.Zip), a.Path, tmp)
	}
	fi, err := os.Stat(a.Path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != a.Size {
		t.Fatalf("temporary file: %v %v", fi, err)
	}
	out := filepath.Join(t.TempDir(), "t.zip")
	if err := a.Save(out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != a.SHA256 {
		t.Error("the saved zip does not have the artifact's hash")
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o600 {
		t.Errorf("saved with mode %v, want 0600", fi.Mode().Perm())
	}
	p := a.Path
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Close left %s", p)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in the temporary directory: %v", ents)
	}
}

func TestSymlinks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		files map[string]string
		src   string
		kind  error
		path  string
	}{
		{"absolute link to a host file", map[string]string{"app/passwd": "->/etc/passwd"}, "app", ErrUnsafeSymlink, "app/passwd"},
		{"relative link out of the copied tree", map[string]string{"app/x": "->../secret", "secret": "s"}, "app", ErrUnsafeSymlink, "app/x"},
		{"relative link out of the context", map[string]string{"x": "->../../etc/passwd"}, ".", ErrUnsafeSymlink, "x"},
		{"dot-dot after a name", map[string]string{"app/deep/s": "->../lib", "app/lib/": "", "app/deep/t": "->s/../.."}, "app", ErrUnsafeSymlink, "app/deep/t"},
		{"link in a parent of the source", map[string]string{"real/f": "x", "link": "->real"}, "link/f", ErrUnsafeSymlink, "link/f"},
		{"link in a parent pointing outside", map[string]string{"etc": "->/etc"}, "etc/passwd", ErrUnsafeSymlink, "etc/passwd"},
		{"the source is a link", map[string]string{"f": "x", "l": "->f"}, "l", ErrUnsafeSymlink, "l"},
		{"missing source", map[string]string{"f": "x"}, "nope", ErrContextPath, "nope"},
		{"a file in the path", map[string]string{"f": "x"}, "f/g", ErrContextPath, "f/g"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			tmpl := FromBaseImage("alpine").RunCmd("true").Copy(tc.src, "/dst")
			_, err := Compile(t.Context(), tmpl, dir)
			var e *Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &e) || e.Path != tc.path || e.Step != 1 {
				t.Fatalf("err = %#v (%v); want %v naming %s and step 1", e, err, tc.kind, tc.path)
			}
		})
	}
	t.Run("links that stay inside are kept as links", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{
			"app/a/f":      "x",
			"app/a/same":   "->f",
			"app/b/up":     "->../a/f",
			"app/b/dir":    "->../a",
			"app/b/dot":    "->./../a/./f",
			"app/dangling": "->missing",
			"ignored/etc":  "->/etc", // excluded: never an error
		})
		writeTree(t, dir, map[string]string{IgnoreFile: "ignored\n"})
		a, err := Compile(t.Context(), FromBaseImage("alpine").Copy(".", "/app"), dir)
		if err != nil {
			t.Fatal(err)
		}
		ents, _ := readZip(t, a)
		for n, target := range map[string]string{"app/a/same": "f", "app/b/up": "../a/f", "app/b/dir": "../a", "app/b/dot": "./../a/./f", "app/dangling": "missing"} {
			e := ents["context/"+n]
			if e.mode&fs.ModeSymlink == 0 || e.data != target || e.hdr.ExternalAttrs>>16&0o170000 != 0o120000 {
				t.Errorf("%s: mode %v content %q attrs %o; want a link to %s", n, e.mode, e.data, e.hdr.ExternalAttrs>>16, target)
			}
		}
		if _, ok := ents["context/ignored/etc"]; ok {
			t.Error("an excluded link is in the artifact")
		}
	})
	t.Run("linkStaysIn", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			tree, rel, target string
			ok                bool
		}{
			{"app", "app/x", "y", true},
			{"app", "app/x", "../app/y", true},
			{"app", "app/x", "..", false},
			{"app", "app/x", "../appx/y", false},
			{"app", "app/d/x", "../../app/d", true},
			{".", "x", "../x", false},
			{".", "d/x", "../x", true},
			{".", "d/x", "a/../b", false},
			{".", "d/x", "", false},
			{".", "d/x", "/abs", false},
		} {
			if got := linkStaysIn(tc.tree, tc.rel, tc.target); got != tc.ok {
				t.Errorf("linkStaysIn(%q, %q, %q) = %v", tc.tree, tc.rel, tc.target, got)
			}
		}
	})
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "AKIA-secret-value"
	writeTree(t, dir, map[string]string{
		".env":             secret,
		".env.local":       secret,
		"a/.git/config":    secret,
		"a/.git/HEAD":      secret,
		".aws/credentials": secret,
		"home/.ssh/id_rsa": secret,
		"tls/server.pem":   secret,
		"tls/server.key":   secret,
		"ok.txt":           "fine",
		".envrc":           "fine",
		"env":              "fine",
		"monkey":           "fine",
	})
	var got []string
	var logBuf bytes.Buffer
	a, err := Compile(t.Context(), FromBaseImage("alpine").Copy(".", "/app"), dir, WithWarn(func(s string) { got = append(got, s) }))
	if err != nil {
		t.Fatal(err)
	}
	wantPaths := []string{`".aws/"`, `".env"`, `".env.local"`, `"a/.git/"`, `"home/.ssh/"`, `"tls/server.key"`, `"tls/server.pem"`}
	if len(got) != len(wantPaths) || !reflect.DeepEqual(got, a.Warnings) {
		t.Fatalf("warnings %q (artifact %q); want one per path of %v", got, a.Warnings, wantPaths)
	}
	for i, w := range got {
		if !strings.Contains(w, wantPaths[i]) || strings.Contains(w, secret) {
			t.Errorf("warning %d = %q; want it to name %s and hold no contents", i, w, wantPaths[i])
		}
	}
	// The default: the logger, at WARN, naming the path only.
	l := slog.New(slog.NewTextHandler(&logBuf, nil))
	if _, err := Compile(t.Context(), FromBaseImage("alpine").Copy(".env", "/app/.env"), dir, WithLogger(l)); err != nil {
		t.Fatal(err)
	}
	if s := logBuf.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "path=.env") || strings.Contains(s, secret) {
		t.Errorf("log = %q", s)
	}
	// Excluded files are not warned about.
	writeTree(t, dir, map[string]string{IgnoreFile: "**/.env*\n.aws\n**/.git\n**/.ssh\ntls\n"})
	a, err = Compile(t.Context(), FromBaseImage("alpine").Copy(".", "/app"), dir)
	if err != nil || len(a.Warnings) != 0 {
		t.Fatalf("with the secrets excluded: %v, warnings %q", err, a.Warnings)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "12345", "b": "12345", "c": "12345"})
	tmpl := FromBaseImage("alpine").Copy(".", "/app")
	if _, err := Compile(t.Context(), tmpl, dir, WithMaxFiles(2)); !errors.Is(err, ErrContextTooLarge) {
		t.Errorf("files: err = %v", err)
	}
	if _, err := Compile(t.Context(), tmpl, dir, WithMaxContextBytes(14)); !errors.Is(err, ErrContextTooLarge) {
		t.Errorf("bytes: err = %v", err)
	}
	if _, err := Compile(t.Context(), tmpl, dir, WithMaxContextBytes(15), WithMaxFiles(3)); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	steps := FromBaseImage("alpine")
	for range ptemplate.MaxSteps + 1 {
		steps = steps.RunCmd("true")
	}
	if _, err := Compile(t.Context(), steps, ""); !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("steps: err = %v", err)
	}
}

func TestCompileContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Compile(ctx, FromBaseImage("alpine").Copy(".", "/app"), fullContext(t)); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err = %v", err)
	}
	if _, err := Compile(t.Context(), FromBaseImage("alpine").Copy(".", "/app"), ""); !errors.Is(err, ErrContextPath) {
		t.Errorf("no context dir: err = %v", err)
	}
	if _, err := Compile(t.Context(), FromBaseImage("alpine").Copy(".", "/app"), filepath.Join(t.TempDir(), "missing")); !errors.Is(err, ErrContextPath) {
		t.Errorf("missing context dir: err = %v", err)
	}
	a, err := Compile(t.Context(), FromBaseImage("alpine").RunCmd("echo hi"), "")
	if err != nil {
		t.Fatal(err)
	}
	_, names := readZip(t, a)
	if !slices.Equal(names, []string{"Dockerfile", "template.json"}) {
		t.Errorf("entries without copies: %q", names)
	}
}
