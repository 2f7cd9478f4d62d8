package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// rayitoBin builds the real rayito binary once per test run, with the
// rayito-sandbox beside it that its local platforms then start sandboxes
// from, as releases ship them.
func rayitoBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rayito-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "rayito")
		for _, b := range []struct{ out, pkg string }{
			{binPath, "github.com/rayito-dev/rayito/cli/cmd/rayito"},
			{filepath.Join(dir, localvm.SandboxBinaryName), "github.com/rayito-dev/rayito/localvm/cmd/rayito-sandbox"},
		} {
			if out, err := exec.Command("go", "build", "-o", b.out, b.pkg).CombinedOutput(); err != nil {
				binErr = errors.New(string(out))
				return
			}
		}
	})
	if binErr != nil {
		t.Fatalf("build rayito: %v", binErr)
	}
	return binPath
}

// cliEnv points the CLI at a private endpoint and state.
func cliEnv(t *testing.T) []string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return append(os.Environ(), "RAYITO_ENDPOINT=http://"+addr, "XDG_STATE_HOME="+t.TempDir(), "RAYITO_BACKEND=")
}

type cliResult struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	return runCLIInput(t, env, "", args...)
}

func runCLIInput(t *testing.T, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	return runBinInput(t, rayitoBin(t), env, stdin, args...)
}

// runBinInput runs bin, a rayito binary, with env, stdin and args.
func runBinInput(t *testing.T, bin string, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
}

func TestCLIRun(t *testing.T) {
	env := cliEnv(t)
	r := runCLI(t, env, "run", "--", "sh", "-c", "id -un; echo hello")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "hello\n") {
		t.Fatalf("run: %+v", r)
	}
	if isRoot() && r.stdout != "user\nhello\n" {
		t.Fatalf("run as root: %q", r.stdout)
	}
	if r := runCLI(t, env, "run", "--", "sh", "-c", "echo err >&2; exit 7"); r.code != 7 || r.stderr != "err\n" {
		t.Fatalf("exit 7: %+v", r)
	}
	if r := runCLI(t, env, "run", "--json", "--env", "GREETING=hi there", "--", "sh", "-c", "echo $GREETING"); r.code != 0 || !strings.Contains(r.stdout, `"stdout": "hi there\n"`) {
		t.Fatalf("--json --env: %+v", r)
	}
	if r := runCLI(t, env, "run"); r.code != 2 {
		t.Fatalf("run without a command: %+v", r)
	}
	if r := runCLI(t, env, "run", "--env", "NOEQUALS", "--", "true"); r.code != 2 {
		t.Fatalf("bad --env: %+v", r)
	}
}

