package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/localvm"
)

// fakeEnv is a machine where everything works, as root, with cgroup v2.
func fakeEnv() *Env {
	env := map[string]string{}
	files := map[string]string{
		"/sys/fs/cgroup/cgroup.controllers": "cpu io memory pids",
		"/proc/self/cgroup":                 "0::/user.slice/user-1000.slice/user@1000.service/app.slice\n",
	}
	return &Env{
		Getenv:   func(k string) string { return env[k] },
		Geteuid:  func() int { return 0 },
		LookPath: func(p string) (string, error) { return "/usr/bin/" + p, nil },
		ReadFile: func(p string) ([]byte, error) {
			if s, ok := files[p]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		},
		Exists:      func(p string) bool { return p == "/usr/bin/python3" },
		Writable:    func(string) bool { return false },
		OpenRW:      func(string) error { return nil },
		FSType:      func(string) (int64, error) { return cgroup2Magic, nil },
		Run:         func(context.Context, string, ...string) error { return nil },
		RunInUserNS: func(context.Context, string) error { return nil },
		Listen:      func(string) error { return nil },
		Answers:     func(context.Context, string) bool { return false },
		Netfilter:   func(context.Context) error { return nil },
		Sandbox: func(context.Context, func(string) string) (SandboxResult, error) {
			return SandboxResult{Isolation: "full", InProcess: true, Elapsed: 80 * time.Millisecond}, nil
		},
		AWS: func(context.Context) (AWSResult, error) {
			return AWSResult{Region: "eu-west-1", Source: "EnvConfigCredentials"}, nil
		},
	}
}

func withEnv(e *Env, kv ...string) *Env {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	e.Getenv = func(k string) string { return m[k] }
	return e
}

func status(t *testing.T, c Check, want Status, detail string) {
	t.Helper()
	if c.Status != want || !strings.Contains(c.Detail, detail) {
		t.Errorf("%s: %s %q, want %s containing %q", c.Name, c.Status, c.Detail, want, detail)
	}
	if c.Status != Pass && c.Fix == "" {
		t.Errorf("%s: %s without a fix", c.Name, c.Status)
	}
}

var ctx = context.Background()

func TestRoot(t *testing.T) {
	e := fakeEnv()
	status(t, checkRoot(ctx, e), Pass, "running as root")
	e.Geteuid = func() int { return 1000 }
	status(t, checkRoot(ctx, e), Warn, "not root (uid 1000)")
}

func TestUserNS(t *testing.T) {
	e := fakeEnv()
	status(t, checkUserNS(ctx, e), Pass, "uid range")
	e.RunInUserNS = func(context.Context, string) error { return syscall.EPERM }
	status(t, checkUserNS(ctx, e), Warn, "host uid 1000")
	e.Geteuid = func() int { return 1000 }
	status(t, checkUserNS(ctx, e), Fail, "cannot be isolated without root")
	e.RunInUserNS = func(context.Context, string) error { return nil }
	status(t, checkUserNS(ctx, e), Pass, "rootless isolation")
	e.RunInUserNS = func(context.Context, string) error {
		return &fs.PathError{Op: "fork/exec", Path: "/bin/true", Err: syscall.ENOENT}
	}
	status(t, checkUserNS(ctx, e), Warn, "not checked")
	withEnv(e, noUserNSEnv, "1")
	status(t, checkUserNS(ctx, e), Fail, noUserNSEnv)
	// The probe is what an unprivileged user namespace runs: /bin/true.
	var ran string
	e = fakeEnv()
	e.RunInUserNS = func(_ context.Context, p string) error { ran = p; return nil }
	checkUserNS(ctx, e)
	if ran != "/bin/true" {
		t.Errorf("probe ran %q", ran)
	}
}

func TestCgroups(t *testing.T) {
	e := fakeEnv()
	status(t, checkCgroups(ctx, e), Pass, "cgroup v2")
	e.ReadFile = func(string) ([]byte, error) { return []byte("cpu io"), nil }
	status(t, checkCgroups(ctx, e), Fail, "memory, pids")

	// v1, hybrid: the controllers are directories.
	e = fakeEnv()
	e.FSType = func(p string) (int64, error) {
		if p == "/sys/fs/cgroup/unified" {
			return cgroup2Magic, nil
		}
		return tmpfsMagic, nil
	}
	e.Exists = func(p string) bool { return strings.HasPrefix(p, "/sys/fs/cgroup/") }
	status(t, checkCgroups(ctx, e), Pass, "v1 (hybrid)")
	e.Exists = func(p string) bool { return p != "/sys/fs/cgroup/freezer" }
	status(t, checkCgroups(ctx, e), Fail, "freezer")
	e.Geteuid = func() int { return 1000 }
	status(t, checkCgroups(ctx, e), Warn, "no delegation without root")

	// v2 without root: a delegated cgroup or none.
	e = fakeEnv()
	e.Geteuid = func() int { return 1000 }
	status(t, checkCgroups(ctx, e), Warn, "no delegated writable cgroup")
	var asked []string
	e.Writable = func(p string) bool { asked = append(asked, p); return true }
	status(t, checkCgroups(ctx, e), Pass, "delegated writable cgroup exists (/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice)")
	if len(asked) != 2 || !strings.HasSuffix(asked[1], "app.slice/cgroup.procs") {
		t.Errorf("writable asked %q", asked)
	}

	e.FSType = func(string) (int64, error) { return 0, fs.ErrNotExist }
	status(t, checkCgroups(ctx, e), Warn, "not mounted")
	e.Geteuid = func() int { return 0 }
	status(t, checkCgroups(ctx, e), Fail, "not mounted")
	e.FSType = func(string) (int64, error) { return 0xef53, nil }
	status(t, checkCgroups(ctx, e), Warn, "not a cgroup mount")
}

