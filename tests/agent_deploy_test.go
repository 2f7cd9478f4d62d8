package tests

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// deployAgentPy answers whether GITHUB_TOKEN is set (never its value) and
// prints the value at start, before it serves: the host redacts its
// start-up output.
const deployAgentPy = `import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

print("agent starting with GITHUB_TOKEN=" + os.environ.get("GITHUB_TOKEN", ""), flush=True)
print("stderr at start " + os.environ.get("GITHUB_TOKEN", ""), file=sys.stderr, flush=True)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self._json({"status": "Healthy"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(n) or b"{}")
        self._json({"answer": "echo: " + str(payload.get("prompt", "")),
                    "github_token_set": bool(os.environ.get("GITHUB_TOKEN"))})

    def _json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
`

// environScan lists, for every process of the sandbox, whether its
// environment or its command line holds the value whose SHA-256 is argv[1]
// (of length argv[2]): it compares hashes of every window of that length,
// so the value itself is never passed nor printed.
const environScan = `import hashlib, os, sys
want, n = sys.argv[1], int(sys.argv[2])
me = os.getpid()
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    if pid == me:
        continue
    try:
        comm = open("/proc/%d/comm" % pid).read().strip()
        ppid = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1]
        for kind in ("environ", "cmdline"):
            b = open("/proc/%d/%s" % (pid, kind), "rb").read()
            hit = any(hashlib.sha256(b[i:i + n]).hexdigest() == want for i in range(len(b) - n + 1))
            print(pid, ppid, comm, kind, "HIT" if hit else "clean")
    except OSError:
        pass
`

