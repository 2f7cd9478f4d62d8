package main

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedModules is rayd's dependency budget. The AWS SDK in particular
// stays out (ARCHITECTURE.md §2): growing this list is a reviewed decision.
var allowedModules = map[string]bool{
	"github.com/rayito-dev/rayito/rayd":  true,
	"github.com/rayito-dev/rayito/proto": true,
	// The secret gateway (issue 14): our own module, standard library
	// only.
	"github.com/rayito-dev/rayito/gateway": true,
	"connectrpc.com/connect":               true,
	"google.golang.org/protobuf":           true,
	"golang.org/x/sys":                     true,
	// The Jupyter wire protocol (internal/jupyter, issue 12): a pure-Go
	// ZeroMQ, and the x/ modules it links (errgroup; text encodings).
	"github.com/go-zeromq/zmq4": true,
	"golang.org/x/sync":         true,
	"golang.org/x/text":         true,
	// Stream and error contents of kernel messages (internal/jupyter):
	// an escape-aware JSON parser, 3 MB in under 1 ms where
	// encoding/json takes 36 ms; no dependencies of its own.
	"github.com/valyala/fastjson": true,
	// The network policy (internal/netcfg, issue 13): nftables and policy
	// routing over netlink (no shelling out to nft or ip), and the netlink
	// library they share; golang.org/x/net for the egress proxy's SOCKS5
	// chaining and the DNS forwarder's message parser.
	"github.com/google/nftables":     true,
	"github.com/mdlayher/netlink":    true,
	"github.com/mdlayher/socket":     true,
	"github.com/vishvananda/netlink": true,
	"github.com/vishvananda/netns":   true,
	"golang.org/x/net":               true,
	// HOME persistence (internal/persist, issue 28): S3 and the execution
	// role's credentials from the instance metadata service, nothing
	// else of the AWS SDK (TestAWSPackagesBudget says which packages).
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
	// The metrics export (internal/telemetry, issue 31): OTLP's message
	// types only (metrics, common, resource); the collector package,
	// which holds the gRPC service, is not linked (the request is written
	// by hand around the ResourceMetrics), so neither is gRPC.
	"go.opentelemetry.io/proto/otlp": true,
}

// awsPackages are the only AWS SDK packages rayd may link, by prefix: the
// SDK's core, S3 and what it needs, the metadata service's client and its
// role credentials. No config loader (it brings STS, SSO and profile
// files), no other service, no transfer manager.
var awsPackages = []string{
	"github.com/aws/smithy-go",
	"github.com/aws/aws-sdk-go-v2/aws",
	"github.com/aws/aws-sdk-go-v2/internal/",
	"github.com/aws/aws-sdk-go-v2/service/s3",
	"github.com/aws/aws-sdk-go-v2/service/internal/",
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds",
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds",
}

// TestAWSPackagesBudget fails when rayd links an AWS SDK package beyond
// the S3 pieces persistence needs.
func TestAWSPackagesBudget(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	linked := 0
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, "github.com/aws/") {
			continue
		}
		linked++
		ok := false
		for _, a := range awsPackages {
			if p == a || strings.HasPrefix(p, a) && (strings.HasSuffix(a, "/") || p[len(a)] == '/') {
				ok = true
			}
		}
		if !ok || strings.Contains(p, "/sts") || strings.Contains(p, "/sso") || strings.HasSuffix(p, "/config") && !strings.Contains(p, "/internal/") {
			t.Errorf("rayd links %s, outside the S3 pieces persistence needs", p)
		}
	}
	if linked == 0 {
		t.Fatal("no AWS package linked: the persistence client is gone, or go list output looks wrong")
	}
}

func TestDependencyBudget(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		if !seen[m] && !allowedModules[m] {
			t.Errorf("rayd links module %s, which is outside its dependency budget", m)
		}
		seen[m] = true
	}
	if !seen["connectrpc.com/connect"] {
		t.Fatalf("go list output looks wrong: %q", out)
	}
}
