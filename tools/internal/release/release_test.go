package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeRepo lays out a two-module repository: lib (released), app
// (released, imports lib) and, with the given overrides, files changed.
func fakeRepo(t *testing.T, files map[string]string) *Repo {
	t.Helper()
	root := t.TempDir()
	base := map[string]string{
		"go.work": "go 1.26.0\n\nuse (\n\t./app\n\t./lib\n\t./tests\n)\n\nreplace (\n\tgithub.com/rayito-dev/rayito/app v0.2.0 => ./app\n\tgithub.com/rayito-dev/rayito/lib v0.1.0 => ./lib\n)\n",
		"versions.yaml": "modules:\n  lib:\n    version: v0.1.0\n    version_go: lib/version.go\n  app:\n    version: v0.2.0\n" +
			"unreleased:\n  tests: tests only\n",
		"lib/go.mod":              "module github.com/rayito-dev/rayito/lib\n\ngo 1.26.0\n",
		"lib/version.go":          "package lib\n\nconst Version = \"0.1.0\"\n",
		"lib/internal/x/x.go":     "package x\n",
		"lib/lib.go":              "package lib\n\nimport _ \"github.com/rayito-dev/rayito/lib/internal/x\"\n",
		"app/go.mod":              "module github.com/rayito-dev/rayito/app\n\ngo 1.26.0\n\nrequire github.com/rayito-dev/rayito/lib v0.1.0\n",
		"app/main.go":             "package main\n\nimport _ \"github.com/rayito-dev/rayito/lib\"\n\nfunc main() {}\n",
		"app/testdata/ignored.go": "package ignored\n\nimport _ \"github.com/rayito-dev/rayito/lib/internal/x\"\n",
		"tests/go.mod":            "module github.com/rayito-dev/rayito/tests\n\ngo 1.26.0\n\nrequire github.com/rayito-dev/rayito/app v0.2.0\n",
		"tests/a_test.go":         "package tests\n\nimport _ \"github.com/rayito-dev/rayito/app\"\n",
	}
	for k, v := range files {
		if v == "" {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	for name, data := range base {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "init")
	r, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func joinErrs(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error() + "\n")
	}
	return b.String()
}

func TestCheckGoModsClean(t *testing.T) {
	r := fakeRepo(t, nil)
	if errs := r.CheckGoMods(); len(errs) != 0 {
		t.Fatalf("clean repo: %s", joinErrs(errs))
	}
	order, err := r.Ordered()
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, m := range order {
		dirs = append(dirs, m.Dir)
	}
	if got := strings.Join(dirs, " "); got != "lib app tests" {
		t.Errorf("order = %s, want lib app tests", got)
	}
}

func TestCheckGoModsProblems(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"cross-module internal import": {
			map[string]string{"app/x.go": "package main\n\nimport _ \"github.com/rayito-dev/rayito/lib/internal/x\"\n"},
			"an internal package of module lib",
		},
		"internal import in a test file of another OS": {
			map[string]string{"app/x_windows_test.go": "package main\n\nimport _ \"github.com/rayito-dev/rayito/lib/internal/x\"\n"},
			"an internal package of module lib",
		},
		"missing sibling require": {
			map[string]string{"app/go.mod": "module github.com/rayito-dev/rayito/app\n\ngo 1.26.0\n"},
			"app imports module lib, but app/go.mod does not require it",
		},
		"sibling at another version": {
			map[string]string{"app/go.mod": "module github.com/rayito-dev/rayito/app\n\ngo 1.26.0\n\nrequire github.com/rayito-dev/rayito/lib v0.0.9\n"},
			"requires github.com/rayito-dev/rayito/lib v0.0.9; versions.yaml says v0.1.0",
		},
		"direct sibling marked indirect": {
			map[string]string{"app/go.mod": "module github.com/rayito-dev/rayito/app\n\ngo 1.26.0\n\nrequire github.com/rayito-dev/rayito/lib v0.1.0 // indirect\n"},
			"marks github.com/rayito-dev/rayito/lib // indirect",
		},
		"replace directive": {
			map[string]string{"lib/go.mod": "module github.com/rayito-dev/rayito/lib\n\ngo 1.26.0\n\nreplace example.com/x => ../x\n"},
			"lib/go.mod: replace directives are not allowed",
		},
		"toolchain line": {
			map[string]string{"lib/go.mod": "module github.com/rayito-dev/rayito/lib\n\ngo 1.26.0\n\ntoolchain go1.26.8\n"},
			"toolchain line",
		},
		"requires an unreleased module": {
			map[string]string{"app/go.mod": "module github.com/rayito-dev/rayito/app\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/rayito-dev/rayito/lib v0.1.0\n\tgithub.com/rayito-dev/rayito/tests v0.1.0\n)\n"},
			"which is never released",
		},
		"go.work without a replace": {
			map[string]string{"go.work": "go 1.26.0\n\nuse (\n\t./app\n\t./lib\n\t./tests\n)\n\nreplace github.com/rayito-dev/rayito/lib v0.1.0 => ./lib\n"},
			"go.work: missing `replace github.com/rayito-dev/rayito/app v0.2.0 => ./app`",
		},
		"go.work with a stale replace": {
			map[string]string{"go.work": "go 1.26.0\n\nuse (\n\t./app\n\t./lib\n\t./tests\n)\n\nreplace (\n\tgithub.com/rayito-dev/rayito/app v0.2.0 => ./app\n\tgithub.com/rayito-dev/rayito/lib v0.0.1 => ./lib\n)\n"},
			"go.work: unexpected replace github.com/rayito-dev/rayito/lib v0.0.1",
		},
		"version constant out of date": {
			map[string]string{"lib/version.go": "package lib\n\nconst Version = \"0.0.1\"\n"},
			`says Version = "0.0.1", versions.yaml says v0.1.0`,
		},
		"two version constants": {
			map[string]string{"lib/version.go": "package lib\n\nconst Version = \"0.1.0\"\n\nvar x = 1\n\nconst (\n\tVersion = \"0.1.0\"\n)\n"},
			"exactly one",
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := fakeRepo(t, tc.files)
			got := joinErrs(r.CheckGoMods())
			if !strings.Contains(got, tc.want) {
				t.Errorf("errors:\n%s\nwant one containing %q", got, tc.want)
			}
		})
	}
}

