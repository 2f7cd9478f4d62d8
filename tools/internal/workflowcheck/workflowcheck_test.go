package workflowcheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository root, from tools/internal/workflowcheck.
var root = filepath.Join("..", "..", "..")

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWorkflows runs the policy over every workflow of the repository.
func TestWorkflows(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, ".github", "workflows", "*"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := filepath.Base(f)
		if !strings.HasSuffix(name, ".yml") && !strings.HasSuffix(name, ".yaml") {
			t.Errorf("%s: workflows are .yml files (make lint-workflows lints *.yml)", name)
			continue
		}
		if strings.HasSuffix(name, ".yaml") {
			t.Errorf("%s: name it .yml: make lint-workflows lints .github/workflows/*.yml", name)
		}
		seen[name] = true
		data := read(t, filepath.Join(".github", "workflows", name))
		check := Check
		if name == "release.yml" {
			check = CheckRelease
		}
		for _, p := range check(".github/workflows/"+name, data) {
			t.Error(p)
		}
	}
	for _, want := range []string{"ci.yml", "release.yml"} {
		if !seen[want] {
			t.Errorf(".github/workflows/%s is missing", want)
		}
	}
}

// TestCIRunsTheREADMECommand: CI runs make ci (as root) and govulncheck,
// built from the pinned tools module, over the workspace.
func TestCIRunsTheREADMECommand(t *testing.T) {
	w, err := Parse(read(t, ".github/workflows/ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var makeCI, buildVuln, runVuln bool
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			makeCI = makeCI || strings.Contains(s.Run, `sudo -E env "PATH=$PATH" make ci`)
			buildVuln = buildVuln || strings.Contains(s.Run, "cd tools && GOWORK=off go build") && strings.Contains(s.Run, "golang.org/x/vuln/cmd/govulncheck")
			runVuln = runVuln || strings.Contains(s.Run, "govulncheck\" -C") && strings.Contains(s.Run, "go list -m")
		}
	}
	if !makeCI {
		t.Error(`ci.yml: no step runs sudo -E env "PATH=$PATH" make ci`)
	}
	if !buildVuln || !runVuln {
		t.Error("ci.yml: govulncheck is not built from tools/ and run over every workspace module")
	}
}

// TestDependabot: every Go module, and every package.json, has its entry.
func TestDependabot(t *testing.T) {
	goDirs := []string{"/tools", "/tools/lint"}
	inUse := false
	for _, line := range strings.Split(string(read(t, "go.work")), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "use ("):
			inUse = true
		case inUse && line == ")":
			inUse = false
		case inUse && line != "" || strings.HasPrefix(line, "use ./"):
			d := strings.TrimPrefix(strings.TrimPrefix(line, "use "), "./")
			goDirs = append(goDirs, "/"+strings.TrimSuffix(d, "/"))
		}
	}
	if len(goDirs) < 2 {
		t.Fatal("go.work lists no modules")
	}
	var npmDirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".tmp" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() == "package.json" {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			npmDirs = append(npmDirs, "/"+strings.TrimPrefix(filepath.ToSlash(rel), "."))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range CheckDependabot(".github/dependabot.yml", read(t, ".github/dependabot.yml"), goDirs, npmDirs) {
		t.Error(p)
	}
}

