package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/agenthost/secretenv"
)

// The test binary is also the agent: with AGENT_HOST_TEST_CHILD set it
// serves /ping and /invocations on $PORT (what a user's agent does).
func TestMain(m *testing.M) {
	if mode := os.Getenv("AGENT_HOST_TEST_CHILD"); mode != "" {
		childMain(mode)
		return
	}
	os.Exit(m.Run())
}

func childMain(mode string) {
	if mode == "print-env" {
		// A start-up diagnostic that prints a secret before the agent is up.
		fmt.Fprintln(os.Stderr, "starting with GITHUB_TOKEN="+os.Getenv("GITHUB_TOKEN"))
	}
	if mode == "exit" {
		os.Exit(3)
	}
	if mode == "grandchild" {
		_ = exec.Command("sleep", "300").Start()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"status":"Healthy"}`) })
	mux.HandleFunc("POST /invocations", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) == "slow" {
			time.Sleep(time.Second)
		}
		var env []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			env = append(env, k)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"body": string(body), "authorization": r.Header.Get("Authorization"), "path": r.URL.Path,
			"env": env, "github": os.Getenv("GITHUB_TOKEN"), "pythonpath": os.Getenv("PYTHONPATH"), "pid": os.Getpid(),
			"uid": os.Getuid(), "home": os.Getenv("HOME"), "host_environ": readable(fmt.Sprintf("/proc/%d/environ", os.Getppid())),
		})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	if err != nil {
		os.Exit(1)
	}
	_ = http.Serve(ln, mux)
}

// readable reports whether the file's first byte can be read.
func readable(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Read(make([]byte, 1))
	return err == nil
}

// syncBuf is a concurrency-safe buffer.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type fakeSource map[string]string

func (f fakeSource) SecretString(_ context.Context, id string) (string, error) {
	v, ok := f[id]
	if !ok {
		return "", &secretenv.Error{Code: secretenv.CodeNotFound}
	}
	return v, nil
}

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

const token = "tok-0123456789abcdef0123456789abcdef"

type running struct {
	url  string
	logs *syncBuf
	out  *syncBuf
	stop func()
}

func start(t *testing.T, target Target, mode string, environ []string, src SecretSource) *running {
	t.Helper()
	return startAs(t, target, mode, environ, src, "")
}

func startAs(t *testing.T, target Target, mode string, environ []string, src SecretSource, user string) *running {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		// The agent's user must be able to run the test binary.
		dir, err := os.MkdirTemp("", "agent-host-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		self = filepath.Join(dir, "agent")
		if err := os.WriteFile(self, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logs, out := &syncBuf{}, &syncBuf{}
	environ = append(environ, "AGENT_HOST_TEST_CHILD="+mode, "PATH="+os.Getenv("PATH"))
	ctx, cancel := context.WithCancel(context.Background())
	h, err := New(ctx, Config{
		Target: target, Listen: "127.0.0.1:0", Command: []string{self}, ChildPort: freePort(t), Environ: environ, User: user,
		Secrets: src, TempDir: t.TempDir(), Stdout: out, Stderr: out, StartTimeout: 20 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.Run(ctx, ln)
	}()
	r := &running{url: "http://" + ln.Addr().String(), logs: logs, out: out, stop: func() { cancel(); <-done }}
	t.Cleanup(r.stop)
	return r
}

func (r *running) waitStatus(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(r.url + "/ping")
		if err == nil {
			var b struct{ Status string }
			_ = json.NewDecoder(resp.Body).Decode(&b)
			resp.Body.Close()
			if b.Status == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ping never said %s (logs %s)", want, r.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func invoke(t *testing.T, url, auth, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/invocations", strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// TestMicroVM: the service token guards /invocations (and is not passed
// on), the agent gets its secret variables and the hook but neither the
// token nor the list of names, /ping follows the agent.
func TestMicroVM(t *testing.T) {
	canary := "ghp_canary_" + strings.Repeat("7", 20)
	r := start(t, TargetMicroVM, "serve", []string{TokenVariable + "=" + token, "GITHUB_TOKEN=" + canary, secretenv.NamesVariable + "=GITHUB_TOKEN", "KEEP=1"}, nil)
	r.waitStatus(t, "Healthy")
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token[:len(token)-1], "Basic " + token, token} {
		if code, _ := invoke(t, r.url, auth, "x"); code != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d", auth, code)
		}
	}
	code, m := invoke(t, r.url, "Bearer "+token, `{"prompt":"hi"}`)
	if code != 200 || m["body"] != `{"prompt":"hi"}` || m["authorization"] != "" || m["path"] != "/invocations" {
		t.Fatalf("%d %v", code, m)
	}
	if m["github"] != canary {
		t.Errorf("the agent's secret variable: %v", m["github"])
	}
	env := fmt.Sprint(m["env"])
	for _, k := range []string{TokenVariable, secretenv.NamesVariable, secretenv.Variable} {
		if strings.Contains(env, k) {
			t.Errorf("the agent's environment has %s", k)
		}
	}
	if !strings.Contains(env, "KEEP") || !strings.Contains(env, "PORT") {
		t.Errorf("the agent's environment: %s", env)
	}
	if _, err := os.Stat(filepath.Join(fmt.Sprint(m["pythonpath"]), "sitecustomize.py")); err != nil {
		t.Errorf("the Python hook: %v", err)
	}
	for _, p := range []string{"/other", "/invocations/x"} {
		resp, err := http.Post(r.url+p, "application/json", strings.NewReader("x"))
		if err != nil || resp.StatusCode != 404 {
			t.Errorf("%s: %v %v", p, resp.StatusCode, err)
		}
	}
	if resp, _ := http.Get(r.url + "/invocations"); resp.StatusCode != 405 {
		t.Errorf("GET /invocations: %d", resp.StatusCode)
	}
	// Busy while an invocation runs.
	done := make(chan struct{})
	go func() {
		defer close(done)
		invoke(t, r.url, "Bearer "+token, "slow")
	}()
	r.waitStatus(t, "HealthyBusy")
	<-done
	r.waitStatus(t, "Healthy")
	// Too large.
	req, _ := http.NewRequest(http.MethodPost, r.url+"/invocations", strings.NewReader("x"))
	req.ContentLength = MaxPayloadBytes + 1
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err == nil && resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("too large: %d", resp.StatusCode)
	}
	if strings.Contains(r.logs.String(), canary) || strings.Contains(r.logs.String(), token) {
		t.Error("the log has a value")
	}
	if !strings.Contains(r.logs.String(), `"msg":"secret_env_loaded","count":1`) {
		t.Errorf("no secret_env_loaded count=1: %s", r.logs.String())
	}
}

// TestAgentCore: secrets fetched by the source, values redacted from the
// agent's start-up output, no token required, the token refused if set.
func TestAgentCore(t *testing.T) {
	canary := "s3cr3t-" + strings.Repeat("9", 12)
	raw, err := secretenv.Encode([]secretenv.Entry{{Name: "GITHUB_TOKEN", Secret: "arn:gh"}, {Name: "DB_USER", Secret: "arn:db", Key: "user"}})
	if err != nil {
		t.Fatal(err)
	}
	src := fakeSource{"arn:gh": canary, "arn:db": `{"user":"alice"}`}
	r := start(t, TargetAgentCore, "print-env", []string{secretenv.Variable + "=" + raw}, src)
	r.waitStatus(t, "Healthy")
	code, m := invoke(t, r.url, "", "x")
	if code != 200 || m["github"] != canary {
		t.Fatalf("%d %v", code, m)
	}
	if strings.Contains(fmt.Sprint(m["env"]), secretenv.Variable) {
		t.Error("RAYITO_SECRET_ENV reached the agent")
	}
	if out := r.out.String(); strings.Contains(out, canary) || !strings.Contains(out, "GITHUB_TOKEN=[redacted]") {
		t.Errorf("the start-up output: %q", out)
	}
	if !strings.Contains(r.logs.String(), `"count":2`) || strings.Contains(r.logs.String(), "arn:") {
		t.Errorf("logs: %s", r.logs.String())
	}

	// Failures are closed codes naming the variable, never the secret.
	for name, c := range map[string]struct {
		environ []string
		code    string
	}{
		"missing secret": {[]string{secretenv.Variable + `=[{"name":"A","secret":"arn:none"}]`}, secretenv.CodeNotFound},
		"reserved":       {[]string{secretenv.Variable + `=[{"name":"LD_PRELOAD","secret":"arn:gh"}]`}, secretenv.CodeReserved},
		"malformed":      {[]string{secretenv.Variable + `=[{`}, secretenv.CodeInvalid},
		"missing key":    {[]string{secretenv.Variable + `=[{"name":"A","secret":"arn:db","key":"password"}]`}, secretenv.CodeKeyMissing},
	} {
		_, err := New(context.Background(), Config{Target: TargetAgentCore, Command: []string{"true"}, Environ: c.environ, Secrets: src, TempDir: t.TempDir()})
		var se *secretenv.Error
		if !errors.As(err, &se) || se.Code != c.code || strings.Contains(err.Error(), "arn:") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New(context.Background(), Config{Target: TargetAgentCore, Command: []string{"true"}, Environ: []string{TokenVariable + "=" + token}, TempDir: t.TempDir()}); !errors.Is(err, ErrConfig) {
		t.Errorf("a token on AgentCore: %v", err)
	}
}

// TestRefusals: the host checks its configuration and, on MicroVMs, the
// names of the secret variables again.
func TestRefusals(t *testing.T) {
	base := []string{TokenVariable + "=" + token}
	for name, c := range map[string]struct {
		cfg  Config
		want error
	}{
		"no target":                {Config{Command: []string{"x"}}, ErrConfig},
		"no command":               {Config{Target: TargetMicroVM, Environ: base}, ErrConfig},
		"no token":                 {Config{Target: TargetMicroVM, Command: []string{"x"}}, ErrConfig},
		"short token":              {Config{Target: TargetMicroVM, Command: []string{"x"}, Environ: []string{TokenVariable + "=short"}}, ErrConfig},
		"same port":                {Config{Target: TargetMicroVM, Command: []string{"x"}, Environ: base, Listen: ":8081"}, ErrConfig},
		"NUL":                      {Config{Target: TargetMicroVM, Command: []string{"x\x00"}, Environ: base}, ErrConfig},
		"reserved":                 {Config{Target: TargetMicroVM, Command: []string{"x"}, Environ: append(base, "PATH=/x", secretenv.NamesVariable+"=PATH")}, secretenv.ErrSecretEnv},
		"aws":                      {Config{Target: TargetMicroVM, Command: []string{"x"}, Environ: append(base, "AWS_SECRET_ACCESS_KEY=k", secretenv.NamesVariable+"=AWS_SECRET_ACCESS_KEY")}, secretenv.ErrSecretEnv},
		"no value":                 {Config{Target: TargetMicroVM, Command: []string{"x"}, Environ: append(base, secretenv.NamesVariable+"=GH")}, secretenv.ErrSecretEnv},
		"bad name":                 {Config{Target: TargetMicroVM, Command: []string{"x"}, Environ: append(base, secretenv.NamesVariable+"=A B")}, secretenv.ErrSecretEnv},
		"twice":                    {Config{Target: TargetMicroVM, Command: []string{"x"}, Environ: append(base, "A=1", secretenv.NamesVariable+"=A,A")}, secretenv.ErrSecretEnv},
		"child port 0":             {Config{Target: TargetMicroVM, Command: []string{"x"}, Environ: base, ChildPort: 70000}, ErrConfig},
		"two tokens":               {Config{Target: TargetMicroVM, Command: []string{"x"}, Environ: base, Token: token}, ErrConfig},
		"stdin token on AgentCore": {Config{Target: TargetAgentCore, Command: []string{"x"}, Token: token}, ErrConfig},
	} {
		c.cfg.TempDir = t.TempDir()
		if _, err := New(context.Background(), c.cfg); !errors.Is(err, c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSupervision: an agent that exits is restarted (and /ping is not
// Healthy meanwhile); stopping the host ends the agent's whole process
// group.
func TestSupervision(t *testing.T) {
	r := start(t, TargetAgentCore, "exit", nil, nil)
	for deadline := time.Now().Add(20 * time.Second); strings.Count(r.logs.String(), "agent_exited") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("not restarted: %s", r.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Get(r.url + "/ping")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/ping of an agent that keeps exiting: %v %v", resp.StatusCode, err)
	}
	if !strings.Contains(r.logs.String(), `"code":3`) {
		t.Errorf("exit code not logged: %s", r.logs.String())
	}
	r.stop()

	g := start(t, TargetAgentCore, "grandchild", nil, nil)
	g.waitStatus(t, "Healthy")
	_, m := invoke(t, g.url, "", "x")
	pid := int(m["pid"].(float64))
	g.stop()
	// Killed processes linger as zombies until init reaps them: count the
	// live ones.
	for deadline := time.Now().Add(5 * time.Second); ; {
		live := liveInGroup(t, pid)
		if live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes left in the agent's group", live)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPythonHook: a Python agent starts with logging at INFO and httpx
// and httpcore at WARNING; its own code may lower them.
func TestPythonHook(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the hook is not run")
	}
	dir, err := writePythonHook(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", `import logging; print(logging.getLogger().level, logging.getLogger("httpx").level, logging.getLogger("httpcore").level)`)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath(dir, []string{"PYTHONPATH=/elsewhere"}))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "20 30 30" {
		t.Errorf("%q %v", out, err)
	}
}

// liveInGroup counts the processes of group pgid that are not zombies.
func liveInGroup(t *testing.T, pgid int) int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) > 2 && fields[2] == fmt.Sprint(pgid) && fields[0] != "Z" {
			live++
		}
	}
	return live
}

// TestAgentUser: with User the agent runs as that user, with its HOME,
// and cannot read the host's environment (the service token).
func TestAgentUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the host runs the agent as another user")
	}
	r := startAs(t, TargetMicroVM, "serve", []string{TokenVariable + "=" + token, "HOME=/root"}, nil, "nobody")
	r.waitStatus(t, "Healthy")
	code, m := invoke(t, r.url, "Bearer "+token, "x")
	if code != 200 || m["uid"] != float64(65534) || m["home"] == "/root" || m["host_environ"] != false {
		t.Fatalf("%d %v", code, m)
	}
	if _, err := New(context.Background(), Config{Target: TargetMicroVM, Command: []string{"x"}, Environ: []string{TokenVariable + "=" + token}, User: "no-such-user-x", TempDir: t.TempDir()}); !errors.Is(err, ErrConfig) {
		t.Errorf("an unknown user: %v", err)
	}
}
