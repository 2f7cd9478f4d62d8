package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/testcgroup"
)

// TestOOMHogHelper is not a test: TestBinaryOOMKilled has rayd start it as
// a process that allocates in a memory cgroup until the OOM killer ends it.
func TestOOMHogHelper(t *testing.T) {
	if !testcgroup.Hog() {
		t.Skip("helper process for TestBinaryOOMKilled")
	}
}

// TestBinaryOOMKilled runs the real rayd as the local platform does, with
// -memory-events-fd on a memory cgroup's events file; a process it starts
// joins that cgroup and allocates beyond its limit: its stream ends with
// status oom_killed, exit code 137, signal 9.
func TestBinaryOOMKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rayd binary")
	}
	cg := testcgroup.NewMemory(t, 64<<20)
	events, err := os.Open(cg.Events)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	hog, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "rayd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	api, hooks := freeAddr(t), freeAddr(t)
	readyR, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer readyR.Close()
	cmd := exec.Command(bin, "--api-addr", api, "--hooks-addr", hooks, "--state-dir", t.TempDir(),
		"-ready-fd", "3", "-memory-events-fd", "4", "-isolation", "full",
		// Killed with SIGKILL at cleanup: no eager kernel to leave behind.
		"-kernel-start", "lazy")
	cmd.ExtraFiles = []*os.File{readyW, events}
	cmd.Env = append(os.Environ(), "RAYITO_ALLOW_ROOT=1")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyW.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	_ = readyR.SetReadDeadline(time.Now().Add(30 * time.Second))
	if got, err := io.ReadAll(readyR); err != nil || string(got) != "R" {
		t.Fatalf("ready fd gave %q, %v; logs:\n%s", got, err, logs.String())
	}

	token, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := accesstoken.Digest(token)
	payload, err := runpayload.Encode(&runpayload.Payload{V: 1, TokenSHA256: digest, User: "root"})
	if err != nil {
		t.Fatal(err)
	}
	if out := postJSON(t, "http://"+hooks+"/aws/lambda-microvms/runtime/v1/run", map[string]string{"microvmId": "microvm-oom", "runHookPayload": payload}); out["outcome"] != "installed" {
		t.Fatalf("/run: %v", out)
	}
	msgs, status := connectStream(t, api, token, map[string]any{
		"process": map[string]any{
			"cmd":  hog,
			"args": []string{"-test.run=^TestOOMHogHelper$", "-test.count=1"},
			"envs": map[string]string{testcgroup.HogEnv: cg.Procs},
			"cwd":  "/",
		},
	})
	if status != "" {
		t.Fatalf("Start ended with %q\n%s", status, logs.String())
	}
	var end map[string]any
	var stderr strings.Builder
	for _, m := range msgs {
		if d, ok := m["data"].(map[string]any); ok {
			stderr.WriteString(decodeB64(t, d["stderr"]))
		}
		if e, ok := m["end"].(map[string]any); ok {
			end = e
		}
	}
	if end == nil || end["status"] != "oom_killed" || end["exitCode"] != float64(137) || end["signal"] != float64(9) || end["exited"] == true {
		t.Fatalf("end %v (stderr %q)\n%s", end, stderr.String(), logs.String())
	}
}
