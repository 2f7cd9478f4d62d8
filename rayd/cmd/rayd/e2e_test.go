package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/runpayload"
)

// TestBinaryEndToEnd builds the real rayd, starts it on loopback, installs
// a token with /run, drives it with plain Connect JSON over HTTP/1.1 (what
// curl would send), and ends it with /terminate.
func TestBinaryEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the rayd binary")
	}
	bin := filepath.Join(t.TempDir(), "rayd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	api, hooks := freeAddr(t), freeAddr(t)
	// rayd reports readiness on fd 3 (-ready-fd): one 'R', then EOF.
	readyR, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer readyR.Close()
	cmd := exec.Command(bin, "--api-addr", api, "--hooks-addr", hooks, "--state-dir", t.TempDir(), "-ready-fd", "3")
	cmd.ExtraFiles = []*os.File{readyW}
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
	p := &runpayload.Payload{V: 1, TokenSHA256: digest}
	if os.Geteuid() != 0 {
		p.User = currentUser(t)
	}
	payload, err := runpayload.Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if out := postJSON(t, "http://"+hooks+"/aws/lambda-microvms/runtime/v1/run", map[string]string{"microvmId": "microvm-e2e", "runHookPayload": payload}); out["outcome"] != "installed" {
		t.Fatalf("/run: %v", out)
	}

	// Health answers a Connect JSON POST without a token.
	health := postJSON(t, "http://"+api+"/rayito.rayd.v1.HealthService/Health", map[string]any{})
	if health["agentReady"] != true || health["sandboxId"] != "microvm-e2e" {
		t.Fatalf("health %v", health)
	}

	start := map[string]any{"process": map[string]any{"cmd": "sh", "args": []string{"-c", "id -u; echo hi"}}}
	if _, status := connectStream(t, api, "", start); status != "unauthenticated" {
		t.Fatalf("Start without token ended with %q", status)
	}
	msgs, status := connectStream(t, api, token, start)
	if status != "" {
		t.Fatalf("Start with token ended with %q", status)
	}
	var stdout strings.Builder
	var end map[string]any
	for _, m := range msgs {
		if d, ok := m["data"].(map[string]any); ok {
			stdout.WriteString(decodeB64(t, d["stdout"]))
		}
		if e, ok := m["end"].(map[string]any); ok {
			end = e
		}
	}
	want := "hi\n"
	if os.Geteuid() == 0 {
		want = "1000\nhi\n"
	}
	if !strings.HasSuffix(stdout.String(), want) || end == nil || end["exited"] != true || end["exitCode"] != nil {
		t.Fatalf("stdout %q end %v", stdout.String(), end)
	}
	if _, ok := msgs[0]["start"]; !ok {
		t.Fatalf("first message %v", msgs[0])
	}

	// A long process, then /terminate: rayd acknowledges, stops it and
	// exits cleanly.
	sleeper, _ := connectStreamFirst(t, api, token, map[string]any{"process": map[string]any{"cmd": "sleep", "args": []string{"60"}}})
	pid := int(sleeper["start"].(map[string]any)["pid"].(float64))
	if out := postJSON(t, "http://"+hooks+"/aws/lambda-microvms/runtime/v1/terminate", nil); out["outcome"] != "terminating" {
		t.Fatalf("/terminate: %v", out)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("rayd exited with %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("rayd did not exit after /terminate\n%s", logs.String())
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("process %d survived /terminate", pid)
	}
	for _, secret := range []string{token, digest, payload} {
		if strings.Contains(logs.String(), secret) {
			t.Fatal("rayd logged a secret")
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func postJSON(t *testing.T, url string, body any) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %v", url, resp.StatusCode, err)
	}
	return out
}

// connectStream sends a Connect server-streaming request in JSON and
// returns the messages and the end-of-stream error code ("" when none).
func connectStream(t *testing.T, api, token string, req any) ([]map[string]any, string) {
	t.Helper()
	resp := openStream(t, api, token, req)
	defer resp.Body.Close()
	var msgs []map[string]any
	r := bufio.NewReader(resp.Body)
	for {
		flags, msg, err := readEnvelope(r)
		if err != nil {
			t.Fatalf("stream ended without an end-of-stream message: %v", err)
		}
		if flags&2 != 0 {
			var eos struct {
				Error *struct{ Code string } `json:"error"`
			}
			if err := json.Unmarshal(msg, &eos); err != nil {
				t.Fatal(err)
			}
			if eos.Error != nil {
				return msgs, eos.Error.Code
			}
			return msgs, ""
		}
		m := map[string]any{}
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
}

// connectStreamFirst returns the first message and leaves the stream open.
func connectStreamFirst(t *testing.T, api, token string, req any) (map[string]any, io.Closer) {
	t.Helper()
	resp := openStream(t, api, token, req)
	t.Cleanup(func() { resp.Body.Close() })
	_, msg, err := readEnvelope(bufio.NewReader(resp.Body))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatal(err)
	}
	return m, resp.Body
}

func openStream(t *testing.T, api, token string, req any) *http.Response {
	t.Helper()
	body, _ := json.Marshal(req)
	var env bytes.Buffer
	env.WriteByte(0)
	_ = binary.Write(&env, binary.BigEndian, uint32(len(body)))
	env.Write(body)
	hr, _ := http.NewRequest(http.MethodPost, "http://"+api+"/rayito.rayd.v1.ProcessService/Start", &env)
	hr.Header.Set("Content-Type", "application/connect+json")
	if token != "" {
		hr.Header.Set("x-access-token", token)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readEnvelope(r *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > 1<<20 {
		return 0, nil, fmt.Errorf("message of %d bytes", n)
	}
	msg := make([]byte, n)
	_, err := io.ReadFull(r, msg)
	return hdr[0], msg, err
}

func decodeB64(t *testing.T, v any) string {
	t.Helper()
	s, _ := v.(string)
	var out []byte
	if err := json.Unmarshal([]byte(`"`+s+`"`), &out); err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func currentUser(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
