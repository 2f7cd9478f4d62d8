package rayito

import (
	"os/exec"
	"strings"
	"testing"
)

const modPath = "github.com/rayito-dev/rayito/sdk"

// layerOf is a package's place in the SDK's picture (issue 34): arrows
// go from a higher layer to a lower one, never back up. 3: the packages
// built on the root (sdk/secrets, sdk/git, sdk/e2b); 2: the root; 1: the
// root's own building blocks (agentrunner, microvms, template); 0:
// sdk/internal/*. Packages of no layer (test helpers) are not checked.
func layerOf(pkg string) (int, bool) {
	switch {
	case pkg == modPath:
		return 2, true
	case strings.HasPrefix(pkg, modPath+"/internal/"):
		return 0, true
	}
	switch strings.TrimPrefix(pkg, modPath+"/") {
	case "secrets", "git", "e2b":
		return 3, true
	case "agentrunner", "microvms", "template":
		return 1, true
	}
	return 0, false
}

// TestLayers: no package of the SDK depends (directly or not) on a
// package of its own layer or above it, other than itself — which also
// rules out cycles — and the root does not link Secrets Manager (only
// programs that import sdk/secrets do).
func TestLayers(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Skipf("go list: %v (the module's sources and go command are needed)", err)
	}
	checked := 0
	for _, pkg := range strings.Fields(string(out)) {
		layer, ok := layerOf(pkg)
		if !ok {
			continue
		}
		deps, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		checked++
		for _, dep := range strings.Fields(string(deps)) {
			if dep == pkg {
				continue
			}
			if l, ok := layerOf(dep); ok && (l > layer || l == layer && sameLayerForbidden(pkg)) {
				t.Errorf("%s (layer %d) depends on %s (layer %d): an arrow back up", pkg, layer, dep, l)
			}
		}
		if pkg == modPath && strings.Contains(string(deps), "github.com/aws/aws-sdk-go-v2/service/secretsmanager") {
			t.Errorf("the root package links Secrets Manager")
		}
	}
	if checked < 5 {
		t.Fatalf("only %d packages checked: go list output looks wrong: %q", checked, out)
	}
}

// sameLayerForbidden reports whether pkg may not depend on another
// package of its own layer: sdk/secrets and sdk/git stand alone (neither
// imports the other), as do the building blocks; sdk/e2b may use sdk/git
// (E2B's sandbox.git) and sdk/secrets, and an internal package another
// (the follower its backoff; the go command refuses a cycle).
func sameLayerForbidden(pkg string) bool {
	l, _ := layerOf(pkg)
	return pkg != modPath+"/e2b" && l != 0
}
