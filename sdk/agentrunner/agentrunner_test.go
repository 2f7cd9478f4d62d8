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

// TestPinsPerArch: a runtime's packages may be per machine (uname -m);
// the runtime then runs on those machines only, each installing its own
// packages and the common ones.
func TestPinsPerArch(t *testing.T) {
	pins, err := LoadPins()
	if err != nil {
		t.Fatal(err)
	}
	if got := pins.Runtimes["opencode"].Arches(); len(got) == 0 || got[0] != "x86_64" {
		t.Errorf("opencode's machines: %v", got)
	}
	if got := pins.Runtimes["deepagents"].Arches(); len(got) != 0 {
		t.Errorf("deepagents' machines: %v", got)
	}
	sum := strings.Repeat("ab", 32)
	raw := `{"v":1,"runtimes":{"r":{"version":"1","node_min_major":20,"packages":[
		{"name":"common","version":"1","tarball":"common-1.tgz","sha256":"` + sum + `"},
		{"name":"r-arm64","version":"1","tarball":"r-arm64-1.tgz","sha256":"` + sum + `","arch":"aarch64"},
		{"name":"r-x64","version":"1","tarball":"r-x64-1.tgz","sha256":"` + sum + `","arch":"x86_64"}]}}}`
	p, err := parsePins([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	rt := p.Runtimes["r"]
	if got := strings.Join(rt.Arches(), ","); got != "aarch64,x86_64" {
		t.Errorf("machines %q", got)
	}
	if got := strings.Join(rt.For("aarch64").Specs(), " "); got != "common@1 r-arm64@1" {
		t.Errorf("aarch64's packages %q", got)
	}
	if got := strings.Join(rt.For("riscv64").Specs(), " "); got != "common@1" {
		t.Errorf("another machine's packages %q", got)
	}
	if _, err := parsePins([]byte(strings.Replace(raw, `"aarch64"`, `"aarch64; rm -rf /"`, 1))); err == nil {
		t.Error("a machine name with shell characters passed")
	}
}
