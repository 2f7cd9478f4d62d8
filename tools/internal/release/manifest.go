// Package release checks and releases the workspace's modules: the
// manifest (versions.yaml), each go.mod against its imports, a file-based
// Go module proxy built from the work tree or from tags, and the release
// plan. cmd/release is its thin main.
package release

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// PathPrefix is the module path prefix of every module of the repository.
const PathPrefix = "github.com/rayito-dev/rayito/"

// Module is one module of the workspace.
type Module struct {
	Dir       string // relative to the repository root, slash-separated: "sdk"
	Path      string // module path
	Version   string // manifest version; "" for unreleased modules
	VersionGo string // file whose Version constant must equal Version, or ""
	Released  bool
	Why       string // for unreleased modules: why they are never tagged
}

// Tag is the path-prefixed tag of a released module's manifest version.
func (m Module) Tag() string { return m.Dir + "/" + m.Version }

// Repo is the repository: its root, its manifest and its workspace modules.
type Repo struct {
	Root    string
	Modules []Module // in the workspace's order, sorted by dir
}

type manifestFile struct {
	Modules map[string]struct {
		Version   string `yaml:"version"`
		VersionGo string `yaml:"version_go"`
	} `yaml:"modules"`
	Unreleased map[string]string `yaml:"unreleased"`
}

// Load reads go.work and versions.yaml under root and checks that they
// agree: every workspace module is either released with a valid semver
// version or listed as unreleased, and nothing else is listed.
func Load(root string) (*Repo, error) {
	workData, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork("go.work", workData, nil)
	if err != nil {
		return nil, err
	}
	manData, err := os.ReadFile(filepath.Join(root, "versions.yaml"))
	if err != nil {
		return nil, err
	}
	var man manifestFile
	dec := yaml.NewDecoder(strings.NewReader(string(manData)))
	dec.KnownFields(true)
	if err := dec.Decode(&man); err != nil {
		return nil, fmt.Errorf("versions.yaml: %w", err)
	}
	r := &Repo{Root: root}
	seen := map[string]bool{}
	for _, u := range work.Use {
		dir := filepath.ToSlash(filepath.Clean(u.Path))
		data, err := os.ReadFile(filepath.Join(root, dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		mf, err := modfile.ParseLax(dir+"/go.mod", data, nil)
		if err != nil {
			return nil, err
		}
		if mf.Module == nil || mf.Module.Mod.Path != PathPrefix+dir {
			return nil, fmt.Errorf("%s/go.mod: module path must be %s%s", dir, PathPrefix, dir)
		}
		m := Module{Dir: dir, Path: mf.Module.Mod.Path}
		if e, ok := man.Modules[dir]; ok {
			if !semver.IsValid(e.Version) || semver.Canonical(e.Version) != e.Version || semver.Build(e.Version) != "" {
				return nil, fmt.Errorf("versions.yaml: %s: %q is not a canonical semantic version (vX.Y.Z)", dir, e.Version)
			}
			if major := semver.Major(e.Version); major != "v0" && major != "v1" {
				return nil, fmt.Errorf("versions.yaml: %s: %s needs a /%s module path suffix, which this tool does not handle", dir, e.Version, major)
			}
			m.Version, m.VersionGo, m.Released = e.Version, e.VersionGo, true
		} else if why, ok := man.Unreleased[dir]; ok {
			m.Why = why
		} else {
			return nil, fmt.Errorf("versions.yaml: workspace module %s is neither in modules nor in unreleased", dir)
		}
		seen[dir] = true
		r.Modules = append(r.Modules, m)
	}
	for dir := range man.Modules {
		if !seen[dir] {
			return nil, fmt.Errorf("versions.yaml: %s is not a module of go.work", dir)
		}
	}
	for dir := range man.Unreleased {
		if !seen[dir] {
			return nil, fmt.Errorf("versions.yaml: %s is not a module of go.work", dir)
		}
		if _, ok := man.Modules[dir]; ok {
			return nil, fmt.Errorf("versions.yaml: %s is both released and unreleased", dir)
		}
	}
	sort.Slice(r.Modules, func(i, j int) bool { return r.Modules[i].Dir < r.Modules[j].Dir })
	return r, nil
}

// Module returns the module in dir, or false.
func (r *Repo) Module(dir string) (Module, bool) {
	for _, m := range r.Modules {
		if m.Dir == dir {
			return m, true
		}
	}
	return Module{}, false
}

// Released returns the released modules.
func (r *Repo) Released() []Module {
	var out []Module
	for _, m := range r.Modules {
		if m.Released {
			out = append(out, m)
		}
	}
	return out
}

// owner returns the workspace module that holds import path p, or false.
func (r *Repo) owner(p string) (Module, bool) {
	var best Module
	found := false
	for _, m := range r.Modules {
		if (p == m.Path || strings.HasPrefix(p, m.Path+"/")) && len(m.Path) > len(best.Path) {
			best, found = m, true
		}
	}
	return best, found
}

var versionConst = regexp.MustCompile(`(?m)^\s*(?:const\s+)?Version\s*=\s*"([^"]*)"`)

// checkVersionGo verifies that m's version_go file holds exactly one
// `Version = "X.Y.Z"` equal to the manifest version without its v.
func (r *Repo) checkVersionGo(m Module) error {
	if m.VersionGo == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(r.Root, m.VersionGo))
	if err != nil {
		return fmt.Errorf("%s: version_go: %w", m.Dir, err)
	}
	found := versionConst.FindAllSubmatch(data, -1)
	if len(found) != 1 {
		return fmt.Errorf("%s: %s must hold exactly one `Version = \"...\"` line, found %d", m.Dir, m.VersionGo, len(found))
	}
	if got, want := string(found[0][1]), strings.TrimPrefix(m.Version, "v"); got != want {
		return fmt.Errorf("%s: %s says Version = %q, versions.yaml says %s (want %q)", m.Dir, m.VersionGo, got, m.Version, want)
	}
	return nil
}
