package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository this package lives in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "versions.yaml")); err != nil {
		t.Skipf("not inside the repository (%v)", err)
	}
	return root
}

const outsiderMain = `package main

import (
	"context"
	"fmt"
	"os"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func main() {
	ctx := context.Background()
	sbx, err := rayito.Create(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer sbx.Kill(context.WithoutCancel(ctx))
	res, err := sbx.Commands.Run(ctx, "echo hello from an outsider")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(res.Stdout)
}
`

// TestOutsiderConsumesReleasedModules is the proof that people outside the
// repository can consume it: in a throwaway copy of the work tree, every
// released module is tagged at its manifest version; a file-based module
// proxy is built from those tags; then, in a fresh module outside the
// repository with GOWORK=off and that proxy first, `go get` of the SDK and
// a build of a program that uses it work, and so does `go install` of the
// CLI at its version, whose --version names that version.
func TestOutsiderConsumesReleasedModules(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the SDK and the CLI from a file proxy")
	}
	root := repoRoot(t)
	repo, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	snap, err := repo.Snapshot(filepath.Join(tmp, "repo"))
	if err != nil {
		t.Fatal(err)
	}
	s := Standalone{Proxy: filepath.Join(tmp, "proxy"), ModCache: filepath.Join(tmp, "modcache")}
	if err := snap.WriteProxy(s.Proxy, FromTags); err != nil {
		t.Fatal(err)
	}
	sdk, _ := repo.Module("sdk")
	cli, _ := repo.Module("cli")

	outsider := filepath.Join(tmp, "outsider")
	if err := os.MkdirAll(outsider, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(dir string, args ...string) string {
		t.Helper()
		out, err := s.Go(dir, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return string(out)
	}
	run(outsider, "mod", "init", "example.com/outsider")
	if err := os.WriteFile(filepath.Join(outsider, "main.go"), []byte(outsiderMain), 0o644); err != nil {
		t.Fatal(err)
	}
	run(outsider, "get", sdk.Path+"@"+sdk.Version)
	run(outsider, "build", "-o", filepath.Join(tmp, "outsider-bin"), ".")
	gomod, err := os.ReadFile(filepath.Join(outsider, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), sdk.Path+" "+sdk.Version) || strings.Contains(string(gomod), "replace") {
		t.Errorf("outsider go.mod:\n%s", gomod)
	}

	gobin := filepath.Join(tmp, "bin")
	s.Extra = []string{"GOBIN=" + gobin}
	run(outsider, "install", cli.Path+"/cmd/rayito@"+cli.Version)
	out, err := exec.Command(filepath.Join(gobin, "rayito"), "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("rayito --version: %v\n%s", err, out)
	}
	// The version, and the revision by the tag that names it: the go
	// command records no VCS revision for a module-mode install.
	for _, want := range []string{"rayito " + strings.TrimPrefix(cli.Version, "v") + " ", "revision of tag " + cli.Tag(), "module sum h1:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rayito --version = %q, want it to contain %q", out, want)
		}
	}
	t.Logf("rayito --version: %s", strings.TrimSpace(string(out)))
}
