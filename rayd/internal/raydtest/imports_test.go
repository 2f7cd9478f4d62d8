package raydtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// testOnly are the rayd packages only tests may import.
var testOnly = []string{
	"github.com/rayito-dev/rayito/rayd/internal/raydtest",
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest",
}

// TestOnlyTestsImport: no non-test file of the rayd module imports the
// test support packages (but for each other: daemontest builds on this
// one), so none of it is linked into rayd.
func TestOnlyTestsImport(t *testing.T) {
	root := filepath.Join("..", "..")
	allowed := map[string]bool{
		filepath.Join(root, "internal", "raydtest"):             true,
		filepath.Join(root, "internal", "daemon", "daemontest"): true,
	}
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || allowed[filepath.Dir(p)] {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			for _, bad := range testOnly {
				if path == bad {
					t.Errorf("%s imports %s, which only tests may import", p, path)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files: the walk missed the module", checked)
	}
}
