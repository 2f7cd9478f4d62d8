//go:build linux

package launcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/google/uuid"

	"github.com/rayito-dev/rayito/localvm/internal/cgroup"
	"github.com/rayito-dev/rayito/localvm/internal/hostnet"
	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/runpayload"
)

func TestMain(m *testing.M) {
	MaybeRunInit()
	// Sandboxes with Internet turn net.ipv4.ip_forward on and the launcher
	// never turns it off; the test suite puts the machine back as it was.
	orig, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	code := m.Run()
	if os.Geteuid() == 0 {
		if strings.TrimSpace(string(orig)) == "0" {
			_ = os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0\n"), 0o644)
		}
		removeTestScope()
	}
	os.Exit(code)
}

// The tests' own scope and subnet, so that they never touch the sandboxes
// of a real platform on the same machine (nor it theirs).
const testScope = "tst"

var testSubnet = netip.MustParsePrefix("10.214.0.0/16")

var testNames, _ = namesFor(testScope)

// removeTestScope removes the test scope's table, its lock file and its
// cgroup parents, which a real platform keeps for its lifetime.
func removeTestScope() {
	_ = os.Remove(filepath.Join(hostnet.LockDir, testNames.table+".lock"))
	if c, err := nftables.New(); err == nil {
		if tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet); err == nil {
			for _, tbl := range tables {
				if tbl.Name == testNames.table {
					c.DelTable(tbl)
					_ = c.Flush()
				}
			}
		}
	}
	if cg, err := cgroup.Detect(testNames.cgroupParent); err == nil {
		for _, r := range cg.Roots() {
			_ = os.Remove(r)
		}
	}
}

// tableChains are the chains of the launcher's nftables table
// (hostnet's firewall).
var tableChains = []string{"input", "forward", "egress", "postrouting"}

// commentOf is the comment of an nftables rule.
func commentOf(r *nftables.Rule) string {
	s, _ := userdata.GetString(r.UserData, userdata.TypeComment)
	return s
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newLauncher returns a launcher with the test scope on stateDir (a fresh
// one when "").
func newLauncher(t *testing.T, stateDir string, mod func(*Options)) *Launcher {
	t.Helper()
	if stateDir == "" {
		stateDir = t.TempDir()
	}
	opts := Options{StateDir: stateDir, Subnet: testSubnet, Scope: testScope, Logger: testLogger(t)}
	if mod != nil {
		mod(&opts)
	}
	l, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// privileged returns a privileged launcher or skips the test.
func privileged(t *testing.T, stateDir string) *Launcher {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: namespaces, cgroups, veth and nftables")
	}
	l := newLauncher(t, stateDir, nil)
	if !l.Privileged() {
		t.Skip("needs root: namespaces are not usable here")
	}
	if l.cgErr != nil {
		t.Skip("needs root with usable cgroups: " + l.cgErr.Error())
	}
	return l
}

// useUnifiedV2 makes l create its sandboxes' cgroups on this machine's
// cgroup2 hierarchy, without limits (the controller-less unified
// hierarchy of a hybrid machine), or skips the test without one.
func useUnifiedV2(t *testing.T, l *Launcher) *cgroup.Layout {
	t.Helper()
	cg, err := cgroup.UnifiedWithoutLimits(testNames.cgroupParent)
	if err != nil {
		t.Skip("needs a cgroup2 hierarchy: ", err)
	}
	l.cg = cg
	t.Cleanup(func() { _ = os.Remove(cg.Roots()[0]) })
	return cg
}

// newSpec returns a spec with a fresh id, its Dir under the launcher's
// state dir and its log inside it.
func newSpec(t *testing.T, l *Launcher) Spec {
	t.Helper()
	id := "microvm-" + uuid.NewString()
	dir := filepath.Join(l.opts.StateDir, "sandboxes", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return Spec{ID: id, Dir: dir, LogPath: filepath.Join(dir, "rayd.log")}
}

// launch launches spec and terminates the sandbox when the test ends.
func launch(t *testing.T, l *Launcher, spec Spec) Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inst, err := l.Launch(ctx, spec)
	if err != nil {
		log, _ := os.ReadFile(spec.LogPath)
		t.Fatalf("Launch: %v\nlog:\n%s", err, log)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := inst.Terminate(ctx); err != nil {
			t.Errorf("Terminate: %v", err)
		}
	})
	return inst
}

// httpClient keeps no idle connections, so that descriptor counts in the
// leak test are stable. Its timeout bounds a whole streamed command: one
// minute, because TestHostIdentity's 600 forks under a loaded CI (a race
// build of rayd, the other packages' tests beside it) once took over 15 s.
var httpClient = &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}

func postJSON(t *testing.T, url string, body any) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := httpClient.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %v", url, resp.StatusCode, err)
	}
	return out
}

func health(t *testing.T, apiAddr string) map[string]any {
	t.Helper()
	return postJSON(t, "http://"+apiAddr+"/rayito.rayd.v1.HealthService/Health", map[string]any{})
}

// install calls the /run hook as the platform and returns the token.
func install(t *testing.T, inst Instance) string {
	t.Helper()
	token, outcome := tryInstall(t, inst)
	if outcome != "installed" {
		t.Fatalf("/run: outcome %q", outcome)
	}
	return token
}

