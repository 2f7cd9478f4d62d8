package template

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDependencies: the package links the standard library, the proto
// module and Docker's pattern matcher, nothing else (the SDK's dependency
// budget, sdk/deps_test.go, for this package).
func TestDependencies(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v (the module's sources and go command are needed)", err)
	}
	allowed := map[string]bool{
		"github.com/rayito-dev/rayito/sdk":   true,
		"github.com/rayito-dev/rayito/proto": true,
		"github.com/moby/patternmatcher":     true,
	}
	for _, m := range strings.Fields(string(out)) {
		if !allowed[m] {
			t.Errorf("sdk/template links module %s", m)
		}
	}
}

// TestOpenChecked: a file swapped after Lstat saw it is refused, not read.
func TestOpenChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "checked", "b": "swapped in"})
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fi, err := root.Lstat("a")
	if err != nil {
		t.Fatal(err)
	}
	f, err := openChecked(root, "a", fi)
	if err != nil {
		t.Fatalf("unchanged: %v", err)
	}
	f.Close()
	if err := os.Rename(filepath.Join(dir, "b"), filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := openChecked(root, "a", fi); !errors.Is(err, ErrContextPath) {
		t.Fatalf("swapped: err = %v; want ErrContextPath", err)
	}
	// A link swapped in for a directory is refused the same way, and
	// os.Root keeps it inside the context anyway.
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	dfi, err := root.Lstat("d")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	if _, err := openChecked(root, "d", dfi); !errors.Is(err, ErrContextPath) {
		t.Fatalf("a link to /etc swapped in: err = %v; want ErrContextPath", err)
	}
}
