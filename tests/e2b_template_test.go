package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/e2b"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// TestE2BTemplateBuild: the official e2b SDK's template builder
// (e2b/template.mjs) through the gateway on a root local platform:
// Template.build of fromTemplate('local') with RUN (as user and as
// root), COPY, ENV, WORKDIR and a start command with waitForPort, then
// Sandbox.create(name) sees what the build made; a failing RUN step gives
// the SDK's BuildError; fromDockerfile of three lines builds; what cannot
// be mapped is refused naming the step. The templates land on the
// platform as e2b-<name>.
func TestE2BTemplateBuild(t *testing.T) {
	t.Parallel() // a long wait on sandboxes: beside the other parallel tests (each has its own subnet, testSubnet)
	if !isRoot() {
		t.Skip("needs root: templates are built by the root local platform (user namespaces, overlayfs, an idmapped /usr)")
	}
	dir := e2bScenarioDir(t)
	p := startPlatform(t, "")
	defer p.stop(true)
	key, err := e2b.NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := e2b.New(context.Background(), e2b.Options{
		SDK:          p.opts(),
		APIKeyHashes: [][32]byte{e2b.HashAPIKey(key)},
		Templates:    map[string]string{"": "local"},
	})
	if err != nil {
		t.Fatal(err)
	}
	url := serveE2B(t, srv)

	timeout := 10 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(d)-30*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "template.mjs")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TMPDIR=" + t.TempDir(),
		"E2B_API_KEY=" + key, "E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url}
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("template.mjs did not finish within %v; its output:\n%s", timeout.Round(time.Second), out.String())
	}
	if err != nil {
		t.Fatalf("template.mjs failed: %v; its output:\n%s", err, out.String())
	}
	t.Logf("template.mjs passed in %v:\n%s", time.Since(start).Round(time.Second), out.String())

	// The platform holds the gateway's templates under the prefix only.
	list, err := rayito.ListTemplates(ctx, p.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tpl := range list {
		if !strings.HasPrefix(tpl.Name, e2b.TemplatePrefix) {
			t.Errorf("template %q without the gateway's prefix", tpl.Name)
		}
		if tpl.State == rayito.TemplateReady {
			n++
		}
	}
	if n < 2 {
		t.Errorf("%d ready templates on the platform, want the 2 built: %+v", n, list)
	}
}
