package agentrunner

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPinsMatchLock: the pins, package.json and package-lock.json name
// the same versions, so the tarballs sha256sum -c checks are the ones
// npm ci installs.
func TestPinsMatchLock(t *testing.T) {
	pins, err := LoadPins()
	if err != nil {
		t.Fatal(err)
	}
	rt, ok := pins.Runtimes["deepagents"]
	if !ok {
		t.Fatal("no deepagents pins")
	}
	files := DeepAgentsFiles()
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(files["package.json"], &pkg); err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Version   string `json:"version"`
			Integrity string `json:"integrity"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(files["package-lock.json"], &lock); err != nil {
		t.Fatal(err)
	}
	if len(pkg.Dependencies) != len(rt.Packages) {
		t.Errorf("package.json has %d dependencies, the pins %d", len(pkg.Dependencies), len(rt.Packages))
	}
	for _, p := range rt.Packages {
		if pkg.Dependencies[p.Name] != p.Version {
			t.Errorf("%s: package.json %q, pins %q (exact versions only)", p.Name, pkg.Dependencies[p.Name], p.Version)
		}
		l := lock.Packages["node_modules/"+p.Name]
		if l.Version != p.Version || !strings.HasPrefix(l.Integrity, "sha512-") {
			t.Errorf("%s: lock %+v, pins %q", p.Name, l, p.Version)
		}
	}
	for name, l := range lock.Packages {
		if name != "" && !strings.HasPrefix(l.Integrity, "sha512-") {
			t.Errorf("%s has no sha512 integrity in the lock", name)
		}
	}
	sums := rt.SHA256SumLines()
	if strings.Count(sums, "\n") != len(rt.Packages) || !strings.Contains(sums, "  deepagents-1.14.1.tgz\n") {
		t.Errorf("sha256sum lines %q", sums)
	}
	if len(DeepAgentsRunnerSHA256()) != 64 {
		t.Error("runner sha256")
	}
}
