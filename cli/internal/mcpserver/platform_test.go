package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestMain(m *testing.M) {
	// The local platform starts each sandbox by re-executing this binary.
	localvm.MaybeRunInit()
	os.Exit(m.Run())
}

// startPlatform serves a local platform of the test's own (state dir,
// subnet) and returns the SDK options that reach it.
func startPlatform(t *testing.T) []rayito.Option {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runs sandboxes on the local platform with full isolation: run the tests as root")
	}
	if testing.Short() {
		t.Skip("starts a local platform")
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := localvm.New(ctx, localvm.Options{StateDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Subnet: netip.MustParsePrefix("10.223.0.0/16")})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		if err := srv.TerminateAll(dctx); err != nil {
			t.Errorf("TerminateAll: %v", err)
		}
		cancel()
		<-done
		_ = srv.Close(dctx)
	})
	return []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint("http://" + ln.Addr().String()), rayito.WithTokenStoreDir(t.TempDir())}
}

// connect serves s to an in-memory MCP client.
func connect(t *testing.T, s *Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and decodes its structured result into out; it
// returns the tool error's text ("" when none).
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return strings.Join(text, "\n")
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v: %s", tool, err, b)
		}
	}
	return ""
}

func mustCall(t *testing.T, cs *mcp.ClientSession, tool string, args any, out any) {
	t.Helper()
	if msg := call(t, cs, tool, args, out); msg != "" {
		t.Fatalf("%s: tool error: %s", tool, msg)
	}
}