// tryInstall calls the /run hook and returns the token and the outcome.
func tryInstall(t *testing.T, inst Instance) (string, string) {
	t.Helper()
	token, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	digest, err := accesstoken.Digest(token)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := runpayload.Encode(&runpayload.Payload{V: runpayload.Version, TokenSHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	out := postJSON(t, "http://"+inst.HooksAddr()+"/aws/lambda-microvms/runtime/v1/run",
		map[string]string{"microvmId": inst.ID(), "runHookPayload": payload})
	outcome, _ := out["outcome"].(string)
	return token, outcome
}

// openStart starts a process through ProcessService/Start (Connect JSON
// streaming over HTTP/1.1) and returns the response stream.
func openStart(t *testing.T, apiAddr, token string, cmd string, args ...string) *http.Response {
	t.Helper()
	return openStartAs(t, apiAddr, token, "", cmd, args...)
}

func openStartAs(t *testing.T, apiAddr, token, user string, cmd string, args ...string) *http.Response {
	t.Helper()
	resp, err := tryOpenStart(apiAddr, token, user, cmd, args...)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// tryOpenStart is openStartAs returning its error.
func tryOpenStart(apiAddr, token, user string, cmd string, args ...string) (*http.Response, error) {
	req := map[string]any{"process": map[string]any{"cmd": cmd, "args": args}}
	if user != "" {
		req["user"] = map[string]any{"username": user}
	}
	body, _ := json.Marshal(req)
	var env bytes.Buffer
	env.WriteByte(0)
	_ = binary.Write(&env, binary.BigEndian, uint32(len(body)))
	env.Write(body)
	hr, _ := http.NewRequest(http.MethodPost, "http://"+apiAddr+"/rayito.rayd.v1.ProcessService/Start", &env)
	hr.Header.Set("Content-Type", "application/connect+json")
	hr.Header.Set("x-access-token", token)
	resp, err := httpClient.Do(hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("Start: HTTP %d", resp.StatusCode)
	}
	return resp, nil
}

func readEnvelope(r *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > 4<<20 {
		return 0, nil, fmt.Errorf("message of %d bytes", n)
	}
	msg := make([]byte, n)
	_, err := io.ReadFull(r, msg)
	return hdr[0], msg, err
}

// run runs a shell script in the sandbox and returns its stdout and its
// end message.
func run(t *testing.T, apiAddr, token, script string) (string, map[string]any) {
	t.Helper()
	return runAs(t, apiAddr, token, "", script)
}

func runAs(t *testing.T, apiAddr, token, user, script string) (string, map[string]any) {
	t.Helper()
	out, end, err := tryRunAs(apiAddr, token, user, script)
	if err != nil {
		t.Fatal(err)
	}
	return out, end
}

// tryRun runs a script like run and returns its stdout, or an error when
// the call failed or the script did not exit 0.
func tryRun(apiAddr, token, script string) (string, error) {
	out, end, err := tryRunAs(apiAddr, token, "", script)
	if err == nil && end["exitCode"] != nil { // protojson leaves out a 0
		err = fmt.Errorf("script ended %v", end)
	}
	return out, err
}

// tryRunAs is runAs returning its error.
func tryRunAs(apiAddr, token, user, script string) (string, map[string]any, error) {
	resp, err := tryOpenStart(apiAddr, token, user, "sh", "-c", script)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var stdout strings.Builder
	var end map[string]any
	for {
		flags, msg, err := readEnvelope(r)
		if err != nil {
			return "", nil, fmt.Errorf("stream ended without an end-of-stream message: %w", err)
		}
		if flags&2 != 0 {
			var eos struct {
				Error *struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(msg, &eos); err != nil {
				return "", nil, err
			}
			if eos.Error != nil {
				return "", nil, fmt.Errorf("Start failed: %s: %s", eos.Error.Code, eos.Error.Message)
			}
			return stdout.String(), end, nil
		}
		m := map[string]any{}
		if err := json.Unmarshal(msg, &m); err != nil {
			return "", nil, err
		}
		if d, ok := m["data"].(map[string]any); ok {
			if s, ok := d["stdout"].(string); ok {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return "", nil, err
				}
				stdout.Write(b)
			}
		}
		if e, ok := m["end"].(map[string]any); ok {
			end = e
		}
	}
}

// startedPid starts a long process and returns its pid (in the sandbox's
// pid namespace) and the open stream.
func startedPid(t *testing.T, apiAddr, token string, cmd string, args ...string) (int, io.Closer) {
	t.Helper()
	resp := openStart(t, apiAddr, token, cmd, args...)
	_, msg, err := readEnvelope(bufio.NewReader(resp.Body))
	if err != nil {
		resp.Body.Close()
		t.Fatal(err)
	}
	var m struct {
		Start struct {
			Pid int `json:"pid"`
		} `json:"start"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || m.Start.Pid == 0 {
		resp.Body.Close()
		t.Fatalf("first message %s: %v", msg, err)
	}
	return m.Start.Pid, resp.Body
}

// lines returns the output lines after "== name ==" up to the next marker.
func section(out, name string) string {
	_, rest, ok := strings.Cut(out, "== "+name+" ==\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "== "); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimRight(rest, "\n")
}
