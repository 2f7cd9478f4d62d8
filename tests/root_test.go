package tests

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// The sandbox E2B programs expect (issue 27): the local platform's
// local-root template allows root (commands as root, a working sudo for
// the sandbox's user, a home for root), the default template does not
// (root refused, sudo says why), and both have python.
func TestRootTemplate(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: only the root local platform has the local-root template (rayd runs as root)")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(sbx *rayito.Sandbox, cmd string, opts ...rayito.CommandOption) *rayito.CommandResult {
		t.Helper()
		res, err := sbx.Commands.Run(ctx, cmd, opts...)
		var exit *rayito.CommandExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res
	}
	_, hostPython := exec.LookPath("python3")

	root, err := rayito.Create(ctx, p.opts(rayito.WithTemplate(rayito.LocalRootTemplate))...)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Kill(ctx)
	if info, err := root.Info(ctx); err != nil || !info.RootAllowed || info.Template != "local-root" {
		t.Fatalf("local-root info: %+v %v", info, err)
	}
	for cmd, want := range map[string]string{
		"sudo id -u":                         "0",
		"sudo -u user id -un":                "user",
		"sudo sh -c 'echo $HOME $SUDO_USER'": "/root user",
		// E2B's suite: a command's own envs do not reach the next one.
		`sudo echo "x$FOO"`: "x",
		"command -v sudo":   "/usr/local/bin/sudo",
	} {
		if res := run(root, cmd); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != want {
			t.Errorf("local-root: %s: %d %q %q, want %q", cmd, res.ExitCode, res.Stdout, res.Stderr, want)
		}
	}
	if res := run(root, "id -u; touch /root/made-by-root && ls /root", rayito.WithUser("root")); res.ExitCode != 0 || res.Stdout != "0\nmade-by-root\n" {
		t.Errorf("local-root: a command as root: %+v", res)
	}
	// The user cannot enter root's home; sudo can.
	if res := run(root, "ls /root"); res.ExitCode == 0 {
		t.Errorf("the user listed /root: %q", res.Stdout)
	}
	// Killing sudo kills what it started (E2B's commands.kill).
	h, err := root.Commands.Start(ctx, "sudo sleep 300")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if res := run(root, "pgrep -x sleep"); res.ExitCode != 0 {
		t.Fatalf("sudo sleep does not run: %+v", res)
	}
	if err := h.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for run(root, "pgrep -x sleep").ExitCode == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the command sudo started outlived sudo")
		}
		time.Sleep(200 * time.Millisecond)
	}

	plain := p.create(ctx)
	defer plain.Kill(ctx)
	if info, err := plain.Info(ctx); err != nil || info.RootAllowed {
		t.Fatalf("local info: %+v %v", info, err)
	}
	if _, err := plain.Commands.Run(ctx, "id -u", rayito.WithUser("root")); !errors.Is(err, rayito.ErrPermissionDenied) {
		t.Errorf("local: a command as root: %v", err)
	}
	if res := run(plain, "sudo id -u"); res.ExitCode != 1 || !strings.Contains(res.Stderr, "sudo: root is not allowed in this sandbox") || res.Stdout != "" {
		t.Errorf("local: sudo: %+v", res)
	}

	if hostPython == nil {
		for _, sbx := range []*rayito.Sandbox{root, plain} {
			if res := run(sbx, "python -c 'print(6*7)'"); res.ExitCode != 0 || res.Stdout != "42\n" {
				t.Errorf("python: %+v", res)
			}
		}
	}
}