// TestTools drives every tool against the real local platform.
func TestTools(t *testing.T) {
	sdk := startPlatform(t)
	s := New(Options{SDK: sdk, Version: "test"})
	cs := connect(t, s)

	var created CreateOutput
	mustCall(t, cs, "create", map[string]any{"timeout_seconds": 600, "envs": map[string]string{"GREETING": "hola"}, "metadata": map[string]string{"by": "mcp-test"}}, &created)
	id := created.SandboxID
	if id == "" || created.ExpiresAt == "" {
		t.Fatalf("create: %+v", created)
	}

	var run RunCommandOutput
	mustCall(t, cs, "run_command", map[string]any{"sandbox_id": id, "command": "echo $GREETING; echo oops >&2; pwd; exit 3"}, &run)
	if run.ExitCode != 3 || run.Stdout != "hola\n/home/user\n" || run.Stderr != "oops\n" || run.Note != "" {
		t.Errorf("run_command: %+v", run)
	}
	mustCall(t, cs, "run_command", map[string]any{"sandbox_id": id, "command": "pwd", "cwd": "/tmp"}, &run)
	if run.Stdout != "/tmp\n" || run.ExitCode != 0 || run.Status != "exited" {
		t.Errorf("run_command with cwd: %+v", run)
	}
	mustCall(t, cs, "run_command", map[string]any{"sandbox_id": id, "command": "head -c 250000 /dev/zero | tr '\\0' x"}, &run)
	if n := len(run.Stdout); n > MaxOutputChars+100 || !strings.Contains(run.Stdout, "150000 characters cut here") || !strings.Contains(run.Note, "150000 characters") {
		t.Errorf("a long output: %d characters, note %q", n, run.Note)
	}
	mustCall(t, cs, "run_command", map[string]any{"sandbox_id": id, "command": "sleep 30", "timeout_seconds": 1}, &run)
	if run.Status != "timeout" {
		t.Errorf("a timeout: %+v", run)
	}

	var wrote WriteFileOutput
	mustCall(t, cs, "write_file", map[string]any{"sandbox_id": id, "path": "dir/hello.txt", "content": "hi there\n"}, &wrote)
	if wrote.Path != "/home/user/dir/hello.txt" || wrote.Size != 9 {
		t.Errorf("write_file: %+v", wrote)
	}
	mustCall(t, cs, "write_file", map[string]any{"sandbox_id": id, "path": "/home/user/dir/bin", "content": "AAH/", "encoding": "base64"}, &wrote)
	var read ReadFileOutput
	mustCall(t, cs, "read_file", map[string]any{"sandbox_id": id, "path": "/home/user/dir/hello.txt"}, &read)
	if read.Content != "hi there\n" || read.Encoding != "utf-8" || read.Size != 9 {
		t.Errorf("read_file: %+v", read)
	}
	mustCall(t, cs, "read_file", map[string]any{"sandbox_id": id, "path": "dir/bin"}, &read)
	if read.Content != "AAH/" || read.Encoding != "base64" {
		t.Errorf("read_file of bytes: %+v", read)
	}
	mustCall(t, cs, "run_command", map[string]any{"sandbox_id": id, "command": "head -c 1000000 /dev/zero | tr '\\0' y > big"}, &run)
	mustCall(t, cs, "read_file", map[string]any{"sandbox_id": id, "path": "big"}, &read)
	if len(read.Content) != MaxOutputChars || read.Size != 1000000 || !strings.Contains(read.Note, "900000 bytes of the file were cut") {
		t.Errorf("read_file of a big file: %d bytes, %+v", len(read.Content), read.Note)
	}
	if msg := call(t, cs, "read_file", map[string]any{"sandbox_id": id, "path": "/nope"}, nil); !strings.Contains(msg, "not_found") && !strings.Contains(msg, "not found") {
		t.Errorf("read_file of a missing file: %q", msg)
	}
	var list ListFilesOutput
	mustCall(t, cs, "list_files", map[string]any{"sandbox_id": id, "path": "dir"}, &list)
	if len(list.Entries) != 2 || list.Entries[0].Name != "bin" || list.Entries[1].Name != "hello.txt" || list.Entries[1].Type != "file" {
		t.Errorf("list_files: %+v", list)
	}

	if exec.Command("/usr/bin/python3", "-c", "import ipykernel").Run() == nil {
		var code RunCodeOutput
		mustCall(t, cs, "run_code", map[string]any{"sandbox_id": id, "code": "x = 6 * 7\nprint('printed')\nx"}, &code)
		if code.Result != "42" || code.Stdout != "printed\n" || code.Error != nil {
			t.Errorf("run_code: %+v", code)
		}
		mustCall(t, cs, "run_code", map[string]any{"sandbox_id": id, "code": "x / 0"}, &code)
		if code.Error == nil || code.Error.Name != "ZeroDivisionError" {
			t.Errorf("run_code that raises: %+v", code)
		}
	} else {
		t.Log("run_code not tried: python3-ipykernel is not installed (make deps)")
	}

	// A sandbox the server did not create: usable by its id, never
	// killed by the server's cleanup; refused with OnlyOwn.
	foreign, err := rayito.Create(t.Context(), append(sdk, rayito.WithTimeout(10*time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = foreign.Kill(context.Background()) })
	mustCall(t, cs, "run_command", map[string]any{"sandbox_id": foreign.ID(), "command": "echo foreign"}, &run)
	if run.Stdout != "foreign\n" {
		t.Errorf("run_command in a foreign sandbox: %+v", run)
	}
	var sbxs ListSandboxesOutput
	mustCall(t, cs, "list_sandboxes", nil, &sbxs)
	own := map[string]bool{}
	for _, e := range sbxs.Sandboxes {
		own[e.SandboxID] = e.Own
	}
	if len(own) != 2 || !own[id] || own[foreign.ID()] {
		t.Errorf("list_sandboxes: %+v", sbxs)
	}

	strict := New(Options{SDK: sdk, OnlyOwn: true, MaxSandboxes: 1})
	scs := connect(t, strict)
	if msg := call(t, scs, "run_command", map[string]any{"sandbox_id": foreign.ID(), "command": "true"}, nil); !strings.Contains(msg, "--only-own") {
		t.Errorf("--only-own let a foreign sandbox be used: %q", msg)
	}
	if msg := call(t, scs, "kill", map[string]any{"sandbox_id": foreign.ID()}, nil); !strings.Contains(msg, "--only-own") {
		t.Errorf("--only-own let a foreign sandbox be killed: %q", msg)
	}
	mustCall(t, scs, "list_sandboxes", nil, &sbxs)
	if len(sbxs.Sandboxes) != 0 {
		t.Errorf("--only-own lists others: %+v", sbxs)
	}
	var second CreateOutput
	mustCall(t, scs, "create", map[string]any{}, &second)
	if msg := call(t, scs, "create", map[string]any{}, nil); !strings.Contains(msg, "--max-sandboxes") {
		t.Errorf("a create past --max-sandboxes: %q", msg)
	}
	// One that ended (killed elsewhere) no longer counts.
	if err := rayito.Kill(t.Context(), second.SandboxID, sdk...); err != nil {
		t.Fatal(err)
	}
	var third CreateOutput
	mustCall(t, scs, "create", map[string]any{}, &third)
	if msg := call(t, scs, "kill", map[string]any{"sandbox_id": second.SandboxID}, nil); !strings.Contains(msg, "--only-own") {
		t.Errorf("kill of an ended sandbox the server forgot: %q", msg)
	}
	killed, err := strict.Close(t.Context(), false)
	if err != nil || len(killed) != 1 || killed[0] != third.SandboxID {
		t.Errorf("Close: %v %v", killed, err)
	}

	// Bad arguments are tool errors, before any call.
	for _, args := range []map[string]any{
		{"sandbox_id": "../x", "command": "true"},
		{"sandbox_id": id, "command": " "},
		{"sandbox_id": id, "command": "true", "timeout_seconds": 99999},
	} {
		if msg := call(t, cs, "run_command", args, nil); msg == "" {
			t.Errorf("run_command %v: no error", args)
		}
	}

	var k KillOutput
	mustCall(t, cs, "kill", map[string]any{"sandbox_id": id}, &k)
	if k.Killed != id || len(s.Owned()) != 0 {
		t.Errorf("kill: %+v, owned %v", k, s.Owned())
	}
	mustCall(t, cs, "create", map[string]any{"internet": false}, &created)
	killed, err = s.Close(t.Context(), false)
	if err != nil || len(killed) != 1 || killed[0] != created.SandboxID {
		t.Errorf("Close: %v %v", killed, err)
	}
	if info, err := foreign.Info(t.Context()); err != nil || info.State != "RUNNING" {
		t.Errorf("the foreign sandbox after Close: %v %v", info, err)
	}
	if msg := call(t, cs, "create", map[string]any{}, nil); !strings.Contains(msg, "shutting down") {
		t.Errorf("create after Close: %q", msg)
	}
}
