package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/runpayload"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// TestTemplateDefaultsAndStart: the template's envs, workdir and start
// command apply after /run, the payload's envs win, and agent_ready waits
// for the start command's ready port.
func TestTemplateDefaultsAndStart(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// The sandbox's user must reach it: not under t.TempDir (0700).
	work, err := os.MkdirTemp("", "rayd-template-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(work, "go")
	// The start command listens once the test creates the release file.
	start := fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.05; done; exec python3 -c 'import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", %d)); s.listen(); time.sleep(60)'`, release, port)
	rt := ptemplate.RuntimeOf("web", &ptemplate.Spec{V: 1, Base: "local", Steps: []ptemplate.Step{
		{Env: map[string]string{"GREETING": "template", "KEEP": "template"}},
		{Workdir: work},
	}, Start: &ptemplate.Start{Cmd: start, ReadyPort: port}})
	b, err := ptemplate.EncodeRuntime(rt)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "template.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, func(c *Config) { c.TemplateConfig = cfgPath })
	h.Run(func(p *runpayload.Payload) { p.Envs = map[string]string{"GREETING": "payload"} })
	if hr := h.Health(); hr.GetAgentReady() || !hr.GetFeatures().GetTemplateStart() {
		t.Fatalf("ready before the start command listens: %v", hr)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !h.Health().GetAgentReady() {
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s, err := h.Processes().Start(context.Background(), connect.NewRequest(raydtest.Shell(`echo "$GREETING $KEEP $(pwd)"`)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(raydtest.Collect(t, s).Stdout), "payload template "+work; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	list, err := h.Processes().List(context.Background(), connect.NewRequest(&raydv1.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range list.Msg.GetProcesses() {
		found = found || p.GetTag() == "template-start"
	}
	if !found {
		t.Fatalf("no template-start process in %v", list.Msg)
	}
}

// TestTemplateConfigRejected: a malformed configuration stops rayd from
// starting, without echoing the file.
func TestTemplateConfigRejected(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "template.json")
	if err := os.WriteFile(p, []byte(`{"v":1,"name":"x","workdir":"/a","user":"user","envs":{"SECRET=1":"hunter2"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{StateDir: t.TempDir(), Egress: EgressOff, TemplateConfig: p}, nil, raydtest.Supervisor())
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err %v", err)
	}
}
