package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// envValue returns the value of key in env.
func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// background runs the rayito binary with args and returns a function that
// waits for it and returns its result.
func background(t *testing.T, env []string, args ...string) func() cliResult {
	t.Helper()
	cmd := exec.Command(rayitoBin(t), args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() cliResult {
		t.Helper()
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return cliResult{code: code, stdout: out.String(), stderr: errb.String()}
	}
}

// wantEnded checks the one rule for a sandbox that ended under run or
// exec: exit code want and exactly one stderr line "rayito: sandbox ID
// ended: REASON" (ID any sandbox id when id is "").
func wantEnded(t *testing.T, what string, r cliResult, want int, id, reason string) {
	t.Helper()
	idPat := regexp.QuoteMeta(id)
	if id == "" {
		idPat = `microvm-[0-9a-f-]+`
	}
	line := regexp.MustCompile(`(?m)^rayito: sandbox ` + idPat + ` ended: ` + regexp.QuoteMeta(reason) + `$`)
	if r.code != want || len(line.FindAllString(r.stderr, -1)) != 1 || strings.Count(r.stderr, "ended:") != 1 {
		t.Errorf("%s: exit %d, stderr %q; want exit %d and one line 'rayito: sandbox %s ended: %s'", what, r.code, r.stderr, want, id, reason)
	}
}

// settle gives background commands the time to start theirs (a local
// sandbox answers in milliseconds).
func settle() { time.Sleep(2 * time.Second) }

// TestCLISandboxEndsUnderCommand: whichever way a sandbox ends under
// `rayito run` or `rayito sandbox exec`, the CLI says so in one stderr
// line ("rayito: sandbox ID ended: REASON") and exits 124 when the
// sandbox's time ran out (its deadline: timeout; its maximum duration:
// max_duration), 137 when it was killed or ended otherwise
// (killed_by_user, its platform gone). A user-set --timeout reads
// timeout in info and list, and the ended sandbox's token leaves the
// store. Against a real platform started by `rayito local up`.
func TestCLISandboxEndsUnderCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local platform and waits out sandbox deadlines")
	}
	env := cliEnv(t)
	state := t.TempDir()
	if r := runCLI(t, env, "local", "up", "--state-dir", state, "--prebooted", "0"); r.code != 0 {
		t.Fatalf("local up: %+v", r)
	}
	defer runCLI(t, env, "local", "down", "--state-dir", state)
	tokens := filepath.Join(envValue(env, "XDG_STATE_HOME"), "rayito", "tokens")
	create := func(args ...string) string {
		t.Helper()
		r := runCLI(t, env, append([]string{"sandbox", "create"}, args...)...)
		if r.code != 0 {
			t.Fatalf("create %v: %+v", args, r)
		}
		return strings.TrimSpace(r.stdout)
	}

	for _, args := range [][]string{{"run", "--help"}, {"sandbox", "exec", "--help"}} {
		r := runCLI(t, env, args...)
		for _, want := range []string{"124 past --timeout, or when the sandbox's time ran out", "137 when the sandbox was killed", "rayito: sandbox ID ended: REASON"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v: no %q in %q", args, want, r.stdout)
			}
		}
	}

	// Killed under exec (also with --json) and under run.
	id := create()
	execWait := background(t, env, "sandbox", "exec", id, "--", "sleep", "60")
	jsonID := create()
	jsonWait := background(t, env, "sandbox", "exec", "--json", jsonID, "--", "sleep", "60")
	runWait := background(t, env, "run", "--", "sleep", "60")
	settle()
	if r := runCLI(t, env, "sandbox", "kill", "--all"); r.code != 0 {
		t.Fatalf("kill --all: %+v", r)
	}
	wantEnded(t, "exec, killed", execWait(), 137, id, "killed_by_user")
	r := jsonWait()
	wantEnded(t, "exec --json, killed", r, 137, jsonID, "killed_by_user")
	var res struct {
		SandboxEnded string `json:"sandbox_ended"`
		ExitCode     int    `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.SandboxEnded != "killed_by_user" {
		t.Errorf("exec --json, killed: stdout %q (%v)", r.stdout, err)
	}
	wantEnded(t, "run, killed", runWait(), 137, "", "killed_by_user")

	// A --timeout set alone is a deadline: timeout, 124; info and list
	// say timeout; the token is gone once the CLI saw the end.
	id = create("--timeout", "3s")
	if _, err := os.Stat(filepath.Join(tokens, id)); err != nil {
		t.Fatalf("no stored token: %v", err)
	}
	wantEnded(t, "exec, --timeout alone", runCLI(t, env, "sandbox", "exec", id, "--", "sleep", "60"), 124, id, "timeout")
	waitCLITerminated(t, env, id)
	if r := runCLI(t, env, "sandbox", "info", id); !regexp.MustCompile(`(?m)^reason: +timeout$`).MatchString(r.stdout) {
		t.Errorf("info of a --timeout sandbox: %+v", r)
	}
	if r := runCLI(t, env, "sandbox", "list", "--all"); !regexp.MustCompile(`(?m)^` + id + ` +TERMINATED .* timeout$`).MatchString(r.stdout) {
		t.Errorf("list of a --timeout sandbox: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(tokens, id)); !os.IsNotExist(err) {
		t.Errorf("the token of a sandbox ended by its timeout stayed: %v", err)
	}

	// With --on-timeout kill: the same.
	id = create("--timeout", "3s", "--on-timeout", "kill")
	wantEnded(t, "exec, --on-timeout kill", runCLI(t, env, "sandbox", "exec", id, "--", "sleep", "60"), 124, id, "timeout")

	// The platform's maximum duration (a sandbox made through the API
	// with no deadline): max_duration, 124.
	id = runMaxDuration(t, envValue(env, "RAYITO_ENDPOINT"), tokens, 5)
	wantEnded(t, "exec, max duration", runCLI(t, env, "sandbox", "exec", id, "--", "sleep", "60"), 124, id, "max_duration")

	// The platform goes away (local down) under exec: 137.
	id = create()
	execWait = background(t, env, "sandbox", "exec", id, "--", "sleep", "60")
	settle()
	if r := runCLI(t, env, "local", "down", "--state-dir", state); r.code != 0 {
		t.Fatalf("local down: %+v", r)
	}
	r = execWait()
	if r.code != 137 || !regexp.MustCompile(`(?m)^rayito: sandbox `+id+` ended: (platform_shutdown.*|unknown \(its platform stopped answering\))$`).MatchString(r.stderr) {
		t.Errorf("exec under local down: %+v", r)
	}
}

// waitCLITerminated waits until `sandbox info` says TERMINATED.
func waitCLITerminated(t *testing.T, env []string, id string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		if r := runCLI(t, env, "sandbox", "info", "--json", id); strings.Contains(r.stdout, `"state": "TERMINATED"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not TERMINATED after a minute", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runMaxDuration starts a sandbox through the platform's API with a
// maximum duration of seconds and no deadline (what the SDK sends without
// WithTimeout, with a duration short enough for a test), stores its token
// where the CLI reads it, and returns its id.
func runMaxDuration(t *testing.T, endpoint, tokens string, seconds int) string {
	t.Helper()
	tok, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := accesstoken.Digest(tok)
	payload, err := runpayload.Encode(&runpayload.Payload{V: runpayload.Version, TokenSHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	mv, err := microvms.New(endpoint, microvms.Unsigned())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vm, err := mv.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{ImageIdentifier: "local", RunHookPayload: payload, MaximumDurationInSeconds: seconds})
	if err != nil {
		t.Fatal(err)
	}
	if vm.State != microvmsapi.StateRunning {
		t.Fatalf("RunMicrovm: %s %q", vm.State, vm.StateReason)
	}
	if err := os.MkdirAll(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tokens, vm.MicrovmID), []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	return vm.MicrovmID
}
