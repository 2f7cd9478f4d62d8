package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// mcpClientDir installs the pinned MCP TypeScript SDK and returns
// tests/mcp.
func mcpClientDir(t *testing.T) string { return mcpNpm.install(t) }

// mcpOut is what client.mjs prints.
type mcpOut struct {
	Mode            string   `json:"mode"`
	Tools           []string `json:"tools"`
	Sandbox         string   `json:"sandbox"`
	Left            string   `json:"left"`
	RunCode         bool     `json:"run_code"`
	KillThenRun     string   `json:"kill_then_run"`
	BadID           string   `json:"bad_id"`
	NoToken         int      `json:"no_token"`
	WrongToken      int      `json:"wrong_token"`
	ForeignHost     int      `json:"foreign_host"`
	ForeignOrigin   int      `json:"foreign_origin"`
	OwnOrigin       int      `json:"own_origin"`
	SDKWithoutToken string   `json:"sdk_without_token"`
}

// runMCPClient runs client.mjs in mode with env and decodes its output.
func runMCPClient(t *testing.T, dir, mode string, env []string) mcpOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs", mode)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("client.mjs %s: %v\nstdout: %s\nstderr: %s", mode, err, stdout.String(), stderr.String())
	}
	var out mcpOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("client.mjs %s printed %q: %v (stderr: %s)", mode, stdout.String(), err, stderr.String())
	}
	t.Logf("client.mjs %s: %s", mode, strings.TrimSpace(stdout.String()))
	return out
}

// checkMCPScenario checks what both transports' scenario saw, and that the
// server killed the sandbox it left when it stopped.
func checkMCPScenario(t *testing.T, p *platform, out mcpOut) {
	t.Helper()
	if len(out.Tools) != 8 || out.Sandbox == "" || out.Left == "" {
		t.Errorf("scenario: %+v", out)
	}
	if !out.RunCode {
		t.Error("run_code was not tried")
	}
	if !strings.Contains(out.KillThenRun, out.Sandbox) {
		t.Errorf("run_command after kill: %q", out.KillThenRun)
	}
	if !strings.Contains(out.BadID, "sandbox id") {
		t.Errorf("a bad sandbox id: %q", out.BadID)
	}
	infos, err := rayito.List(t.Context(), rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(p.endpoint))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if (in.ID == out.Left || in.ID == out.Sandbox) && in.State != "TERMINATED" && in.State != "TERMINATING" {
			t.Errorf("sandbox %s is %s after the MCP server stopped", in.ID, in.State)
		}
	}
}

// TestMCPClient drives `rayito mcp` with the official MCP TypeScript SDK
// over stdio and over HTTP, against a local platform.
func TestMCPClient(t *testing.T) {
	t.Parallel() // a long wait on sandboxes: beside the other parallel tests (each has its own subnet, testSubnet)
	if !isRoot() {
		t.Skip("needs root: the root local platform (the sandboxes' code interpreter and isolation)")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import ipykernel").Run(); err != nil {
		t.Skip("python3-ipykernel is not installed (make deps): run_code needs it")
	}
	dir := mcpClientDir(t)
	bin := rayitoBin(t)
	p := startPlatform(t, "")
	t.Cleanup(func() { p.stop(true) })
	env := append(os.Environ(), "RAYITO_ENDPOINT="+p.endpoint, "XDG_STATE_HOME="+t.TempDir(), "RAYITO_BACKEND=", "RAYITO_BIN="+bin, "MCP_KERNEL=1")

	t.Run("stdio", func(t *testing.T) {
		out := runMCPClient(t, dir, "stdio", env)
		checkMCPScenario(t, p, out)
	})

	t.Run("http", func(t *testing.T) {
		srv := exec.Command(bin, "mcp", "--http", "127.0.0.1:0", "--json")
		srv.Env = env
		stderr, err := srv.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		var info struct {
			Transport, URL, Token string
		}
		dec := json.NewDecoder(stderr)
		if err := dec.Decode(&info); err != nil {
			_ = srv.Process.Kill()
			t.Fatalf("rayito mcp --json: %v", err)
		}
		var rest bytes.Buffer
		drained := make(chan struct{})
		go func() {
			_, _ = io.Copy(&rest, io.MultiReader(dec.Buffered(), stderr))
			close(drained)
		}()
		if info.Transport != "http" || !strings.HasPrefix(info.URL, "http://127.0.0.1:") || len(info.Token) != 64 {
			t.Errorf("startup info: %+v", info)
		}
		out := runMCPClient(t, dir, "http", append(env, "MCP_URL="+info.URL, "MCP_TOKEN="+info.Token))
		if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() { <-drained; waited <- srv.Wait() }()
		select {
		case err := <-waited:
			if err != nil {
				t.Errorf("rayito mcp after SIGTERM: %v (stderr: %s)", err, rest.String())
			}
		case <-time.After(time.Minute):
			_ = srv.Process.Kill()
			t.Fatal("rayito mcp did not stop on SIGTERM")
		}
		if !strings.Contains(rest.String(), "killed 1 sandbox it created") {
			t.Errorf("stderr at the end: %q", rest.String())
		}
		if out.NoToken != 401 || out.WrongToken != 401 || out.ForeignHost != 421 || out.ForeignOrigin != 403 {
			t.Errorf("refusals: no token %d, wrong token %d, foreign host %d, foreign origin %d", out.NoToken, out.WrongToken, out.ForeignHost, out.ForeignOrigin)
		}
		if out.OwnOrigin != 200 {
			t.Errorf("a request with the token and its own origin: %d", out.OwnOrigin)
		}
		if out.SDKWithoutToken == "connected" {
			t.Error("the SDK's client connected without the token")
		}
		checkMCPScenario(t, p, out)
	})
}