func TestNftables(t *testing.T) {
	e := fakeEnv()
	status(t, checkNftables(ctx, e), Pass, "answers")
	e.Netfilter = func(context.Context) error { return syscall.EPROTONOSUPPORT }
	status(t, checkNftables(ctx, e), Fail, "does not answer")
	called := false
	e.Netfilter = func(context.Context) error { called = true; return nil }
	e.Geteuid = func() int { return 1000 }
	status(t, checkNftables(ctx, e), Warn, "not checked")
	if called {
		t.Error("probed nftables without root")
	}
}

func TestSlirp(t *testing.T) {
	e := fakeEnv()
	status(t, checkSlirp(ctx, e), Pass, "used only without root")
	e.LookPath = func(string) (string, error) { return "", errors.New("not found") }
	status(t, checkSlirp(ctx, e), Pass, "not needed as root")
	e.Geteuid = func() int { return 1000 }
	status(t, checkSlirp(ctx, e), Warn, "no Internet access")
	e.LookPath = func(p string) (string, error) { return "/usr/bin/" + p, nil }
	status(t, checkSlirp(ctx, e), Pass, "can reach the Internet")
	e.OpenRW = func(string) error { return fs.ErrPermission }
	status(t, checkSlirp(ctx, e), Warn, "/dev/net/tun")
}

func TestPython(t *testing.T) {
	e := fakeEnv()
	var argv []string
	e.Run = func(_ context.Context, p string, args ...string) error {
		argv = append([]string{p}, args...)
		return nil
	}
	status(t, checkPython(ctx, e), Pass, "/usr/bin/python3 imports ipykernel")
	if strings.Join(argv, " ") != "/usr/bin/python3 -c import ipykernel" {
		t.Errorf("ran %q", argv)
	}
	e.Run = func(context.Context, string, ...string) error { return errors.New("exit status 1") }
	status(t, checkPython(ctx, e), Warn, "cannot import ipykernel")
	e.Exists = func(string) bool { return false }
	status(t, checkPython(ctx, e), Warn, "python3 not found")
}

func TestPort(t *testing.T) {
	e := fakeEnv()
	status(t, checkPort(ctx, e), Pass, "127.0.0.1:7450 is free")
	e.Listen = func(string) error { return &os.SyscallError{Syscall: "bind", Err: syscall.EADDRINUSE} }
	status(t, checkPort(ctx, e), Warn, "not a Rayito platform")
	e.Answers = func(_ context.Context, ep string) bool { return ep == "http://127.0.0.1:7450" }
	status(t, checkPort(ctx, e), Pass, "a Rayito platform answers at http://127.0.0.1:7450")
	withEnv(e, "RAYITO_ENDPOINT", "http://127.0.0.1:9999")
	e.Listen = func(addr string) error {
		if addr != "127.0.0.1:9999" {
			t.Errorf("listened on %s", addr)
		}
		return nil
	}
	status(t, checkPort(ctx, e), Pass, "127.0.0.1:9999 is free")
	withEnv(e, "RAYITO_ENDPOINT", "ftp://x")
	status(t, checkPort(ctx, e), Fail, "must look like")
}

func TestSandbox(t *testing.T) {
	e := fakeEnv()
	status(t, checkSandbox(ctx, e), Pass, "created, ran `true` and killed in 80ms on an in-process platform")
	e.Sandbox = func(context.Context, func(string) string) (SandboxResult, error) {
		return SandboxResult{Isolation: "none", Endpoint: "http://127.0.0.1:7450"}, nil
	}
	status(t, checkSandbox(ctx, e), Warn, "NOT isolated")
	e.Sandbox = func(context.Context, func(string) string) (SandboxResult, error) {
		return SandboxResult{}, fmt.Errorf("start the local platform: %w: not root", localvm.ErrUnisolated)
	}
	status(t, checkSandbox(ctx, e), Warn, "skipped")
	e.Sandbox = func(context.Context, func(string) string) (SandboxResult, error) {
		return SandboxResult{}, errors.New("localvm: boom")
	}
	c := checkSandbox(ctx, e)
	status(t, c, Fail, "failed: boom")
	e.Sandbox = func(ctx context.Context, _ func(string) string) (SandboxResult, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("no deadline")
		}
		return SandboxResult{Isolation: "rootless"}, nil
	}
	status(t, checkSandbox(ctx, e), Pass, "isolation rootless")
}