// goodRelease is a small release workflow that follows the policy; each
// case of TestRejects breaks it in one way.
const goodRelease = `
on:
  push:
    tags: ["proto/v*", "rayd/v*", "sdk/v*", "localvm/v*", "cli/v*"]
permissions: {}
jobs:
  build:
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1
        with:
          persist-credentials: false
      - uses: actions/setup-go@b7ad1dad31e06c5925ef5d2fc7ad053ef454303e # v7.0.0
        with:
          go-version: "1.26"
          cache: false
      - run: make dist COMPONENTS=rayd
      - uses: actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v7.0.0
        with:
          name: dist
          path: dist/
  sign:
    needs: build
    runs-on: ubuntu-latest
    environment: release
    permissions:
      id-token: write
    steps:
      - uses: actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c # v8.0.1
        with:
          name: dist
          path: dist
      - run: cd dist && sha256sum -c SHA256SUMS
      - env:
          COSIGN_SHA256: c956e5dfcac53d52bcf058360d579472f0c1d2d9b69f55209e256fe7783f4c74
        run: |
          curl -fsSLo cosign https://example.invalid/cosign-linux-amd64
          echo "$COSIGN_SHA256  cosign" | sha256sum -c -
      - run: for f in dist/*; do ./cosign sign-blob --yes --bundle "$f.sigstore.json" "$f"; done
  publish:
    needs: [build, sign]
    runs-on: ubuntu-latest
    environment: release
    permissions:
      contents: write
    steps:
      - uses: actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c # v8.0.1
      - run: cd dist && sha256sum -c SHA256SUMS
      - run: gh release create "$TAG" dist/*
`

func TestGoodReleasePasses(t *testing.T) {
	for _, p := range CheckRelease("good.yml", []byte(goodRelease)) {
		t.Error(p)
	}
}

// TestRejects shows that each rule bites: every case is goodRelease with
// one change, and the checker must report it.
func TestRejects(t *testing.T) {
	cases := []struct {
		name, old, new, want string
		old2, new2           string // a second change, when one is not enough
	}{
		{"action pinned by tag", "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1", "actions/checkout@v7", "pin the action by a full 40-hex commit sha", "", ""},
		{"pin without its version", "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c # v8.0.1\n      - run: cd dist && sha256sum -c SHA256SUMS\n      - run: gh", "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c\n      - run: cd dist && sha256sum -c SHA256SUMS\n      - run: gh", "trailing comment", "", ""},
		{"branch trigger", "on:\n  push:\n", "on:\n  push:\n    branches: [main]\n", "filters on tags only", "", ""},
		{"manual trigger", "on:\n  push:\n", "on:\n  workflow_dispatch:\n  push:\n", "workflow_dispatch", "", ""},
		{"unprefixed tag", `"cli/v*"]`, `"cli/v*", "v*"]`, "must be exactly", "", ""},
		{"build may sign", "    permissions:\n      contents: read\n", "    permissions:\n      contents: read\n      id-token: write\n", "job build: permissions id-token: write", "", ""},
		{"build may write", "    permissions:\n      contents: read\n", "    permissions:\n      contents: write\n", "job build: permissions contents: write", "", ""},
		{"build without its own permissions", "    permissions:\n      contents: read\n", "", "job build: no permissions of its own", "", ""},
		{"top-level write", "permissions: {}", "permissions:\n  contents: write", "write at the top level", "", ""},
		{"shorthand", "permissions: {}", "permissions: write-all", "never a shorthand", "", ""},
		{"sign may write", "      id-token: write\n", "      id-token: write\n      contents: write\n", "job sign: permissions contents: write", "", ""},
		{"publish may sign", "      contents: write\n", "      contents: write\n      id-token: write\n", "job publish: permissions id-token: write", "", ""},
		{"sign without id-token", "      id-token: write\n", "      id-token: none\n", "job sign: needs permissions id-token: write", "", ""},
		{"sign checks out", "      - run: cd dist && sha256sum -c SHA256SUMS\n      - env:", "      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1\n      - run: cd dist && sha256sum -c SHA256SUMS\n      - env:", "checks out the repository: sign must not", "", ""},
		{"publish builds", "      - run: gh release", "      - run: make dist\n      - run: gh release", "runs make: publish runs no build tool", "", ""},
		{"publish sets up go", "      - run: gh release", "      - uses: actions/setup-go@b7ad1dad31e06c5925ef5d2fc7ad053ef454303e # v7.0.0\n        with: {cache: false}\n      - run: gh release", "may only move artifacts", "", ""},
		{"sign outside the environment", "    environment: release\n    permissions:\n      id-token", "    permissions:\n      id-token", "job sign: environment \"\"", "", ""},
		{"publish without sha256sum -c", "      - run: cd dist && sha256sum -c SHA256SUMS\n      - run: gh", "      - run: gh", "job publish: does not run sha256sum -c", "", ""},
		{"sign checks after signing", "      - run: cd dist && sha256sum -c SHA256SUMS\n      - env:", "      - env:", "job sign: runs sha256sum -c SHA256SUMS only after",
			`"$f"; done`, `"$f"; done; (cd dist && sha256sum -c SHA256SUMS)`},
		{"clobber", `gh release create "$TAG" dist/*`, `gh release upload --clobber "$TAG" dist/*`, "--clobber replaces a published asset", "", ""},
		{"setup-go cache", "          cache: false\n", "", "setup-go caches by default", "", ""},
		{"cache true", "          cache: false\n", "          cache: true\n", "cache: true: a release restores no Actions cache", "", ""},
		{"actions/cache", "      - run: make dist", "      - uses: actions/cache@0057852bfaa89a56745cba8c7296529d2fc39830 # v4.3.0\n        with: {path: x, key: y}\n      - run: make dist", "a release restores no Actions cache", "", ""},
		{"download without digest", "          echo \"$COSIGN_SHA256  cosign\" | sha256sum -c -\n", "", "without checking a pinned sha256", "", ""},
		{"build holds a secret", "      - run: make dist COMPONENTS=rayd\n", "      - run: make dist COMPONENTS=rayd\n        env: {TOKEN: \"${{ secrets.NPM_TOKEN }}\"}\n", "mentions secrets.", "", ""},
		{"build keeps its token", "          persist-credentials: false\n", "", "persist-credentials: false", "", ""},
		{"publish before sign", "    needs: [build, sign]", "    needs: [build]", "does not need sign", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(goodRelease, c.old) {
				t.Fatalf("goodRelease has no %q to change", c.old)
			}
			bad := strings.Replace(goodRelease, c.old, c.new, 1)
			if c.old2 != "" {
				if !strings.Contains(bad, c.old2) {
					t.Fatalf("goodRelease has no %q to change", c.old2)
				}
				bad = strings.Replace(bad, c.old2, c.new2, 1)
			}
			got := CheckRelease("bad.yml", []byte(bad))
			for _, p := range got {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Errorf("the checker did not reject it with %q; it said:\n%s", c.want, strings.Join(got, "\n"))
		})
	}
}

