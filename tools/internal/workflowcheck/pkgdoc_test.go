package workflowcheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestEveryPackageHasDoc: every Go package of the repository (commands,
// internal packages and test-only packages included; generated code
// aside) has a package doc comment in one of its files, so that `go doc`
// says what each is for.
func TestEveryPackageHasDoc(t *testing.T) {
	type pkg struct{ files, documented int }
	pkgs := map[string]*pkg{} // dir + " " + package name
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "gen") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel) + " " + f.Name.Name
		p := pkgs[key]
		if p == nil {
			p = &pkg{}
			pkgs[key] = p
		}
		p.files++
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			p.documented++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 100 {
		t.Fatalf("only %d packages found", len(pkgs))
	}
	var missing []string
	for k, p := range pkgs {
		if p.documented == 0 {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		t.Errorf("package %s has no doc comment: add one (a doc.go for a package of several files)", k)
	}
	t.Logf("%d packages, all documented but %d", len(pkgs), len(missing))
}