func TestAWS(t *testing.T) {
	run := func(e *Env) []Check { return Run(ctx, e, true) }
	e := fakeEnv()
	checks := run(e)
	names := []string{"aws credentials", "aws region", "aws template", "aws launch gate", "aws quotas", "aws artifact bucket", "aws version"}
	if len(checks) != len(names) {
		t.Fatalf("%d checks: %v", len(checks), checks)
	}
	for i, c := range checks {
		if c.Name != names[i] {
			t.Errorf("check %d is %q, want %q", i, c.Name, names[i])
		}
		if i >= 3 {
			// The fake probe has no AWS client: the AWS calls are skipped.
			status(t, c, Warn, "skipped: ")
		}
	}
	status(t, checks[0], Pass, "EnvConfigCredentials")
	status(t, checks[1], Pass, "eu-west-1")
	status(t, checks[2], Warn, "RAYITO_TEMPLATE is not set")

	// RAYITO_BACKEND=aws selects them too; the probe runs once.
	calls := 0
	e.AWS = func(context.Context) (AWSResult, error) { calls++; return AWSResult{}, errNoCredentials }
	withEnv(e, "RAYITO_BACKEND", "aws", "RAYITO_TEMPLATE", "arn:aws:lambda:us-east-1:1:microvm-image:x")
	checks = Run(ctx, e, false)
	if calls != 1 || len(checks) != len(names) {
		t.Fatalf("%d probes, %d checks", calls, len(checks))
	}
	status(t, checks[0], Fail, "no AWS credentials found: set AWS_PROFILE or")
	status(t, checks[1], Fail, "no AWS region")
	status(t, checks[2], Pass, "is set")
	if strings.Contains(checks[2].Detail, "arn:") {
		t.Errorf("template value printed: %q", checks[2].Detail)
	}

	e.AWS = func(context.Context) (AWSResult, error) { return AWSResult{Region: "us-east-1"}, errNoProfile }
	status(t, run(e)[0], Fail, "AWS_PROFILE")
	e.AWS = func(context.Context) (AWSResult, error) { return AWSResult{}, errAWSConfig }
	checks = run(e)
	status(t, checks[0], Fail, "cannot be loaded")
	status(t, checks[1], Fail, "not resolved")
	withEnv(e, "RAYITO_TEMPLATE", "my-template")
	status(t, checkTemplate(ctx, e), Pass, "an image name")
}

// The real probe against an empty environment: no credentials, and only
// the probe's own sentinels (no AWS error text) come back.
func TestAWSProbeEmptyEnvironment(t *testing.T) {
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	ctx, cancel := context.WithTimeout(ctx, awsTimeout)
	defer cancel()
	_, err := awsProbe(ctx)
	if err != errNoCredentials {
		t.Fatalf("err = %v, want errNoCredentials", err)
	}
	t.Setenv("AWS_PROFILE", "doctor-test-no-such-profile")
	if _, err := awsProbe(ctx); err != errNoProfile {
		t.Fatalf("err = %v, want errNoProfile", err)
	}
}

func TestBadBackend(t *testing.T) {
	e := withEnv(fakeEnv(), "RAYITO_BACKEND", "gcp")
	checks := Run(ctx, e, false)
	if len(checks) != 1 {
		t.Fatalf("%v", checks)
	}
	status(t, checks[0], Fail, "RAYITO_BACKEND must be local or aws")
}

func TestOutput(t *testing.T) {
	checks := []Check{
		pass("root", "ok"),
		warn("python3 ipykernel", "missing", "install it"),
	}
	var b bytes.Buffer
	if err := write(&b, checks, false); err != nil {
		t.Fatal(err)
	}
	want := "PASS  root               ok\nWARN  python3 ipykernel  missing\n      fix: install it\n"
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	checks = append(checks, fail("port", "taken", "free it"))
	err := write(&b, checks, true)
	if msg, code := cliutil.Exit(err); code != 1 || msg != "" {
		t.Errorf("exit %d %q", code, msg)
	}
	var r struct {
		Checks []map[string]any `json:"checks"`
		OK     *bool            `json:"ok"`
	}
	if err := json.Unmarshal(b.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.OK == nil || *r.OK || len(r.Checks) != 3 {
		t.Fatalf("%s", b.String())
	}
	for _, c := range r.Checks {
		for _, k := range []string{"name", "status", "detail", "fix"} {
			if _, ok := c[k]; !ok {
				t.Errorf("%v has no %s", c, k)
			}
		}
	}
	b.Reset()
	if err := write(&b, nil, true); err != nil || !strings.Contains(b.String(), `"checks": []`) {
		t.Errorf("%v %s", err, b.String())
	}
}

// The whole local run on the fake machine: every check, in order.
func TestLocalRun(t *testing.T) {
	checks := Run(ctx, fakeEnv(), false)
	var names []string
	for _, c := range checks {
		names = append(names, c.Name)
		if c.Status != Pass {
			t.Errorf("%+v", c)
		}
	}
	if got := strings.Join(names, ","); got != "root,user namespaces,cgroups,nftables,slirp4netns,python3 ipykernel,port,sandbox" {
		t.Errorf("checks %s", got)
	}
}