func TestLoadRejectsBadManifests(t *testing.T) {
	for name, manifest := range map[string]string{
		"missing module": "modules:\n  lib:\n    version: v0.1.0\nunreleased:\n  tests: x\n",
		"unknown module": "modules:\n  lib:\n    version: v0.1.0\n  app:\n    version: v0.1.0\n  nope:\n    version: v0.1.0\nunreleased:\n  tests: x\n",
		"not semver":     "modules:\n  lib:\n    version: 0.1.0\n  app:\n    version: v0.1.0\nunreleased:\n  tests: x\n",
		"not canonical":  "modules:\n  lib:\n    version: v0.1\n  app:\n    version: v0.1.0\nunreleased:\n  tests: x\n",
		"major 2":        "modules:\n  lib:\n    version: v2.0.0\n  app:\n    version: v0.1.0\nunreleased:\n  tests: x\n",
		"unknown field":  "modules:\n  lib:\n    version: v0.1.0\n    verison: v0.1.0\n  app:\n    version: v0.1.0\nunreleased:\n  tests: x\n",
		"both lists":     "modules:\n  lib:\n    version: v0.1.0\n  app:\n    version: v0.1.0\n  tests:\n    version: v0.1.0\nunreleased:\n  tests: x\n",
	} {
		t.Run(name, func(t *testing.T) {
			r := fakeRepo(t, nil)
			if err := os.WriteFile(filepath.Join(r.Root, "versions.yaml"), []byte(manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(r.Root); err == nil {
				t.Errorf("Load accepted:\n%s", manifest)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	r := fakeRepo(t, nil)
	p, err := r.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Tags, " "); got != "lib/v0.1.0 app/v0.2.0" {
		t.Errorf("tags = %q", got)
	}
	if len(p.Unreleased) != 1 || !strings.HasPrefix(p.Unreleased[0], "tests: ") {
		t.Errorf("unreleased = %q", p.Unreleased)
	}

	// With lib tagged and unchanged, only app is released.
	if _, err := r.git("tag", "lib/v0.1.0"); err != nil {
		t.Fatal(err)
	}
	p, err = r.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Tags, " "); got != "app/v0.2.0" || len(p.Unchanged) != 1 {
		t.Errorf("tags = %q, unchanged = %q", got, p.Unchanged)
	}

	// lib changed since its tag: its version must be bumped first.
	if err := os.WriteFile(filepath.Join(r.Root, "lib", "lib.go"), []byte("package lib\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Plan(); err == nil || !strings.Contains(err.Error(), "lib changed since lib/v0.1.0") {
		t.Errorf("changed lib: %v", err)
	}
}

func TestPlanRefusesUntaggedSiblingVersions(t *testing.T) {
	r := fakeRepo(t, map[string]string{
		"app/go.mod": "module github.com/rayito-dev/rayito/app\n\ngo 1.26.0\n\nrequire github.com/rayito-dev/rayito/lib v0.0.5\n",
	})
	_, err := r.Plan()
	if err == nil || !strings.Contains(err.Error(), "app requires lib v0.0.5, which is neither tagged nor in this release") {
		t.Fatalf("plan: %v", err)
	}
	if _, err := r.git("tag", "lib/v0.0.5"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Plan(); err != nil {
		t.Errorf("with lib/v0.0.5 tagged: %v", err)
	}
}

// TestProxyFromTreeAndTags checks the proxy layout and that the tree and
// the tag of the same content give the same module zip.
func TestProxyFromTreeAndTags(t *testing.T) {
	r := fakeRepo(t, map[string]string{"lib/untracked-but-ignored.txt": "x", ".gitignore": "*.txt\n"})
	for _, m := range r.Released() {
		if _, err := r.git("tag", m.Tag()); err != nil {
			t.Fatal(err)
		}
	}
	tree, tags := filepath.Join(t.TempDir(), "tree"), filepath.Join(t.TempDir(), "tags")
	if err := r.WriteProxy(tree, FromTree); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteProxy(tags, FromTags); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"list", "v0.1.0.info", "v0.1.0.mod", "v0.1.0.zip"} {
		if _, err := os.Stat(filepath.Join(tree, "github.com/rayito-dev/rayito/lib/@v", name)); err != nil {
			t.Error(err)
		}
	}
	a, _ := os.ReadFile(filepath.Join(tree, "github.com/rayito-dev/rayito/lib/@v/v0.1.0.mod"))
	b, _ := os.ReadFile(filepath.Join(tags, "github.com/rayito-dev/rayito/lib/@v/v0.1.0.mod"))
	if string(a) != string(b) || !strings.HasPrefix(string(a), "module github.com/rayito-dev/rayito/lib") {
		t.Errorf(".mod differs: %q vs %q", a, b)
	}
	if _, err := os.Stat(filepath.Join(tree, "github.com/rayito-dev/rayito/tests")); err == nil {
		t.Error("an unreleased module is in the proxy")
	}
}