// TestRejectsCommon: rules for every workflow, on a small bad CI file.
func TestRejectsCommon(t *testing.T) {
	bad := `
on: pull_request_target
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@main
      - uses: docker://alpine:3
      - uses: ./.github/actions/local
`
	got := strings.Join(Check("bad.yml", []byte(bad)), "\n")
	for _, want := range []string{
		"pull_request_target runs with the base repository's rights",
		"job test: no permissions",
		"uses actions/checkout@main: pin the action",
		"uses docker://alpine:3: pin the image",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "./.github/actions/local") {
		t.Errorf("a local action needs no pin:\n%s", got)
	}
	if got := Check("broken.yml", []byte("on: [push\n")); len(got) == 0 || !strings.Contains(got[0], "does not parse") {
		t.Errorf("a broken file passed: %v", got)
	}
}

func TestRejectsDependabot(t *testing.T) {
	bad := `
version: 2
updates:
  - package-ecosystem: gomod
    directories: [/proto]
    schedule: {interval: weekly}
    cooldown: {default-days: 3}
`
	got := strings.Join(CheckDependabot("dependabot.yml", []byte(bad), []string{"/proto", "/sdk"}, []string{"/web"}), "\n")
	for _, want := range []string{
		"cooldown default-days 3",
		"gomod directories [/proto]: want [/proto /sdk]",
		"github-actions directories []: want [/]",
		"npm directories []: want [/web]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
}