// TestAgentDeploy: `rayito agent deploy --target microvm` on the local
// platform, end to end: the agent answers `rayito agent invoke`, refuses
// a call without the service token, gets GITHUB_TOKEN from the local
// secret store (its own environment holds the value: that is the feature;
// so does its host's, where T38 has the values travel), whose value
// never reaches a CLI output, the platform's logs, the template or any
// other process the sandbox's user can read; `rayito agent delete`
// removes the sandbox, the template and the record.
func TestAgentDeploy(t *testing.T) {
	t.Parallel() // a long wait on sandboxes: beside the other parallel tests; the only one whose platform the CLI starts (the default subnet: testSubnet)
	if !isRoot() {
		t.Skip("TestAgentDeploy needs root: the local platform's sandboxes (run the tests as root)")
	}
	start := time.Now()
	env := cliEnv(t)
	secrets := t.TempDir()
	xdg := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "XDG_STATE_HOME="); ok {
			xdg = v
		}
	}
	env = append(env, "RAYITO_SECRETS_DIR="+secrets)
	state := t.TempDir()

	// The host, static, for the sandbox.
	host := filepath.Join(t.TempDir(), "rayito-agent-host")
	build := exec.Command("go", "build", "-o", host, "github.com/rayito-dev/rayito/agenthost/cmd/rayito-agent-host")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build rayito-agent-host: %v\n%s", err, out)
	}
	rayitoBin(t)
	t.Logf("built rayito and rayito-agent-host in %s", time.Since(start).Round(time.Millisecond))

	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	canary := "ghp_canary" + hex.EncodeToString(b)

	var outputs []string // every CLI output, checked for the canary
	cli := func(args ...string) cliResult {
		t.Helper()
		r := runCLI(t, env, args...)
		outputs = append(outputs, strings.Join(args, " ")+"\n"+r.stdout+r.stderr)
		return r
	}
	defer func() {
		for _, o := range outputs {
			if strings.Contains(o, canary) {
				t.Errorf("the canary is in a CLI output: %s", strings.SplitN(o, "\n", 2)[0])
			}
		}
	}()

	if r := cli("local", "up", "--state-dir", state, "--json"); r.code != 0 {
		t.Fatalf("local up: %+v", r)
	}
	t.Logf("local up after %s", time.Since(start).Round(time.Millisecond))
	defer func() {
		down := time.Now()
		if r := runCLI(t, env, "local", "down", "--state-dir", state); r.code != 0 {
			t.Errorf("local down: %+v", r)
		}
		t.Logf("local down in %s", time.Since(down).Round(time.Millisecond))
		// The platform's logs and state hold no canary (checked after
		// down: everything is flushed).
		checkNoCanary(t, state, canary)
	}()

	if r := runCLIInput(t, env, canary, "secret", "create", "github-token"); r.code != 0 || strings.Contains(r.stdout+r.stderr, canary) {
		t.Fatalf("secret create: exit %d", r.code)
	}

	dir := filepath.Join(t.TempDir(), "e2e-bot")
	if r := cli("agent", "init", dir); r.code != 0 {
		t.Fatalf("agent init: %+v", r)
	}
	toml, err := os.ReadFile(filepath.Join(dir, "rayito-agent.toml"))
	if err != nil {
		t.Fatal(err)
	}
	toml = append(toml, "\n[secret_env]\nGITHUB_TOKEN = \"github-token\"\n"...)
	if err := os.WriteFile(filepath.Join(dir, "rayito-agent.toml"), toml, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.py"), []byte(deployAgentPy), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cli("agent", "plan", dir); r.code != 0 || !strings.Contains(r.stdout, "GITHUB_TOKEN") || !strings.Contains(r.stdout, "secret github-token") {
		t.Fatalf("agent plan: %+v", r)
	}

	r := cli("agent", "deploy", "--json", "--host-binary", host, "--ready-timeout", "45s", dir)
	if r.code != 0 {
		t.Fatalf("agent deploy: %+v", r)
	}
	var dep struct {
		SandboxID string `json:"sandbox_id"`
		Template  string `json:"template"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &dep); err != nil || dep.SandboxID == "" || dep.Template != "agent-e2e-bot" {
		t.Fatalf("deploy --json: %q %v", r.stdout, err)
	}
	if r := cli("sandbox", "logs", "--state-dir", state, dep.SandboxID); r.code != 0 {
		t.Errorf("sandbox logs: %+v", r)
	}
	t.Logf("deployed in %s after %s", dep.SandboxID, time.Since(start).Round(time.Millisecond))
	recPath := filepath.Join(xdg, "rayito", "agents", "e2e-bot.json")
	if st, err := os.Stat(recPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the record: %v %v", st, err)
	}

	r = cli("agent", "invoke", "--payload", `{"prompt": "hello"}`, "e2e-bot")
	if r.code != 0 {
		t.Fatalf("agent invoke: %+v", r)
	}
	var answer struct {
		Answer string `json:"answer"`
		Set    bool   `json:"github_token_set"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &answer); err != nil || answer.Answer != "echo: hello" || !answer.Set {
		t.Fatalf("agent invoke: %q %v", r.stdout, err)
	}
	// --json wraps the answer with its status; --payload - reads stdin.
	r = runCLIInput(t, env, `{"prompt": "from stdin"}`, "agent", "invoke", "--json", "--payload", "-", "e2e-bot")
	outputs = append(outputs, "agent invoke --json\n"+r.stdout+r.stderr)
	var wrapped struct {
		Agent  string `json:"agent"`
		Status int    `json:"status"`
		Answer struct {
			Answer string `json:"answer"`
		} `json:"answer"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &wrapped); r.code != 0 || err != nil || wrapped.Status != 200 || wrapped.Agent != "e2e-bot" || wrapped.Answer.Answer != "echo: from stdin" {
		t.Errorf("agent invoke --json --payload -: %+v %v", r, err)
	}
	if r := cli("agent", "list", "--json"); r.code != 0 || !strings.Contains(r.stdout, dep.SandboxID) || strings.Contains(r.stdout, "service_token") {
		t.Errorf("agent list: %+v", r)
	}

	// Without the service token, or with another, the host refuses.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var endpoint string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "RAYITO_ENDPOINT="); ok {
			endpoint = v
		}
	}
	sbx, err := rayito.Connect(ctx, dep.SandboxID, rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(endpoint),
		rayito.WithTokenStoreDir(filepath.Join(xdg, "rayito", "tokens")))
	if err != nil {
		t.Fatal(err)
	}
	port, err := sbx.Port(8088)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer "} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, port.URL()+"/invocations", strings.NewReader(`{"prompt":"x"}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := port.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("invocation with Authorization %q: %s, want 401", auth, resp.Status)
		}
	}

	// The agent's start-up output, as rayd still holds it for the host's
	// process: the value redacted, the host's log counting the variables.
	procs, err := sbx.Commands.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hostPid := 0
	for _, p := range procs {
		if p.Tag == "rayito-agent-host" {
			hostPid = p.Pid
			if strings.Contains(strings.Join(p.Args, " "), canary) {
				t.Error("the canary is in the host's arguments")
			}
		}
	}
	if hostPid == 0 {
		t.Fatalf("no process tagged rayito-agent-host: %+v", procs)
	}
	var mu sync.Mutex
	var hostOut, hostErr strings.Builder
	attach, stopAttach := context.WithTimeout(ctx, 10*time.Second)
	_, err = sbx.Commands.Connect(attach, hostPid,
		rayito.OnStdout(func(b []byte) { mu.Lock(); hostOut.Write(b); mu.Unlock() }),
		rayito.OnStderr(func(b []byte) { mu.Lock(); hostErr.Write(b); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		o, e := hostOut.String(), hostErr.String()
		mu.Unlock()
		if strings.Contains(o, "agent starting") && strings.Contains(e, "secret_env_loaded") && strings.Contains(e, "stderr at start") || time.Now().After(deadline) {
			break
		}
	}
	stopAttach()
	mu.Lock()
	o, e := hostOut.String(), hostErr.String()
	mu.Unlock()
	if strings.Contains(o+e, canary) {
		t.Error("the canary is in the host's output")
	}
	if !strings.Contains(o, "agent starting with GITHUB_TOKEN=[redacted]") || !strings.Contains(e, "stderr at start [redacted]") {
		t.Errorf("the agent's start-up lines, redacted: stdout %q stderr %q", o, e)
	}
	if !strings.Contains(e, `"msg":"secret_env_loaded","count":1`) {
		t.Errorf("the host's log lacks secret_env_loaded count=1: %q", e)
	}

	// The value is in the agent's own environment (the feature) and, by
	// the security model (T38: "on MicroVMs the values travel only in the
	// host process environment"), in its parent's, the host's, whose
	// initial environment /proc keeps although the host unsets the
	// variables at start; in no other process's environment or command
	// line. The service token (on the host's stdin) is in none. The scan
	// runs as the sandbox's user (rayd refuses root unless
	// RAYITO_ALLOW_ROOT): the host and the agent run as that user; root's
	// processes (rayd, init) are not readable and not listed.
	rec, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	var record struct {
		Token string `json:"service_token"`
	}
	if err := json.Unmarshal(rec, &record); err != nil || len(record.Token) < 32 {
		t.Fatalf("the record's token: %v", err)
	}
	scan := func(what, value string) (hits map[string][]string, scanned int) {
		t.Helper()
		h := sha256.Sum256([]byte(value))
		r := cli("sandbox", "exec", dep.SandboxID, "--", "python3", "-c", environScan, hex.EncodeToString(h[:]), strconv.Itoa(len(value)))
		if r.code != 0 {
			t.Fatalf("%s scan: %+v", what, r)
		}
		hits = map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			f := strings.Fields(line) // pid ppid comm kind HIT|clean
			if len(f) != 5 {
				continue
			}
			scanned++
			if f[4] == "HIT" {
				hits[f[2]+" "+f[3]] = append(hits[f[2]+" "+f[3]], f[0]+" "+f[1])
			}
		}
		t.Logf("%s scan: %d processes, hits %v", what, scanned/2, hits)
		return hits, scanned
	}
	hits, scanned := scan("canary", canary)
	agent, hostHits := hits["python3 environ"], hits["rayito-agent-ho environ"]
	if scanned < 4 || len(agent) != 1 || len(hostHits) != 1 || strings.Fields(agent[0])[1] != strings.Fields(hostHits[0])[0] {
		t.Errorf("want the canary in the agent's environment and its host's: %v", hits)
	}
	for k, v := range hits {
		if k != "python3 environ" && k != "rayito-agent-ho environ" {
			t.Errorf("the canary is in the %s of %v", k, v)
		}
	}
	if hits, _ := scan("service token", record.Token); len(hits) != 0 {
		t.Errorf("the service token is in a process's environment or command line: %v", hits)
	}

	// A service, not a task: its sandbox lives the platform's cap (8 h,
	// --max-lifetime) and, paused (by --idle or by hand), is resumed by
	// the next invocation, its host still serving.
	var info struct {
		State     string    `json:"state"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if r := cli("sandbox", "info", "--json", dep.SandboxID); r.code != 0 || json.Unmarshal([]byte(r.stdout), &info) != nil ||
		time.Until(info.ExpiresAt) < 7*time.Hour {
		t.Errorf("the agent's sandbox should live about 8 h: %+v", r)
	}
	if r := cli("sandbox", "pause", dep.SandboxID); r.code != 0 {
		t.Fatalf("sandbox pause: %+v", r)
	}
	r = cli("agent", "invoke", "--payload", `{"prompt": "after a pause"}`, "e2e-bot")
	if r.code != 0 || !strings.Contains(r.stdout, "echo: after a pause") {
		t.Errorf("agent invoke of a paused agent: %+v", r)
	}
	if r := cli("agent", "deploy", "--max-lifetime", "9h", "--host-binary", host, dir); r.code != 2 || !strings.Contains(r.stderr, "--max-lifetime") {
		t.Errorf("deploy --max-lifetime 9h: %+v", r)
	}

	// delete removes the sandbox, the template and the record.
	if r := cli("agent", "delete", "e2e-bot"); r.code != 0 {
		t.Fatalf("agent delete: %+v", r)
	}
	if _, err := os.Stat(recPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record is still there: %v", err)
	}
	if r := cli("sandbox", "exec", dep.SandboxID, "--", "true"); r.code == 0 {
		t.Errorf("the agent's sandbox still runs: %+v", r)
	}
	if r := cli("template", "list"); strings.Contains(r.stdout, "agent-e2e-bot") {
		t.Errorf("the template is still there: %+v", r)
	}
	if r := cli("agent", "invoke", "e2e-bot"); r.code != 1 || !strings.Contains(r.stderr, "not deployed") {
		t.Errorf("invoke after delete: %+v", r)
	}
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}

// isRootfs reports whether dir is a root file system (an image, a
// template layer, a sandbox's disk): it has etc/ and usr/.
func isRootfs(dir string) bool {
	for _, sub := range []string{"etc", "usr"} {
		if st, err := os.Stat(filepath.Join(dir, sub)); err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}

// logLike is a file name the platform logs or records in.
func logLike(name string) bool {
	for _, s := range []string{".log", ".json", ".jsonl", ".txt", ".out", ".err"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return strings.Contains(name, "log")
}

// checkNoCanary walks the platform's state directory: no log, record or
// file a template build added holds the canary (base systems are not
// read).
func checkNoCanary(t *testing.T, dir, canary string) {
	t.Helper()
	files, skipped := 0, 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		// A template's layers: the base system (the host's, shared) is
		// skipped, what the build added (the project, the host) is read
		// whole: the canary is never in the image.
		layer := strings.Contains(p, string(filepath.Separator)+"layers"+string(filepath.Separator))
		if d.IsDir() && (isRootfs(p) || layer && d.Name() == "base") {
			skipped++
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() || !layer && !logLike(d.Name()) {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > 64<<20 {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		files++
		if strings.Contains(string(b), canary) {
			t.Errorf("the canary is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	t.Logf("checked %d files of the platform's state for the canary (%d base systems skipped)", files, skipped)
}
