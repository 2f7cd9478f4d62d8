package rayito

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedModules is the SDK's dependency budget: what a program that
// imports the SDK links (package doc, "Dependencies"). Growing it is a
// reviewed decision.
var allowedModules = map[string]bool{
	"github.com/rayito-dev/rayito/sdk":   true,
	"github.com/rayito-dev/rayito/proto": true,
	"connectrpc.com/connect":             true,
	"google.golang.org/protobuf":         true,
	// The AWS backend: SigV4 signing and the credential chain, loaded
	// only when the backend is aws.
	"github.com/aws/aws-sdk-go-v2":                                  true,
	"github.com/aws/aws-sdk-go-v2/config":                           true,
	"github.com/aws/aws-sdk-go-v2/credentials":                      true,
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds":                 true,
	"github.com/aws/aws-sdk-go-v2/internal/configsources":           true,
	"github.com/aws/aws-sdk-go-v2/internal/endpoints/v2":            true,
	"github.com/aws/aws-sdk-go-v2/internal/v4a":                     true,
	"github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding": true,
	"github.com/aws/aws-sdk-go-v2/service/internal/presigned-url":   true,
	"github.com/aws/aws-sdk-go-v2/service/signin":                   true,
	"github.com/aws/aws-sdk-go-v2/service/sso":                      true,
	"github.com/aws/aws-sdk-go-v2/service/ssooidc":                  true,
	"github.com/aws/aws-sdk-go-v2/service/sts":                      true,
	"github.com/aws/smithy-go":                                      true,
	// The events stack's table (RegisterWebhook, ListWebhooks,
	// DeleteWebhook and GetEvents on AWS, issue 29; the metadata index of
	// issue 31 will use it too).
	"github.com/aws/aws-sdk-go-v2/service/dynamodb":                    true,
	"github.com/aws/aws-sdk-go-v2/service/internal/endpoint-discovery": true,
	// sdk/template's .dockerignore matcher (Docker's own, issue 31): no
	// dependencies of its own.
	"github.com/moby/patternmatcher": true,
	// WithTracerProvider's spans (issue 31): OpenTelemetry's trace API
	// (trace, attribute, codes) only; the OpenTelemetry SDK is the
	// caller's choice and stays out (tests use it).
	"go.opentelemetry.io/otel":       true,
	"go.opentelemetry.io/otel/trace": true,
	// Linked by otel/attribute (its set hashing); no dependencies of its
	// own.
	"github.com/cespare/xxhash/v2": true,
}

func TestDependencyBudget(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v (the module's sources and go command are needed)", err)
	}
	seen := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		if !seen[m] && !allowedModules[m] {
			t.Errorf("the SDK links module %s, which is outside its dependency budget", m)
		}
		seen[m] = true
	}
	if !seen["connectrpc.com/connect"] {
		t.Fatalf("go list output looks wrong: %q", out)
	}
	// The local platform, rayd and the CLI's libraries never reach an SDK
	// user's binary.
	// Secrets Manager's client is sdk/secrets' (its own budget test):
	// the root reads the events stack's key and stores webhook secrets
	// through sdk/internal/smjson.
	for _, m := range []string{"github.com/rayito-dev/rayito/localvm", "github.com/rayito-dev/rayito/rayd", "github.com/google/nftables", "github.com/aws/aws-sdk-go-v2/service/secretsmanager"} {
		if seen[m] {
			t.Errorf("the SDK links %s", m)
		}
	}
}
