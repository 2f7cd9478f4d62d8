package agent_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/agenthost/project"
	"github.com/rayito-dev/rayito/agenthost/secretenv"
	"github.com/rayito-dev/rayito/cli/internal/app"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// result is one in-process run of the CLI.
type result struct {
	out, err string
	code     int
	e        error
}

// run runs `rayito ARGS...` in process with only env as its environment
// (an unreachable platform, a state directory of the test's own).
func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return runIn(t, strings.NewReader(""), env, args...)
}

// runIn is run with stdin in.
func runIn(t *testing.T, in io.Reader, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string { return env[k] }
	f := &cliutil.Factory{IO: cliutil.IO{In: in, Out: &out, Err: &errb}, Env: getenv}
	e := app.NewRoot(f).Run(context.Background(), append([]string{"rayito"}, args...))
	msg, code := cliutil.Exit(e)
	if msg != "" {
		errb.WriteString("rayito: " + msg + "\n")
	}
	return result{out: out.String(), err: errb.String(), code: code, e: e}
}

// testEnv is an environment whose platform cannot be reached (a deploy that
// got that far would fail loudly) and whose state directory is the test's.
func testEnv(t *testing.T) (map[string]string, string) {
	state := t.TempDir()
	return map[string]string{
		"XDG_STATE_HOME":  state,
		"RAYITO_ENDPOINT": "http://127.0.0.1:1",
		"HOME":            t.TempDir(),
	}, state
}

