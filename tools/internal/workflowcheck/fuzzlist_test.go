package workflowcheck

import (
	"bufio"
	"bytes"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]+)\(`)
	fuzzRun  = regexp.MustCompile(`^scripts/fuzz\.sh \./(\S+)((?: Fuzz[A-Za-z0-9_]+)+)$`)
)

// TestEveryFuzzTargetRuns: make test-fuzz (run by make ci) runs every
// fuzz target of the repository, each once (one scripts/fuzz.sh line per
// package): a target only written runs only its seeds.
func TestEveryFuzzTargetRuns(t *testing.T) {
	have := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllSubmatch(read(t, filepath.Join(rel, name)), -1) {
			have[filepath.ToSlash(rel)+" "+string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(have) < 50 {
		t.Fatalf("only %d fuzz targets found", len(have))
	}
	runs := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(read(t, "Makefile")))
	for sc.Scan() {
		if m := fuzzRun.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			for _, target := range strings.Fields(m[2]) {
				runs[m[1]+" "+target]++
			}
		}
	}
	var missing, extra []string
	for k := range have {
		if runs[k] == 0 {
			missing = append(missing, k)
		}
	}
	for k, n := range runs {
		if !have[k] || n > 1 {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, k := range missing {
		t.Errorf("make test-fuzz does not run %s: add its line to the Makefile", k)
	}
	for _, k := range extra {
		t.Errorf("make test-fuzz runs %s, which is not a fuzz target of that package or is listed twice", k)
	}
}
