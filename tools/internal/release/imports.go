package release

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
)

// importUse is one import of a module's Go file.
type importUse struct {
	file string // relative to the repository root
	path string
}

// moduleImports parses every Go file of module m (all build tags and
// operating systems, tests included; not nested modules or testdata) and
// returns its imports.
func (r *Repo) moduleImports(m Module) ([]importUse, error) {
	root := filepath.Join(r.Root, m.Dir)
	var out []importUse
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if p != root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a nested module
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.Root, p)
		for _, is := range f.Imports {
			ip, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			out = append(out, importUse{file: filepath.ToSlash(rel), path: ip})
		}
		return nil
	})
	return out, err
}

// internalParent says whether import path p is, or is under, an internal
// package, and returns the import path of the directory that holds that
// internal: only packages under it may import p.
func internalParent(p string) (string, bool) {
	elems := strings.Split(p, "/")
	for i := len(elems) - 1; i >= 0; i-- {
		if elems[i] == "internal" {
			return strings.Join(elems[:i], "/"), true
		}
	}
	return "", false
}

// CheckGoMods checks, for every module, what does not need the network:
// the go.mod names its siblings exactly as the module imports them, at
// their manifest versions, without `// indirect`; no module has a replace
// directive; no module imports another module's internal package; and
// each version_go constant equals the manifest. It returns every problem.
func (r *Repo) CheckGoMods() []error {
	errs := r.checkGoWork()
	for _, m := range r.Modules {
		if err := r.checkVersionGo(m); err != nil {
			errs = append(errs, err)
		}
		uses, err := r.moduleImports(m)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Dir, err))
			continue
		}
		imported := map[string]bool{}
		for _, u := range uses {
			if !strings.HasPrefix(u.path, PathPrefix) {
				continue
			}
			owner, ok := r.owner(u.path)
			if !ok {
				errs = append(errs, fmt.Errorf("%s imports %s, which no workspace module holds", u.file, u.path))
				continue
			}
			if owner.Dir == m.Dir {
				continue
			}
			imported[owner.Dir] = true
			if parent, ok := internalParent(u.path); ok {
				errs = append(errs, fmt.Errorf("%s imports %s: an internal package of module %s (modules release separately; only %s/... may import it)", u.file, u.path, owner.Dir, parent))
			}
		}
		data, err := os.ReadFile(filepath.Join(r.Root, m.Dir, "go.mod"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		mf, err := modfile.Parse(m.Dir+"/go.mod", data, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(mf.Replace) > 0 {
			errs = append(errs, fmt.Errorf("%s/go.mod: replace directives are not allowed (outsiders' builds ignore them; go.work links the siblings)", m.Dir))
		}
		if mf.Toolchain != nil {
			errs = append(errs, fmt.Errorf("%s/go.mod: a toolchain line would make every consumer download that toolchain", m.Dir))
		}
		required := map[string]bool{}
		for _, req := range mf.Require {
			if !strings.HasPrefix(req.Mod.Path, PathPrefix) {
				continue
			}
			sib, ok := r.owner(req.Mod.Path)
			if !ok || sib.Path != req.Mod.Path {
				errs = append(errs, fmt.Errorf("%s/go.mod requires %s, which is not a workspace module", m.Dir, req.Mod.Path))
				continue
			}
			required[sib.Dir] = true
			switch {
			case !sib.Released:
				errs = append(errs, fmt.Errorf("%s/go.mod requires %s, which is never released", m.Dir, sib.Dir))
			case req.Mod.Version != sib.Version:
				errs = append(errs, fmt.Errorf("%s/go.mod requires %s %s; versions.yaml says %s", m.Dir, sib.Path, req.Mod.Version, sib.Version))
			}
			if req.Indirect && imported[sib.Dir] {
				errs = append(errs, fmt.Errorf("%s/go.mod marks %s // indirect, but the module imports it", m.Dir, sib.Path))
			}
		}
		for _, dir := range sortedKeys(imported) {
			if !required[dir] {
				errs = append(errs, fmt.Errorf("%s imports module %s, but %s/go.mod does not require it", m.Dir, dir, m.Dir))
			}
		}
	}
	return errs
}

// checkGoWork verifies go.work's replace block: the go command, in
// workspace mode, still reads the go.mod of every version a workspace
// module requires of another (unpublished until the release), so go.work
// replaces each released module at its manifest version by its directory,
// and nothing else.
func (r *Repo) checkGoWork() []error {
	data, err := os.ReadFile(filepath.Join(r.Root, "go.work"))
	if err != nil {
		return []error{err}
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return []error{err}
	}
	want := map[string]string{}
	for _, m := range r.Released() {
		want[m.Path+"@"+m.Version] = "./" + m.Dir
	}
	var errs []error
	for _, rep := range work.Replace {
		key := rep.Old.Path + "@" + rep.Old.Version
		if dir, ok := want[key]; ok && rep.New.Version == "" && filepath.Clean(rep.New.Path) == filepath.Clean(dir) {
			delete(want, key)
			continue
		}
		errs = append(errs, fmt.Errorf("go.work: unexpected replace %s %s => %s (only released modules at their versions.yaml version, by their directory)", rep.Old.Path, rep.Old.Version, rep.New.Path))
	}
	for _, key := range sortedKeys(boolKeys(want)) {
		path, version, _ := strings.Cut(key, "@")
		errs = append(errs, fmt.Errorf("go.work: missing `replace %s %s => %s`", path, version, want[key]))
	}
	return errs
}

func boolKeys(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// siblingReq is a go.mod requirement on another workspace module.
type siblingReq struct {
	sib      Module
	version  string
	indirect bool
}

// siblingReqs returns module m's go.mod requirements on other workspace
// modules.
func (r *Repo) siblingReqs(m Module) ([]siblingReq, error) {
	data, err := os.ReadFile(filepath.Join(r.Root, m.Dir, "go.mod"))
	if err != nil {
		return nil, err
	}
	mf, err := modfile.ParseLax(m.Dir+"/go.mod", data, nil)
	if err != nil {
		return nil, err
	}
	var out []siblingReq
	for _, req := range mf.Require {
		if sib, ok := r.owner(req.Mod.Path); ok && sib.Path == req.Mod.Path && sib.Dir != m.Dir {
			out = append(out, siblingReq{sib: sib, version: req.Mod.Version, indirect: req.Indirect})
		}
	}
	return out, nil
}

// siblingDeps returns the dirs of the sibling modules m imports or its
// go.mod requires.
func (r *Repo) siblingDeps(m Module) ([]string, error) {
	deps := map[string]bool{}
	uses, err := r.moduleImports(m)
	if err != nil {
		return nil, err
	}
	for _, u := range uses {
		if sib, ok := r.owner(u.path); ok && sib.Dir != m.Dir {
			deps[sib.Dir] = true
		}
	}
	reqs, err := r.siblingReqs(m)
	if err != nil {
		return nil, err
	}
	for _, req := range reqs {
		deps[req.sib.Dir] = true
	}
	return sortedKeys(deps), nil
}

// Ordered returns the modules so that each comes after the siblings it
// imports or requires, or an error naming a cycle.
func (r *Repo) Ordered() ([]Module, error) {
	state := map[string]int{} // 0 new, 1 visiting, 2 done
	var out []Module
	var visit func(m Module, stack []string) error
	visit = func(m Module, stack []string) error {
		switch state[m.Dir] {
		case 1:
			return fmt.Errorf("module requirement cycle: %s -> %s", strings.Join(stack, " -> "), m.Dir)
		case 2:
			return nil
		}
		state[m.Dir] = 1
		deps, err := r.siblingDeps(m)
		if err != nil {
			return err
		}
		for _, d := range deps {
			dm, _ := r.Module(d)
			if err := visit(dm, append(stack, m.Dir)); err != nil {
				return err
			}
		}
		state[m.Dir] = 2
		out = append(out, m)
		return nil
	}
	for _, m := range r.Modules {
		if err := visit(m, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}
