package trustca

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const (
	caPEM      = "-----BEGIN CERTIFICATE-----\nQ0Egb25l\n-----END CERTIFICATE-----\n"
	otherCA    = "-----BEGIN CERTIFICATE-----\nQ0EgdHdv\n-----END CERTIFICATE-----\n"
	systemPEM  = "-----BEGIN CERTIFICATE-----\nc3lzdGVt\n-----END CERTIFICATE-----\n"
	system2PEM = "-----BEGIN CERTIFICATE-----\nc3lzdGVtMg==\n-----END CERTIFICATE-----\n"
)

type mountCall struct{ src, dst string }

// fakeMounter records its calls and fails for the destinations in fail.
type fakeMounter struct {
	mu    sync.Mutex
	calls []mountCall
	fail  map[string]bool
}

func (m *fakeMounter) BindReadOnly(src, dst string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, mountCall{src, dst})
	if m.fail[dst] {
		return errors.New("mount: permission denied")
	}
	return nil
}

func (m *fakeMounter) snapshot() []mountCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

type fixture struct {
	dir     string // the Installer's directory (not yet created)
	bundles []string
	m       *fakeMounter
	in      *Installer
}

// newFixture makes three system bundle paths: the first missing, the
// second and third present (the third's mount fails).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	sys := filepath.Join(root, "etc")
	if err := os.MkdirAll(sys, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		dir: filepath.Join(root, "run", "rayito", "ca"),
		bundles: []string{
			filepath.Join(sys, "missing.crt"),
			filepath.Join(sys, "ca-certificates.crt"),
			filepath.Join(sys, "cert.pem"),
		},
	}
	if err := os.WriteFile(f.bundles[1], []byte(systemPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.bundles[2], []byte(system2PEM), 0o644); err != nil {
		t.Fatal(err)
	}
	f.m = &fakeMounter{fail: map[string]bool{f.bundles[2]: true}}
	f.in = New(Options{Dir: f.dir, Bundles: f.bundles, Mounter: f.m})
	return f
}

func readFile(t *testing.T, path string) (string, os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), fi.Mode().Perm()
}

func TestInstall(t *testing.T) {
	f := newFixture(t)
	if env := f.in.Env(); env != nil {
		t.Fatalf("Env before Install: %v", env)
	}
	if err := f.in.Install([]byte(caPEM)); err != nil {
		t.Fatal(err)
	}
	if f.in.CAPath() != filepath.Join(f.dir, "ca.pem") || f.in.BundlePath() != filepath.Join(f.dir, "bundle.pem") {
		t.Fatalf("paths %s %s", f.in.CAPath(), f.in.BundlePath())
	}
	if ca, mode := readFile(t, f.in.CAPath()); ca != caPEM || mode != 0o644 {
		t.Errorf("ca.pem = %q mode %o", ca, mode)
	}
	bundle, mode := readFile(t, f.in.BundlePath())
	if mode != 0o644 {
		t.Errorf("bundle.pem mode %o", mode)
	}
	// The first existing system bundle, then the CA.
	if !strings.HasPrefix(bundle, systemPEM) || !strings.HasSuffix(bundle, caPEM) || strings.Contains(bundle, system2PEM) {
		t.Errorf("bundle.pem = %q", bundle)
	}
	if got := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(bundle, systemPEM), caPEM)); got != "" {
		t.Errorf("bundle.pem has extra content %q", got)
	}
	if fi, err := os.Stat(f.dir); err != nil || fi.Mode().Perm() != 0o755 || !fi.IsDir() {
		t.Errorf("dir %v %v", fi, err)
	}

	// Every existing bundle was tried (the missing one not); only the
	// successful mount is covered.
	want := []mountCall{{f.in.BundlePath(), f.bundles[1]}, {f.in.BundlePath(), f.bundles[2]}}
	if got := f.m.snapshot(); !slices.Equal(got, want) {
		t.Errorf("mounts %v, want %v", got, want)
	}
	if got := f.in.Covered(); !slices.Equal(got, []string{f.bundles[1]}) {
		t.Errorf("covered %v", got)
	}

	env := f.in.Env()
	b := f.in.BundlePath()
	wantEnv := map[string]string{
		"NODE_EXTRA_CA_CERTS": f.in.CAPath(),
		"SSL_CERT_FILE":       b,
		"REQUESTS_CA_BUNDLE":  b,
		"CURL_CA_BUNDLE":      b,
		"GIT_SSL_CAINFO":      b,
	}
	if len(env) != len(wantEnv) {
		t.Errorf("Env %v", env)
	}
	for k, v := range wantEnv {
		if env[k] != v {
			t.Errorf("Env[%s] = %q, want %q", k, env[k], v)
		}
	}

	// No temporary file left behind.
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"bundle.pem", "ca.pem"}) {
		t.Errorf("dir holds %v", names)
	}
}

