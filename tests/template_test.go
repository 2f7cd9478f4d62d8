package tests

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/template"
)

// buildTemplate compiles t from dir and builds it on p as name.
func buildTemplate(ctx context.Context, t *testing.T, p *platform, name string, tpl *template.Template, dir string) (*rayito.TemplateInfo, error) {
	t.Helper()
	art, err := template.Compile(ctx, tpl, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer art.Close()
	if _, err := rayito.BuildTemplate(ctx, rayito.BuildTemplateInput{Name: name, Artifact: bytes.NewReader(art.Zip), SHA256: art.SHA256}, p.opts()...); err != nil {
		t.Fatal(err)
	}
	return rayito.WaitTemplate(ctx, name, p.opts()...)
}

// TestTemplateOnLocalPlatform: a template built from three lines of
// Dockerfile runs on the local platform: what its RUN installed under
// /usr, the file it copied (the user's), its environment; the host and
// the platform's own template do not see any of it.
func TestTemplateOnLocalPlatform(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: templates are built by the root local platform (user namespaces, overlayfs, an idmapped /usr)")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "greeting.txt"), []byte("hello from the context\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	escape := "/usr/local/bin/rayito-template-test-" + filepath.Base(dir)
	// A host file the template deletes (an overlayfs whiteout in its
	// layer): gone in its sandboxes, still on the host and in local's.
	docs, _ := filepath.Glob("/usr/share/doc/*/copyright")
	if len(docs) == 0 {
		t.Skip("no /usr/share/doc/*/copyright on this host to delete in a template")
	}
	deleted := docs[0]
	tpl, err := template.FromDockerfile("FROM local\n" +
		`RUN printf '#!/bin/sh\necho hello from the template\n' > /usr/local/bin/greet && chmod 755 /usr/local/bin/greet && touch ` + escape + "\n" +
		"COPY --chown=user greeting.txt /home/user/greeting.txt\n")
	tpl = tpl.RunCmd("rm " + deleted)
	if err != nil {
		t.Fatal(err)
	}
	tpl = tpl.SetEnvs(map[string]string{"GREETING": "hi"})
	replaced := "/usr/local/bin/rayito-replaced-" + filepath.Base(dir)
	t.Cleanup(func() { _ = os.Remove(replaced) })
	if err := os.WriteFile(replaced, []byte("#!/bin/sh\necho v1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := buildTemplate(ctx, t, p, "greeter", tpl, dir)
	if err != nil || info.State != rayito.TemplateReady {
		t.Fatalf("build: %+v %v", info, err)
	}
	if _, err := os.Stat(escape); err == nil {
		t.Fatalf("the build wrote %s on the host", escape)
	}
	if _, err := os.Stat(deleted); err != nil {
		t.Fatalf("the build deleted %s on the host: %v", deleted, err)
	}
	// What the template holds no longer follows the host's /usr: a
	// program the host gains after the build, or replaces as package
	// managers do (a new file renamed over it), is not seen in its
	// sandboxes, while local's see both.
	added := "/usr/local/bin/rayito-after-build-" + filepath.Base(dir)
	t.Cleanup(func() { _ = os.Remove(added) })
	if err := os.WriteFile(added, []byte("#!/bin/sh\necho added\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(replaced+".new", []byte("#!/bin/sh\necho v2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(replaced+".new", replaced); err != nil {
		t.Fatal(err)
	}
	run := func(sbx *rayito.Sandbox, cmd string) string {
		t.Helper()
		res, err := sbx.Commands.Run(ctx, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return strings.TrimSpace(res.Stdout)
	}
	sbx, err := rayito.Create(ctx, p.opts(rayito.WithTemplate("greeter"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(ctx)
	for cmd, want := range map[string]string{
		"greet":                              "hello from the template",
		"cat /home/user/greeting.txt":        "hello from the context",
		"stat -c %U /home/user/greeting.txt": "user",
		"echo $GREETING":                     "hi",
		"id -un":                             "user",
		"test -w /usr/local/bin && echo w || echo ro":        "ro",
		"test -e " + deleted + " && echo there || echo gone": "gone",
		"test -e " + added + " && echo there || echo gone":   "gone",
		replaced: "v1",
	} {
		if got := run(sbx, cmd); got != want {
			t.Errorf("%s: %q, want %q", cmd, got, want)
		}
	}
	if info, err := sbx.Info(ctx); err != nil || info.Template != "greeter" {
		t.Errorf("info: %+v %v", info, err)
	}
	// Its home is each sandbox's own copy.
	run(sbx, "echo changed > /home/user/greeting.txt")
	other, err := rayito.Create(ctx, p.opts(rayito.WithTemplate("greeter"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Kill(ctx)
	if got := run(other, "cat /home/user/greeting.txt"); got != "hello from the context" {
		t.Errorf("a second sandbox's home: %q", got)
	}
	// The platform's own template is untouched.
	plain := p.create(ctx)
	defer plain.Kill(ctx)
	if got := run(plain, "command -v greet || echo none"); got != "none" {
		t.Errorf("local sees the template's program: %q", got)
	}
	if got := run(plain, "test -e "+deleted+" && echo there || echo gone"); got != "there" {
		t.Errorf("local lost the file the template deleted: %q", got)
	}
	if got := run(plain, added+"; "+replaced); got != "added\nv2" {
		t.Errorf("local does not see the host's /usr as it is now: %q", got)
	}
	// An unknown template is refused, naming it.
	if _, err := rayito.Create(ctx, p.opts(rayito.WithTemplate("nope"))...); !errors.Is(err, rayito.ErrInvalidArgument) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown template: %v", err)
	}
}

// TestTemplateStartAndFailure: a start command with a ready port is
// listening when Create returns; a failing step fails the build with its
// reason and step, and the log has its output.
func TestTemplateStartAndFailure(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: templates are built by the root local platform")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "site"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "site", "index.html"), []byte("served by the template\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tpl := template.FromBaseImage("local").
		Copy("site", "/home/user/site", template.WithOwner("user")).
		SetUser("user").
		Workdir("/home/user/site").
		SetStartCmd("python3 -m http.server 8000 --bind 127.0.0.1", 8000)
	if info, err := buildTemplate(ctx, t, p, "web", tpl, dir); err != nil {
		t.Fatalf("build: %+v %v", info, err)
	}
	sbx, err := rayito.Create(ctx, p.opts(rayito.WithTemplate("web"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(ctx)
	res, err := sbx.Commands.Run(ctx, `python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:8000/index.html").read().decode().strip())'`)
	if err != nil || strings.TrimSpace(res.Stdout) != "served by the template" {
		t.Fatalf("the start command's server right after Create: %v %+v", err, res)
	}
	if res, err := sbx.Commands.Run(ctx, "pwd"); err != nil || strings.TrimSpace(res.Stdout) != "/home/user/site" {
		t.Errorf("workdir: %v %+v", err, res)
	}

	bad := template.FromBaseImage("local").RunCmd("echo first step").RunCmd("echo the failing step says so >&2; exit 3")
	_, err = buildTemplate(ctx, t, p, "broken", bad, dir)
	var be *rayito.TemplateBuildError
	if !errors.As(err, &be) || !errors.Is(err, rayito.ErrTemplateBuild) || be.Reason != "run_step_failed" || be.Step != 1 {
		t.Fatalf("failing build: %v", err)
	}
	var logs bytes.Buffer
	if err := rayito.TemplateLogs(ctx, "broken", &logs, p.opts()...); err != nil || !strings.Contains(logs.String(), "the failing step says so") {
		t.Fatalf("logs: %v %q", err, logs.String())
	}
	if _, err := rayito.Create(ctx, p.opts(rayito.WithTemplate("broken"))...); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Errorf("a template whose only build failed: %v", err)
	}
	list, err := rayito.ListTemplates(ctx, p.opts()...)
	if err != nil || len(list) != 2 {
		t.Errorf("list: %+v %v", list, err)
	}
}

// TestSizesOnLocalPlatform: WithMemory names the sized image
// (<template>-<size>) and the root local platform gives the sandbox that
// memory limit, for local and for a template alike.
func TestSizesOnLocalPlatform(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: sizes are cgroup memory limits")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := buildTemplate(ctx, t, p, "tiny", template.FromBaseImage("local").RunCmd("mkdir -p /opt/tiny"), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		template string
		mib      int
		want     uint64
	}{{"", 512, 512 << 20}, {"tiny", 1000, 1024 << 20}, {"", 0, 2048 << 20}} {
		opts := p.opts(rayito.WithMemory(c.mib))
		if c.mib == 0 {
			opts = p.opts()
		}
		if c.template != "" {
			opts = append(opts, rayito.WithTemplate(c.template))
		}
		sbx, err := rayito.Create(ctx, opts...)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		info, err := sbx.Info(ctx)
		if err != nil || info.MemoryLimit != c.want {
			t.Errorf("%+v: memory limit %d, %v", c, info.MemoryLimit, err)
		}
		if c.template == "tiny" {
			if res, err := sbx.Commands.Run(ctx, "test -d /opt/tiny && echo yes"); err != nil || strings.TrimSpace(res.Stdout) != "yes" {
				t.Errorf("the sized template's layer: %v %+v", err, res)
			}
		}
		sbx.Kill(ctx)
	}
}
