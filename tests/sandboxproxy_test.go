package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSandboxProxyOnLocalPlatform: `rayito sandbox proxy ID --port 8000`
// (the real binary) serves what python3 -m http.server serves in a
// sandbox of a real local platform on <id>.localhost and 127.0.0.1, a
// rebinding Host gets 421 and never reaches the sandbox, and the proxy
// exits 1 with the ended-sandbox message once the sandbox is killed.
func TestSandboxProxyOnLocalPlatform(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: the local platform's sandboxes run with full isolation")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbx := p.create(ctx)
	defer sbx.Kill(context.Background())
	if _, err := sbx.Commands.Start(ctx, "mkdir -p /tmp/www && echo hi > /tmp/www/proxied-file.txt && cd /tmp/www && exec python3 -m http.server 8000"); err != nil {
		t.Fatal(err)
	}

	bin := rayitoBin(t)
	cmd := exec.Command(bin, "sandbox", "proxy", sbx.ID(), "--port", "8000", "--json")
	cmd.Env = append(os.Environ(), "RAYITO_ENDPOINT="+p.endpoint, "RAYITO_BACKEND=", "XDG_STATE_HOME="+t.TempDir(),
		"RAYITO_ACCESS_TOKEN="+sbx.AccessToken())
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	var out struct {
		URL      string `json:"url"`
		LocalURL string `json:"local_url"`
		Port     int    `json:"port"`
	}
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&out); err != nil {
		t.Fatalf("announce: %v; stderr %s", err, stderr.String())
	}
	if out.URL != fmt.Sprintf("http://%s.localhost:%d/", sbx.ID(), out.Port) || out.LocalURL != fmt.Sprintf("http://127.0.0.1:%d/", out.Port) {
		t.Fatalf("announced %+v", out)
	}
	raw := func(host string) string {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", out.Port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: test\r\n\r\n", host)
		b, _ := io.ReadAll(c)
		return string(b)
	}
	// The server in the sandbox may take a moment to listen.
	var ans string
	for deadline := time.Now().Add(30 * time.Second); ; {
		ans = raw(fmt.Sprintf("%s.localhost:%d", sbx.ID(), out.Port))
		if strings.HasPrefix(ans, "HTTP/1.1 200 ") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.HasPrefix(ans, "HTTP/1.1 200 ") || !strings.Contains(ans, "proxied-file.txt") || !strings.Contains(ans, "Connection: close\r\n") {
		t.Fatalf("GET through the proxy: %.300q; stderr %s", ans, stderr.String())
	}
	// The same with an ordinary client on 127.0.0.1.
	resp, err := http.Get(out.LocalURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("proxied-file.txt")) {
		t.Fatalf("GET %s: %d %.200q", out.LocalURL, resp.StatusCode, body)
	}
	if ans := raw(fmt.Sprintf("rebind.evil.com:%d", out.Port)); !strings.HasPrefix(ans, "HTTP/1.1 421 ") {
		t.Fatalf("rebinding Host: %.200q", ans)
	}

	// The sandbox ends: the proxy exits 1 and says so.
	if err := sbx.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if err == nil || !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit %v; stderr %s", err, stderr.String())
		}
		if !strings.Contains(stderr.String(), "rayito: sandbox "+sbx.ID()+" ended") {
			t.Fatalf("stderr %s", stderr.String())
		}
		if strings.Contains(stderr.String(), sbx.AccessToken()) {
			t.Fatal("the access token was printed")
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the proxy still runs 30 s after its sandbox ended; stderr %s", stderr.String())
	}
}

// TestSandboxProxyPlatformDown: the proxy exits 1 once its local platform
// stops answering (its sandboxes ended with it).
func TestSandboxProxyPlatformDown(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: the local platform's sandboxes run with full isolation")
	}
	p := startPlatform(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbx := p.create(ctx)
	cmd := exec.Command(rayitoBin(t), "sandbox", "proxy", sbx.ID(), "--port", "8000")
	cmd.Env = append(os.Environ(), "RAYITO_ENDPOINT="+p.endpoint, "RAYITO_BACKEND=", "XDG_STATE_HOME="+t.TempDir(),
		"RAYITO_ACCESS_TOKEN="+sbx.AccessToken())
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stdout.String(), "127.0.0.1"); {
		if time.Now().After(deadline) {
			t.Fatalf("no announcement; stderr %s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.stop(true)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "rayito: sandbox "+sbx.ID()+" ended") {
			t.Fatalf("exit %v; stderr %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the proxy still runs 30 s after its platform stopped; stderr %s", stderr.String())
	}
}
