package secrets

import (
	"os/exec"
	"strings"
	"testing"
)

// extraModules is what sdk/secrets may link beyond the root package's
// budget (sdk/deps_test.go): AWS Secrets Manager's client, for AWSStore.
// Growing it is a reviewed decision.
var extraModules = map[string]bool{
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager": true,
}

func modules(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", pkg).Output()
	if err != nil {
		t.Skipf("go list: %v (the module's sources and go command are needed)", err)
	}
	seen := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		seen[m] = true
	}
	return seen
}

func TestDependencyBudget(t *testing.T) {
	t.Parallel()
	root, own := modules(t, ".."), modules(t, ".")
	if !root["connectrpc.com/connect"] || !own["github.com/aws/aws-sdk-go-v2/service/secretsmanager"] {
		t.Fatalf("go list output looks wrong: %v / %v", root, own)
	}
	for m := range own {
		if !root[m] && !extraModules[m] {
			t.Errorf("sdk/secrets links module %s, which is outside its dependency budget", m)
		}
	}
}