// writeProject writes a project directory with toml as its project file.
func writeProject(t *testing.T, toml string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, project.FileName), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// snapshot lists every file under dirs with its contents.
func snapshot(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, d := range dirs {
		err := filepath.Walk(d, func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if !info.IsDir() {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				m[p] = string(b)
			} else {
				m[p+"/"] = ""
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func sameSnapshot(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// TestPlanGolden: the plan of fixed projects for each target, text and
// JSON, is exactly the golden file; planning writes nothing.
func TestPlanGolden(t *testing.T) {
	cases := []struct {
		golden string
		args   []string
	}{
		{"plan_microvm.golden", []string{"agent", "plan", "testdata/microvm"}},
		{"plan_microvm_json.golden", []string{"agent", "plan", "--json", "testdata/microvm"}},
		{"plan_agentcore.golden", []string{"agent", "plan", "--target", "agentcore", "--region", "us-east-1", "testdata/agentcore"}},
		{"plan_agentcore_json.golden", []string{"agent", "plan", "--target", "agentcore", "--region", "us-east-1", "--json", "testdata/agentcore"}},
		// The account comes from --account when no ARN names it; AWS_REGION
		// stands in for --region.
		{"plan_agentcore_init.golden", []string{"agent", "plan", "--target", "agentcore", "--account", "444455556666", "testdata/init"}},
		// Without an account the plan says what stands for it.
		{"plan_agentcore_noaccount.golden", []string{"agent", "plan", "--target", "agentcore", "testdata/init"}},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			env, state := testEnv(t)
			env["AWS_REGION"] = "eu-west-1"
			before := snapshot(t, state, "testdata")
			r := run(t, env, c.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.err)
			}
			if r.err != "" {
				t.Errorf("stderr: %q", r.err)
			}
			golden(t, c.golden, r.out)
			if !*update && !sameSnapshot(before, snapshot(t, state, "testdata")) {
				t.Error("plan wrote a file")
			}
		})
	}
}

// TestPlanAgentCoreJSON: the JSON plan holds the runtime role's statements
// of T36 and nothing wider, and secret values never (only names and ARNs).
func TestPlanAgentCoreJSON(t *testing.T) {
	env, _ := testEnv(t)
	r := run(t, env, "agent", "plan", "--target", "agentcore", "--region", "us-east-1", "--json", "testdata/agentcore")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	for _, want := range []string{
		`"mmdsv2": true`, `"description": "` + agentcore.Marker + `"`, `"Sid": "ReadSecrets"`,
		`arn:aws:secretsmanager:us-east-1:111122223333:secret:prod/db-XyZ789`,
		`arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0`,
		secretenv.Variable,
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("plan lacks %q", want)
		}
	}
	for _, never := range []string{"GetWorkloadAccessTokenForUserId", "kms:Decrypt", "ListSecrets", `"Action": [
            "*"`, "secretsmanager:*", "bedrock:*"} {
		if strings.Contains(r.out, never) {
			t.Errorf("plan has %q", never)
		}
	}
}

// refusal is a project the plan or deploy refuses before writing anything.
type refusal struct {
	name     string
	toml     string
	args     []string // after "agent", the command; the project dir is appended
	code     int
	contains string
	is       error
}

func refusals() []refusal {
	const base = "name = \"bot\"\ncommand = [\"python3\", \"agent.py\"]\n"
	const region = "--region=us-east-1"
	ac := func(cmd string, extra ...string) []string {
		return append([]string{cmd, "--target", "agentcore", region}, extra...)
	}
	arn := func(account, region, name string) string {
		return "arn:aws:secretsmanager:" + region + ":" + account + ":secret:" + name
	}
	rs := []refusal{
		{name: "agentcore egress", toml: base + "[egress]\nallow = [\"api.github.com\"]\n", args: ac("plan", "--account", "111122223333"),
			code: 1, contains: agentcore.CodeNetworkPolicyUnsupported, is: agentcore.ErrPlan},
		{name: "agentcore egress deploy", toml: base + "[egress]\nallow = [\"api.github.com\"]\n", args: ac("deploy", "--account", "111122223333"),
			code: 1, contains: agentcore.CodeNetworkPolicyUnsupported, is: agentcore.ErrPlan},
		{name: "openai without external-model", toml: base + "[model]\nprovider = \"openai\"\nid = \"gpt-4.1\"\n", args: ac("plan", "--account", "111122223333"),
			code: 1, contains: agentcore.CodeProviderUnsupported, is: agentcore.ErrPlan},
		{name: "openai key not readable", toml: base + "[model]\nprovider = \"openai\"\nid = \"gpt-4.1\"\nkey_secret = \"" + arn("111122223333", "us-east-1", "openai-AbC123") + "\"\n",
			args: ac("plan", "--account", "111122223333", "--external-model"), code: 1, contains: agentcore.CodeProviderUnsupported, is: agentcore.ErrPlan},
		{name: "secret of another account", toml: base + "[secret_env]\nTOKEN = \"" + arn("444455556666", "us-east-1", "tok-AbC123") + "\"\n",
			args: ac("plan", "--account", "111122223333"), code: 1, contains: agentcore.CodeResourceInvalid, is: agentcore.ErrPlan},
		{name: "secret of another region", toml: base + "[secret_env]\nTOKEN = \"" + arn("111122223333", "eu-west-1", "tok-AbC123") + "\"\n",
			args: ac("plan"), code: 1, contains: agentcore.CodeResourceInvalid, is: agentcore.ErrPlan},
		{name: "secret without suffix", toml: base + "[secret_env]\nTOKEN = \"" + arn("111122223333", "us-east-1", "tok") + "\"\n",
			args: ac("plan"), code: 1, contains: agentcore.CodeResourceInvalid, is: agentcore.ErrPlan},
		{name: "secret by name on agentcore", toml: base + "[secret_env]\nTOKEN = \"tok\"\n",
			args: ac("plan", "--account", "111122223333"), code: 1, contains: agentcore.CodeResourceInvalid, is: agentcore.ErrPlan},
		{name: "readable secret without suffix", toml: base,
			args: ac("plan", "--account", "111122223333", "--readable-secret", arn("111122223333", "us-east-1", "tok")), code: 1, contains: agentcore.CodeResourceInvalid, is: agentcore.ErrPlan},
		{name: "bedrock model not an ARN", toml: base,
			args: ac("plan", "--account", "111122223333", "--bedrock-model", "anthropic.claude"), code: 1, contains: agentcore.CodeResourceInvalid, is: agentcore.ErrPlan},
		{name: "unknown key", toml: base + "colour = \"red\"\n", args: []string{"plan"}, code: 2, contains: "unknown key colour", is: project.ErrInvalid},
		{name: "unknown key in a table", toml: base + "[model]\nprovider = \"bedrock\"\nid = \"x\"\nregion = \"us-east-1\"\nkey = \"v\"\n", args: []string{"plan"}, code: 2, contains: "unknown key model.key", is: project.ErrInvalid},
		{name: "bad target", toml: base, args: []string{"plan", "--target", "lambda"}, code: 2, contains: "--target"},
		{name: "secret_env_from without keys", toml: base + "[[secret_env_from]]\nsecret = \"db\"\nkeys = []\n", args: []string{"plan"}, code: 2, contains: secretenv.CodeInvalid, is: secretenv.ErrSecretEnv},
		{name: "duplicate secret variable", toml: base + "[secret_env]\nDB_USER = \"a\"\n[[secret_env_from]]\nsecret = \"db\"\nkeys = [\"DB_USER\"]\n", args: []string{"plan"}, code: 2, contains: secretenv.CodeDuplicate, is: secretenv.ErrSecretEnv},
	}
	// A reserved name is refused by every command that reads the project,
	// on both targets, before anything is written or sent.
	for _, name := range []string{"PATH", "LD_PRELOAD", "AWS_X", "RAYITO_X", "Path", "NODE_OPTIONS", "PYTHONPATH", "HOME", "BEDROCK_AGENTCORE_X"} {
		toml := base + "[secret_env]\n" + name + " = \"" + arn("111122223333", "us-east-1", "tok-AbC123") + "\"\n"
		for _, args := range [][]string{{"plan"}, {"deploy"}, ac("plan"), ac("deploy")} {
			rs = append(rs, refusal{name: "reserved " + name + " " + strings.Join(args, " "), toml: toml, args: args, code: 2,
				contains: secretenv.CodeReserved + ": a secret cannot set a reserved variable (" + name + ")", is: secretenv.ErrSecretEnv})
		}
	}
	return rs
}

// TestRefusals: each refused project exits with its code, names the
// closed code, matches its sentinel, and writes nothing (state directory
// and project unchanged); deploy never reaches the platform (an
// unreachable endpoint would fail differently).
func TestRefusals(t *testing.T) {
	for _, c := range refusals() {
		t.Run(c.name, func(t *testing.T) {
			env, state := testEnv(t)
			dir := writeProject(t, c.toml)
			before := snapshot(t, state, dir)
			r := run(t, env, append(append([]string{"agent"}, c.args...), dir)...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d: %s", r.code, c.code, r.err)
			}
			if !strings.Contains(r.err, c.contains) {
				t.Errorf("stderr %q lacks %q", r.err, c.contains)
			}
			if c.is != nil && !errors.Is(r.e, c.is) {
				t.Errorf("error %v is not %v", r.e, c.is)
			}
			if r.out != "" {
				t.Errorf("stdout %q", r.out)
			}
			if strings.Contains(r.err, "127.0.0.1:1") || strings.Contains(r.err, "building") {
				t.Errorf("reached the platform: %q", r.err)
			}
			if !sameSnapshot(before, snapshot(t, state, dir)) {
				t.Error("a refused command wrote a file")
			}
		})
	}
}

// TestExternalModel: with --external-model and no key secret, an openai
// project is planned with the externalModel line saying the public network.
func TestExternalModel(t *testing.T) {
	env, _ := testEnv(t)
	dir := writeProject(t, "name = \"bot\"\ncommand = [\"python3\", \"agent.py\"]\n[model]\nprovider = \"openai\"\nid = \"gpt-4.1\"\n")
	r := run(t, env, "agent", "plan", "--target", "agentcore", "--region", "us-east-1", "--account", "111122223333", "--external-model", dir)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	if !strings.Contains(r.out, "externalModel openai over the PUBLIC network") {
		t.Errorf("plan lacks the externalModel line:\n%s", r.out)
	}
	if strings.Contains(r.out, "InvokeBedrockModels") {
		t.Errorf("an openai agent may invoke Bedrock models:\n%s", r.out)
	}
}

// TestDeployAgentCorePlanFirst: the plan's checks and the region come
// before AWS is asked anything (agentcore_test.go has the deploys).
func TestDeployAgentCorePlanFirst(t *testing.T) {
	a := newFakeAWS(t)
	a.serve(t)
	env, _ := testEnv(t)
	dir := writeProject(t, "name = \"bot\"\ncommand = [\"x\"]\n[egress]\nallow = [\"api.github.com\"]\n")
	host := elfHost(t, 183)
	r := run(t, env, "agent", "deploy", "--target", "agentcore", "--region", "us-east-1", "--account", "111122223333", "--artifact-bucket", acBucket, "--host-binary", host, dir)
	if r.code != 1 || !strings.Contains(r.err, agentcore.CodeNetworkPolicyUnsupported) || !errors.Is(r.e, agentcore.ErrPlan) {
		t.Errorf("egress: exit %d, %q", r.code, r.err)
	}
	// Without a region: a usage error, before AWS.
	r = run(t, env, "agent", "deploy", "--target", "agentcore", "testdata/agentcore")
	if r.code != 2 {
		t.Errorf("no region: exit %d, %q", r.code, r.err)
	}
	wantCalls(t, "plan first", a.take(), nil)
}

// TestInit: init writes the project file and agent.py, which plan
// accepts; it never overwrites either file, writing nothing when one
// exists.
func TestInit(t *testing.T) {
	env, _ := testEnv(t)
	dir := filepath.Join(t.TempDir(), "my-agent")
	r := run(t, env, "agent", "init", dir)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	p, err := project.Load(dir)
	if err != nil || p.Name != "my-agent" {
		t.Fatalf("the new project: %+v %v", p, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "agent.py")); err != nil || string(b) != project.SampleAgent {
		t.Fatalf("agent.py: %v", err)
	}
	if r := run(t, env, "agent", "plan", dir); r.code != 0 {
		t.Errorf("plan of the new project: exit %d: %s", r.code, r.err)
	}

	// A second init changes nothing.
	if err := os.WriteFile(filepath.Join(dir, "agent.py"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	r = run(t, env, "agent", "init", "--name", "other", dir)
	if r.code != 1 || !strings.Contains(r.err, "never overwrites") {
		t.Errorf("init over a project: exit %d, %q", r.code, r.err)
	}
	if !sameSnapshot(before, snapshot(t, dir)) {
		t.Error("init overwrote a file")
	}

	// Only agent.py exists: the project file is not written either.
	only := t.TempDir()
	if err := os.WriteFile(filepath.Join(only, "agent.py"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, env, "agent", "init", "--name", "x", only)
	if r.code != 1 {
		t.Errorf("init beside agent.py: exit %d", r.code)
	}
	if _, err := os.Stat(filepath.Join(only, project.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("init wrote %s beside an existing agent.py", project.FileName)
	}

	// A bad name is a usage error.
	r = run(t, env, "agent", "init", "--name", "Bad_Name", t.TempDir())
	if r.code != 2 {
		t.Errorf("bad name: exit %d, %q", r.code, r.err)
	}
}

// TestNotDeployed: invoke and delete of an agent this machine did not
// deploy are not found (exit 1) before the platform is asked; list is
// empty; a name that is not an agent's is a usage error.
func TestNotDeployed(t *testing.T) {
	env, state := testEnv(t)
	for _, args := range [][]string{{"agent", "invoke", "ghost"}, {"agent", "delete", "ghost"}} {
		r := run(t, env, args...)
		if r.code != 1 || !errors.Is(r.e, rayito.ErrNotFound) || !strings.Contains(r.err, "agent ghost is not deployed") {
			t.Errorf("%v: exit %d, err %v, %q", args, r.code, r.e, r.err)
		}
	}
	for _, args := range [][]string{{"agent", "invoke", "../etc/passwd"}, {"agent", "delete", "A"}, {"agent", "invoke"}, {"agent", "delete", "a", "b"}} {
		if r := run(t, env, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2: %q", args, r.code, r.err)
		}
	}
	r := run(t, env, "agent", "list", "--json")
	if r.code != 0 || strings.TrimSpace(r.out) != "[]" {
		t.Errorf("list: exit %d, %q", r.code, r.out)
	}
	if _, err := os.Stat(filepath.Join(state, "rayito", "agents")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a refused command made the records directory")
	}

	// A damaged record is said to be damaged, not used.
	dir := filepath.Join(state, "rayito", "agents")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, env, "agent", "invoke", "broken")
	if r.code != 1 || !strings.Contains(r.err, "damaged") {
		t.Errorf("damaged record: exit %d, %q", r.code, r.err)
	}
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestInvokePayloadTooLarge: a payload on stdin over 100 MiB is a usage
// error, before the platform is asked (not sent cut).
func TestInvokePayloadTooLarge(t *testing.T) {
	env, state := testEnv(t)
	dir := filepath.Join(state, "rayito", "agents")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := `{"name":"big","target":"microvm","sandbox_id":"microvm-00000000-0000-0000-0000-000000000000","template":"agent-big","service_token":"t"}`
	if err := os.WriteFile(filepath.Join(dir, "big.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runIn(t, io.LimitReader(zeros{}, 100<<20+1), env, "agent", "invoke", "--payload", "-", "big")
	if r.code != 2 || !strings.Contains(r.err, "over 100 MiB") {
		t.Errorf("exit %d, %q", r.code, r.err)
	}
}

// TestDeployNeedsHost: deploy to a MicroVM without the host binary says
// how to get it, before contacting the platform.
func TestDeployNeedsHost(t *testing.T) {
	env, state := testEnv(t)
	r := run(t, env, "agent", "deploy", "--host-binary", filepath.Join(t.TempDir(), "absent"), "testdata/microvm")
	if r.code == 0 {
		t.Fatal("deploy with an absent host succeeded")
	}
	if _, err := os.Stat(filepath.Join(state, "rayito", "agents")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a failed deploy made the records directory")
	}
}