func TestInstallTwice(t *testing.T) {
	f := newFixture(t)
	if err := f.in.Install([]byte(caPEM)); err != nil {
		t.Fatal(err)
	}
	calls := f.m.snapshot()
	// Make any rewrite visible.
	if err := os.WriteFile(f.bundles[1], []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := readFile(t, f.in.BundlePath())
	if err := f.in.Install([]byte(caPEM)); err != nil {
		t.Fatalf("same CA again: %v", err)
	}
	if got := f.m.snapshot(); !slices.Equal(got, calls) {
		t.Errorf("second Install mounted again: %v", got)
	}
	if after, _ := readFile(t, f.in.BundlePath()); after != before {
		t.Errorf("second Install rewrote the bundle: %q", after)
	}
	if err := f.in.Install([]byte(otherCA)); !errors.Is(err, ErrInstalled) {
		t.Fatalf("another CA: %v, want ErrInstalled", err)
	}
	if ca, _ := readFile(t, f.in.CAPath()); ca != caPEM {
		t.Errorf("ca.pem replaced: %q", ca)
	}
	if got := f.in.Covered(); !slices.Equal(got, []string{f.bundles[1]}) {
		t.Errorf("covered %v", got)
	}
	if f.in.Env() == nil {
		t.Error("Env lost")
	}
}

func TestInstallWithoutSystemBundle(t *testing.T) {
	root := t.TempDir()
	m := &fakeMounter{}
	in := New(Options{Dir: filepath.Join(root, "ca"), Bundles: []string{filepath.Join(root, "none.crt")}, Mounter: m})
	if err := in.Install([]byte(caPEM)); err != nil {
		t.Fatal(err)
	}
	if b, _ := readFile(t, in.BundlePath()); strings.TrimSpace(b) != strings.TrimSpace(caPEM) {
		t.Errorf("bundle.pem = %q", b)
	}
	if len(m.snapshot()) != 0 || len(in.Covered()) != 0 {
		t.Errorf("mounted %v", m.snapshot())
	}
	if len(in.Env()) != 5 {
		t.Errorf("Env %v", in.Env())
	}
}

func TestInstallWriteFailure(t *testing.T) {
	root := t.TempDir()
	// The directory's path is a file: nothing can be written.
	blocker := filepath.Join(root, "ca")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &fakeMounter{}
	in := New(Options{Dir: blocker, Bundles: []string{}, Mounter: m})
	if err := in.Install([]byte(caPEM)); err == nil {
		t.Fatal("Install succeeded")
	}
	if in.Env() != nil || len(m.snapshot()) != 0 {
		t.Errorf("a failed Install left state: %v", in.Env())
	}
}

func TestNewDefaults(t *testing.T) {
	in := New(Options{})
	if in.opts.Dir != DefaultDir || !slices.Equal(in.opts.Bundles, SystemBundles) || in.opts.Mounter == nil {
		t.Errorf("defaults %+v", in.opts)
	}
	if in.CAPath() != DefaultDir+"/ca.pem" || in.BundlePath() != DefaultDir+"/bundle.pem" {
		t.Errorf("paths %s %s", in.CAPath(), in.BundlePath())
	}
}

// TestInstallRefusesForeignDir: a CA directory (or its parent) that is a
// symbolic link or writable by others is refused before anything is
// written or chmod-ed there.
func TestInstallRefusesForeignDir(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "elsewhere")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{
		filepath.Join(root, "link"),       // the directory is a link
		filepath.Join(root, "link", "ca"), // its parent is a link
		filepath.Join(open, "ca"),         // its parent is world-writable
	} {
		m := &fakeMounter{}
		in := New(Options{Dir: dir, Bundles: []string{}, Mounter: m})
		if err := in.Install([]byte(caPEM)); !errors.Is(err, ErrNotOwnDir) {
			t.Errorf("%s: %v", dir, err)
		}
		if in.Env() != nil || len(m.snapshot()) != 0 {
			t.Errorf("%s: a refused Install left state", dir)
		}
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the link's target was changed: %v %v", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("files written through the link: %v", entries)
	}
}