// Ctrl-C during `rayito run` kills the sandbox: its process is gone.
func TestCLIRunInterrupt(t *testing.T) {
	env := cliEnv(t)
	marker := "rayito-interrupt-" + filepath.Base(t.TempDir())
	cmd := exec.Command(rayitoBin(t), "run", "--", "sh", "-c", "echo ready; sleep 300; echo "+marker)
	cmd.Env = env
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("no ready line: %q %v", buf, err)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("exit after Ctrl-C: %v; stderr %q", err, errb.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("rayito run did not exit after Ctrl-C")
	}
	// The sandbox's processes are gone (allow the kernel a moment to
	// finish tearing down the namespace).
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := processesWith(marker)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, p := range pids {
				b, _ := os.ReadFile(filepath.Join("/proc", p, "cmdline"))
				desc = append(desc, p+": "+strings.ReplaceAll(string(b), "\x00", " "))
			}
			t.Fatalf("sandbox process survived Ctrl-C: %v\nstderr: %s", desc, errb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func processesWith(marker string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestCLILocalAndSandbox(t *testing.T) {
	env := cliEnv(t)
	state := t.TempDir()
	if r := runCLI(t, env, "local", "up", "--state-dir", state, "--json"); r.code != 0 {
		t.Fatalf("local up: %+v", r)
	}
	defer func() {
		if r := runCLI(t, env, "local", "down", "--state-dir", state); r.code != 0 {
			t.Errorf("local down: %+v", r)
		}
	}()
	var st struct {
		Running bool `json:"running"`
		Pid     int  `json:"pid"`
	}
	r := runCLI(t, env, "local", "status", "--state-dir", state, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || !st.Running || r.code != 0 {
		t.Fatalf("status: %+v", r)
	}
	// down from another state directory never says "not running" of the
	// platform that answers: it names the flag to give.
	if r := runCLI(t, env, "local", "down"); r.code != 1 || !strings.Contains(r.stderr, "--state-dir you gave `rayito local up`") {
		t.Fatalf("local down without its state dir: %+v", r)
	}
	r = runCLI(t, env, "sandbox", "create", "--json", "--metadata", "k=v")
	var created struct {
		ID          string `json:"id"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || created.ID == "" || r.code != 0 {
		logs, _ := os.ReadFile(filepath.Join(state, "serve.log"))
		t.Fatalf("create: %+v\nplatform log:\n%s", r, logs)
	}
	if created.AccessToken != "" {
		t.Fatal("create printed the access token without --show-token")
	}
	if r := runCLI(t, env, "sandbox", "exec", created.ID, "--", "uname", "-a"); r.code != 0 || !strings.Contains(r.stdout, "Linux") {
		t.Fatalf("exec: %+v", r)
	}
	if r := runCLI(t, env, "sandbox", "exec", created.ID, "--", "sh", "-c", "exit 3"); r.code != 3 {
		t.Fatalf("exec exit 3: %+v", r)
	}
	r = runCLI(t, env, "sandbox", "list", "--json")
	var items []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || len(items) == 0 || items[0].ID != created.ID {
		t.Fatalf("list: %+v", r)
	}
	if r := runCLI(t, env, "sandbox", "info", created.ID, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"k": "v"`) {
		t.Fatalf("info: %+v", r)
	}
	if r := runCLI(t, env, "sandbox", "kill", created.ID, "--json"); r.code != 0 {
		t.Fatalf("kill: %+v", r)
	}
	if r := runCLI(t, env, "sandbox", "exec", created.ID, "--", "true"); r.code == 0 {
		t.Fatalf("exec after kill: %+v", r)
	}
	if r := runCLI(t, env, "sandbox", "exec"); r.code != 2 {
		t.Fatalf("exec without args: %+v", r)
	}
	// kill --all ends every sandbox of this platform, and list hides
	// them (TERMINATED) unless --all.
	var ids []string
	for range 2 {
		r := runCLI(t, env, "sandbox", "create")
		if r.code != 0 {
			t.Fatalf("create: %+v", r)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	if r := runCLI(t, env, "sandbox", "kill", "--all"); r.code != 0 || !strings.Contains(r.stdout, ids[0]) || !strings.Contains(r.stdout, ids[1]) {
		t.Fatalf("kill --all: %+v", r)
	}
	for _, id := range ids {
		if r := runCLI(t, env, "sandbox", "exec", id, "--", "true"); r.code != 1 || !strings.Contains(r.stderr, "sandbox "+id+" ended") {
			t.Errorf("exec after kill --all: %+v", r)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := runCLI(t, env, "sandbox", "list")
		if !strings.Contains(r.stdout, ids[0]) && !strings.Contains(r.stdout, ids[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list still shows killed sandboxes: %+v", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := runCLI(t, env, "sandbox", "list", "--all"); !strings.Contains(r.stdout, ids[0]) {
		t.Errorf("list --all: %+v", r)
	}
}

// TestCLIServeAddrAndLogsFollow: `local serve --addr` listens where asked,
// the global --endpoint reaches it, and `sandbox logs --follow` prints
// rayd's log and returns once the sandbox is killed.
func TestCLIServeAddrAndLogsFollow(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	// RAYITO_ENDPOINT names a port nobody listens on: only the flags lead
	// to the platform.
	env := cliEnv(t)
	state := t.TempDir()
	serve := exec.Command(rayitoBin(t), "local", "serve", "--addr", addr, "--state-dir", state)
	serve.Env = env
	var serveLog bytes.Buffer
	serve.Stderr = &serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- serve.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = serve.Process.Kill()
			<-done
		}
	})
	ep := "http://" + addr
	var id string
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := runCLI(t, env, "--endpoint", ep, "sandbox", "create")
		if r.code == 0 {
			id = strings.TrimSpace(r.stdout)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create through --endpoint %s: %+v\nserve: %s", ep, r, serveLog.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := runCLI(t, env, "sandbox", "list"); r.code != 1 || !strings.Contains(r.stderr, "no local platform at") {
		t.Errorf("without --endpoint the CLI reached a platform: %+v", r)
	}
	follow := exec.Command(rayitoBin(t), "--endpoint", ep, "sandbox", "logs", "--follow", "--state-dir", state, id)
	follow.Env = env
	var out bytes.Buffer
	follow.Stdout = &out
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	time.Sleep(300 * time.Millisecond)
	if r := runCLI(t, env, "--endpoint", ep, "sandbox", "kill", id); r.code != 0 {
		t.Fatalf("kill: %+v", r)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("logs --follow: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = follow.Process.Kill()
		t.Fatal("logs --follow did not return after the sandbox was killed")
	}
	if !strings.Contains(out.String(), "rayd listening") {
		t.Errorf("logs --follow printed %q, want rayd's log", out.String())
	}
}

// TestCLIPauseResumeKeepsShell: `rayito sandbox pause` and `resume` keep a
// terminal's shell, its state (a variable) and a running `top` alive: top
// goes on refreshing after the resume, and the shell still knows the
// variable once top quits.
func TestCLIPauseResumeKeepsShell(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pause and resume need the root platform's cgroup freezer; run as root")
	}
	env := cliEnv(t)
	state, xdg := t.TempDir(), ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "XDG_STATE_HOME="); ok {
			xdg = v
		}
	}
	if r := runCLI(t, env, "local", "up", "--state-dir", state); r.code != 0 {
		t.Fatalf("local up: %+v", r)
	}
	defer runCLI(t, env, "local", "down", "--state-dir", state)
	r := runCLI(t, env, "sandbox", "create")
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	id := strings.TrimSpace(r.stdout)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var endpoint string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "RAYITO_ENDPOINT="); ok {
			endpoint = v
		}
	}
	sbx, err := rayito.Connect(ctx, id, rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(endpoint),
		rayito.WithTokenStoreDir(filepath.Join(xdg, "rayito", "tokens")))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var screen bytes.Buffer
	snapshot := func() string { mu.Lock(); defer mu.Unlock(); return screen.String() }
	pty, err := sbx.Pty.Create(ctx, rayito.OnData(func(b []byte) { mu.Lock(); screen.Write(b); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(snapshot()); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: screen %q", what, snapshot())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := pty.SendInput(ctx, []byte("KEPT=4242; top -d 0.2\n")); err != nil {
		t.Fatal(err)
	}
	refreshes := func(s string) int { return strings.Count(s, "load average") }
	waitFor("top running", func(s string) bool { return refreshes(s) >= 2 })

	if r := runCLI(t, env, "sandbox", "pause", id); r.code != 0 {
		t.Fatalf("pause: %+v", r)
	}
	if r := runCLI(t, env, "sandbox", "info", id); !strings.Contains(r.stdout, "SUSPENDED") {
		t.Fatalf("info after pause: %+v", r)
	}
	before := refreshes(snapshot())
	time.Sleep(time.Second)
	if n := refreshes(snapshot()); n > before+1 {
		t.Fatalf("top refreshed %d times while paused", n-before)
	}
	if r := runCLI(t, env, "sandbox", "resume", id); r.code != 0 {
		t.Fatalf("resume: %+v", r)
	}
	waitFor("top refreshing after the resume", func(s string) bool { return refreshes(s) >= before+3 })
	if err := pty.SendInput(ctx, []byte("q")); err != nil {
		t.Fatal(err)
	}
	// Type the next line only at the shell's prompt: top, still reading
	// the terminal when q arrives, may swallow whatever follows it (a
	// GOGC=10 run once lost the echo that way).
	waitFor("the prompt after top", func(s string) bool {
		i := strings.LastIndex(s, "\x1b[?1l") // top's exit: cursor keys back to normal
		return i >= 0 && strings.Contains(s[i:], "$ ")
	})
	if err := pty.SendInput(ctx, []byte("echo \"kept=$KEPT\"\n")); err != nil {
		t.Fatal(err)
	}
	waitFor("the shell's variable after the resume", func(s string) bool { return strings.Contains(s, "kept=4242") })
	_ = pty.Kill(ctx)
}
