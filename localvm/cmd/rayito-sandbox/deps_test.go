package main

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedModules is rayito-sandbox's dependency budget: rayd's (see
// rayd/cmd/rayd's TestDependencyBudget), localvm's launcher, and the FUSE
// library of the S3 mount helper. The binary exists to be small: a module
// added here runs its package initialization in every sandbox.
var allowedModules = map[string]bool{
	"github.com/rayito-dev/rayito/localvm": true,
	"github.com/rayito-dev/rayito/rayd":    true,
	"github.com/rayito-dev/rayito/proto":   true,
	"github.com/rayito-dev/rayito/gateway": true,
	"github.com/hanwen/go-fuse/v2":         true,

	"connectrpc.com/connect":         true,
	"google.golang.org/protobuf":     true,
	"golang.org/x/net":               true,
	"golang.org/x/sync":              true,
	"golang.org/x/sys":               true,
	"golang.org/x/text":              true,
	"github.com/go-zeromq/zmq4":      true,
	"github.com/valyala/fastjson":    true,
	"github.com/google/nftables":     true,
	"github.com/mdlayher/netlink":    true,
	"github.com/mdlayher/socket":     true,
	"github.com/vishvananda/netlink": true,
	"github.com/vishvananda/netns":   true,
	"go.opentelemetry.io/proto/otlp": true,

	"github.com/aws/aws-sdk-go-v2":                                  true,
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream":         true,
	"github.com/aws/aws-sdk-go-v2/credentials":                      true,
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds":                 true,
	"github.com/aws/aws-sdk-go-v2/internal/configsources":           true,
	"github.com/aws/aws-sdk-go-v2/internal/endpoints/v2":            true,
	"github.com/aws/aws-sdk-go-v2/internal/v4a":                     true,
	"github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding": true,
	"github.com/aws/aws-sdk-go-v2/service/internal/checksum":        true,
	"github.com/aws/aws-sdk-go-v2/service/internal/presigned-url":   true,
	"github.com/aws/aws-sdk-go-v2/service/internal/s3shared":        true,
	"github.com/aws/aws-sdk-go-v2/service/s3":                       true,
	"github.com/aws/smithy-go":                                      true,
}

// TestDependencyBudget fails when rayito-sandbox links a module outside
// its budget, or any of localvm's platform (the registry, the API, the
// proxy): only the launcher's init side belongs in a sandbox.
func TestDependencyBudget(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, mod, _ := strings.Cut(line, " ")
		if mod != "" && !allowedModules[mod] && !seen[mod] {
			t.Errorf("rayito-sandbox links module %s, outside its dependency budget", mod)
		}
		seen[mod] = true
		if rest, ok := strings.CutPrefix(pkg, "github.com/rayito-dev/rayito/localvm/"); ok {
			switch rest {
			case "cmd/rayito-sandbox", "internal/launcher", "internal/cgroup", "internal/fscopy", "internal/hostnet", "internal/rootfs":
			default:
				t.Errorf("rayito-sandbox links %s: only the launcher's side of localvm belongs in a sandbox", pkg)
			}
		}
	}
	if !seen["github.com/rayito-dev/rayito/rayd"] {
		t.Fatalf("go list output looks wrong: %q", out)
	}
}
