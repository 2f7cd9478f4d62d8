package code_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/go-zeromq/zmq4"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/daemon"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/identity"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

func createContext(h *daemontest.Harness, envs map[string]string) string {
	h.T().Helper()
	resp, err := h.Code().CreateContext(context.Background(), connect.NewRequest(&raydv1.CreateContextRequest{Envs: envs}))
	if err != nil {
		h.T().Fatal(err)
	}
	return resp.Msg.GetContext().GetContextId()
}

func TestCodeMatplotlibPNG(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	c := execCell(h, nil, "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt; plt.plot([1,2]); plt.show()", 0)
	var png string
	for _, r := range c.results {
		if r.Png != nil && !r.GetIsMainResult() {
			png = r.GetPng()
		}
	}
	if png == "" {
		t.Fatalf("no display_data image/png: events %v, stderr %q", c.kinds, c.stderr)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(png))
	if err != nil || !strings.HasPrefix(string(raw), "\x89PNG") {
		t.Fatalf("png is not base64 PNG (err %v)", err)
	}
}

func TestCodeRichResults(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	c := execCell(h, nil, "from IPython.display import display, HTML, JSON, Markdown\n"+
		"display(HTML('<b>x</b>')); display(Markdown('*m*'))\n"+
		"display({'application/json': {'a': 1}, 'application/x-custom': 'c', 'text/plain': 'j'}, raw=True)", 0)
	if len(c.results) != 3 {
		t.Fatalf("results %v", c.results)
	}
	if c.results[0].GetHtml() != "<b>x</b>" || c.results[1].GetMarkdown() != "*m*" {
		t.Errorf("html/markdown: %v", c.results)
	}
	if c.results[2].GetJson() != `{"a":1}` || c.results[2].GetExtra()["application/x-custom"] != "c" {
		t.Errorf("json/extra: %v", c.results[2])
	}
}

func TestCodeContextsAndEnvs(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	a := createContext(h, map[string]string{"CTX_VAR": "ctx-a"})
	b := createContext(h, nil)
	execCell(h, &a, "secret = 7", 0)
	if c := execCell(h, &a, "secret", 0); c.main().GetText() != "7" {
		t.Fatalf("state did not persist: %v", c.results)
	}
	if c := execCell(h, &b, "secret", 0); c.err == nil || c.err.GetName() != "NameError" {
		t.Fatalf("contexts share state: %v %v", c.results, c.err)
	}
	if c := execCell(h, &a, "import os; os.environ.get('CTX_VAR')", 0); c.main().GetText() != "'ctx-a'" {
		t.Fatalf("context env: %v", c.results)
	}
	// Per-execution envs are set for the cell and restored after it.
	ctx := context.Background()
	s, err := h.Code().Execute(ctx, connect.NewRequest(&raydv1.ExecuteRequest{ContextId: &a, Code: "os.environ.get('CELL_VAR'), os.environ.get('CTX_VAR')", Envs: map[string]string{"CELL_VAR": "x\"'\\y", "CTX_VAR": "over"}}))
	if err != nil {
		t.Fatal(err)
	}
	if c := collectCell(t, s); c.main().GetText() != `('x"\'\\y', 'over')` {
		t.Fatalf("exec envs: %v", c.results)
	}
	if c := execCell(h, &a, "os.environ.get('CELL_VAR'), os.environ.get('CTX_VAR')", 0); c.main().GetText() != "(None, 'ctx-a')" {
		t.Fatalf("exec envs not restored: %v", c.results)
	}
	list, err := h.Code().ListContexts(ctx, connect.NewRequest(&raydv1.ListContextsRequest{}))
	// a and b, after default-python (listed from the start).
	if err != nil || len(list.Msg.GetContexts()) != 3 {
		t.Fatalf("list: %v %v", list, err)
	}
	// Restart loses state, keeps the id.
	if _, err := h.Code().RestartContext(ctx, connect.NewRequest(&raydv1.RestartContextRequest{ContextId: a})); err != nil {
		t.Fatal(err)
	}
	if c := execCell(h, &a, "secret", 0); c.err == nil || c.err.GetName() != "NameError" {
		t.Fatalf("restart kept state: %v", c.results)
	}
	// Destroy: no kernel process or directory left.
	var dir string
	var pid int
	for _, k := range h.Daemon.Code.Kernels() {
		if k.ContextID == a {
			dir, pid = k.Dir, k.Pid
		}
	}
	if dir == "" {
		t.Fatal("no kernel listed for the context")
	}
	if _, err := h.Code().DestroyContext(ctx, connect.NewRequest(&raydv1.DestroyContextRequest{ContextId: a})); err != nil {
		t.Fatal(err)
	}
	requireGone(t, pid, dir)
	if _, err := h.Code().DestroyContext(ctx, connect.NewRequest(&raydv1.DestroyContextRequest{ContextId: "default-python"})); raydtest.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("destroying default-python: %v", err)
	}
	if _, err := h.Code().DestroyContext(ctx, connect.NewRequest(&raydv1.DestroyContextRequest{ContextId: a})); raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("destroying twice: %v", err)
	}
	// Daemon stop: nothing left either.
	base := h.Daemon.Code.BaseDir()
	ks := h.Daemon.Code.Kernels()
	h.Stop()
	for _, k := range ks {
		requireGone(t, k.Pid, k.Dir)
	}
	if _, err := os.Stat(base); !os.IsNotExist(err) {
		t.Errorf("kernel base dir left after stop: %v", err)
	}
}

// requireGone checks a kernel process and its directory are gone.
func requireGone(t *testing.T, pid int, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("kernel dir left: %v", err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("kernel pid %d still alive", pid)
	}
}

func TestCodeLimitsAndErrors(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	ctx := context.Background()
	big := strings.Repeat("#", 1<<20+1)
	s, err := h.Code().Execute(ctx, connect.NewRequest(&raydv1.ExecuteRequest{Code: big}))
	if err == nil {
		for s.Receive() {
		}
		err = s.Err()
	}
	if raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("code over 1 MiB: %v", err)
	}
	bash := "bash"
	if _, err := os.Stat("/usr/share/jupyter/kernels/bash"); os.IsNotExist(err) {
		_, err := h.Code().CreateContext(ctx, connect.NewRequest(&raydv1.CreateContextRequest{Language: bash}))
		if raydtest.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), "bash kernel") {
			t.Fatalf("bash without its kernel: %v", err)
		}
	}
	execCell(h, nil, "1", 0) // default-python exists now
	var made int
	for range 10 {
		if _, err := h.Code().CreateContext(ctx, connect.NewRequest(&raydv1.CreateContextRequest{})); err != nil {
			if raydtest.CodeOf(err) != connect.CodeResourceExhausted {
				t.Fatalf("context %d: %v", made+2, err)
			}
			break
		}
		made++
	}
	if made+1 != 8 {
		t.Fatalf("%d contexts besides default-python, want 7 (8 in all)", made)
	}
	if _, err := h.Code().Reattach(ctx, connect.NewRequest(&raydv1.ReattachRequest{ContextId: "default-python", ExecutionId: "nope"})); err == nil {
		t.Log("reattach to unknown answered at Receive")
	}
}

func TestCodeTimeoutInterruptAndRestart(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	execCell(h, nil, "kept = 1", 0)
	start := time.Now()
	c := execCell(h, nil, "import time\ntime.sleep(30)", 300)
	if c.timeout == nil || c.timeout.GetKernelRestarted() || c.err != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("interruptible timeout: %v %v (events %v)", c.timeout, c.err, c.kinds)
	}
	if c := execCell(h, nil, "kept", 0); c.main().GetText() != "1" {
		t.Fatalf("state lost after an interrupt: %v", c.kinds)
	}
	// A cell that ignores SIGINT: restarted after the 5 s grace.
	c = execCell(h, nil, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)", 300)
	if c.timeout == nil || !c.timeout.GetKernelRestarted() {
		t.Fatalf("stuck timeout: %v (events %v)", c.timeout, c.kinds)
	}
	if c := execCell(h, nil, "kept", 0); c.err == nil || c.err.GetName() != "NameError" {
		t.Fatalf("kernel not restarted: %v", c.kinds)
	}
}

func TestCodeKernelDied(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	execCell(h, nil, "x = 1", 0)
	ks := h.Daemon.Code.Kernels()
	if len(ks) != 1 {
		t.Fatalf("kernels %v", ks)
	}
	ctx := context.Background()
	s, err := h.Code().Execute(ctx, connect.NewRequest(&raydv1.ExecuteRequest{Code: "print('go', flush=True)\nimport time\ntime.sleep(60)"}))
	if err != nil {
		t.Fatal(err)
	}
	c := &cell{}
	for s.Receive() {
		c.add(t, s.Msg())
		if c.stdout == "go\n" && c.kinds[len(c.kinds)-1] == "stdout" {
			// Killed from outside rayd.
			if err := syscall.Kill(ks[0].Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	c.check(t)
	if c.streamEr.GetCode() != "kernel_died" {
		t.Fatalf("events %v, stream_error %v", c.kinds, c.streamEr)
	}
	if c := execCell(h, nil, "1+2", 0); c.main().GetText() != "3" {
		t.Fatalf("no recovery: %v", c.kinds)
	}
}

func TestCodeReattachAfterSuspend(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	execCell(h, nil, "import random; random.seed(1); first = random.random(); random.seed(1)", 0)
	ctx := context.Background()
	s, err := h.Code().Execute(ctx, connect.NewRequest(&raydv1.ExecuteRequest{Code: "import time\nfor i in range(6):\n    print(i, flush=True)\n    time.sleep(0.3)\n'done'"}))
	if err != nil {
		t.Fatal(err)
	}
	c := &cell{}
	for s.Receive() {
		c.add(t, s.Msg())
		if strings.Contains(c.stdout, "1\n") {
			break
		}
	}
	h.Hook("suspend", nil)
	for s.Receive() {
		c.add(t, s.Msg())
	}
	if raydtest.CodeOf(s.Err()) != connect.CodeUnavailable {
		t.Fatalf("cut stream: %v", s.Err())
	}
	s.Close()
	h.Hook("resume", nil)
	last := c.seqs[len(c.seqs)-1]
	r, err := h.Code().Reattach(ctx, connect.NewRequest(&raydv1.ReattachRequest{ContextId: "default-python", ExecutionId: c.id, FromSeq: last + 1}))
	if err != nil {
		t.Fatal(err)
	}
	for r.Receive() {
		c.add(t, r.Msg())
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	c.check(t)
	if c.stdout != "0\n1\n2\n3\n4\n5\n" || c.main().GetText() != "'done'" {
		t.Fatalf("lost events: stdout %q, events %v", c.stdout, c.kinds)
	}
	// A full replay after the end.
	r, err = h.Code().Reattach(ctx, connect.NewRequest(&raydv1.ReattachRequest{ContextId: "default-python", ExecutionId: c.id}))
	if err != nil {
		t.Fatal(err)
	}
	if again := collectCell(t, r); again.stdout != c.stdout {
		t.Fatalf("replay: %q", again.stdout)
	}
	// /resume reseeded random: the stream seeded with 1 moved on.
	if c := execCell(h, nil, "random.random() == first", 0); c.main().GetText() != "False" {
		t.Fatalf("random not reseeded on resume: %v", c.results)
	}
}

// TestCodeTwoSandboxes: different kernel keys, different random streams,
// and a message signed with another key is never executed.
func TestCodeTwoSandboxes(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	a, b := daemontest.New(t), daemontest.New(t)
	a.Run(nil)
	b.Run(nil)
	ra, rb := execCell(a, nil, "import random; random.getrandbits(64)", 0), execCell(b, nil, "import random; random.getrandbits(64)", 0)
	if ra.main().GetText() == rb.main().GetText() {
		t.Fatal("two sandboxes share a random stream")
	}
	ka, kb := readConnection(t, a), readConnection(t, b)
	if ka.Key == kb.Key || len(ka.Key) != 64 {
		t.Fatalf("kernel keys: %d chars, equal %v", len(ka.Key), ka.Key == kb.Key)
	}
	// Forge an execute_request to a's kernel signed with b's key.
	marker := filepath.Join(t.TempDir(), "forged")
	dealer := zmq4.NewDealer(context.Background())
	defer dealer.Close()
	if err := dealer.Dial("ipc://" + ka.IP + fmt.Sprintf("-%d", ka.ShellPort)); err != nil {
		t.Fatal(err)
	}
	header := fmt.Sprintf(`{"msg_id":"forged-1","session":"s","username":"x","date":"","msg_type":"execute_request","version":"5.3"}`)
	content := fmt.Sprintf(`{"code":"open(%q,'w').write('x')","silent":false,"store_history":false,"user_expressions":{},"allow_stdin":false}`, marker)
	sig := signForTest([]byte(kb.Key), header, "{}", "{}", content)
	if err := dealer.SendMulti(zmq4.NewMsgFrom([]byte("<IDS|MSG>"), []byte(sig), []byte(header), []byte("{}"), []byte("{}"), []byte(content))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	execCell(a, nil, "1", 0) // the kernel serialises: a forged cell would have run by now
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("a message with the wrong HMAC was executed")
	}
	if os.Geteuid() != 0 {
		return
	}
	// Another uid cannot even reach the kernel's sockets or key.
	sock := ka.IP + fmt.Sprintf("-%d", ka.ShellPort)
	script := fmt.Sprintf("import socket,sys\ntry:\n    open(%q).read(); sys.exit(3)\nexcept PermissionError: pass\ns=socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(%q); sys.exit(4)\nexcept PermissionError: sys.exit(0)\n", filepath.Join(filepath.Dir(ka.IP), "connection.json"), sock)
	p, err := raydtest.Supervisor().Start(proc.Spec{Path: "/usr/bin/python3", Args: []string{"python3", "-c", script}, Env: []string{}, Dir: "/",
		Identity: &identity.Identity{Username: "other", UID: 1001, GID: 1001, Home: "/"}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if x, _ := p.Exit(); x.ExitCode != 0 {
		t.Fatalf("another uid reached the kernel (exit %d: 3 read the key, 4 connected)", x.ExitCode)
	}
}

type connInfo struct {
	Key       string `json:"key"`
	IP        string `json:"ip"`
	ShellPort int    `json:"shell_port"`
}

func readConnection(t *testing.T, h *daemontest.Harness) connInfo {
	t.Helper()
	ks := h.Daemon.Code.Kernels()
	if len(ks) == 0 {
		t.Fatal("no kernel")
	}
	f := filepath.Join(ks[0].Dir, "connection.json")
	st, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("connection file mode %v", st.Mode().Perm())
	}
	if dst, err := os.Stat(ks[0].Dir); err != nil || dst.Mode().Perm() != 0o700 {
		t.Errorf("kernel dir mode %v %v", dst.Mode().Perm(), err)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var ci connInfo
	if err := json.Unmarshal(b, &ci); err != nil {
		t.Fatal(err)
	}
	return ci
}

// TestCodeDropInterruptAndQueue: a stream that drops leaves the cell
// running, and Reattach gets all its output; Interrupt stops it (the
// execution records KeyboardInterrupt then end); a dropped cell nobody
// follows again is interrupted after the detach grace; a second Execute
// on a busy context waits for the first.
func TestCodeDropInterruptAndQueue(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.NewWith(t, func(c *daemon.Config) { c.SetTestKnobs(daemon.TestKnobs{DetachGrace: 2 * time.Second}) })
	h.Run(nil)
	execCell(h, nil, "1", 0)
	open := func(code string) (string, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := h.Code().Execute(ctx, connect.NewRequest(&raydv1.ExecuteRequest{Code: code}))
		if err != nil {
			t.Fatal(err)
		}
		if !s.Receive() || s.Msg().GetStarted() == nil {
			t.Fatalf("no started: %v", s.Err())
		}
		return s.Msg().GetStarted().GetExecutionId(), func() { cancel(); s.Close() }
	}
	reattach := func(id string) *cell {
		r, err := h.Code().Reattach(context.Background(), connect.NewRequest(&raydv1.ReattachRequest{ContextId: "default-python", ExecutionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		return collectCell(t, r)
	}
	// Dropped, then followed again: nothing lost, not interrupted.
	id, drop := open("import time\nfor i in range(6):\n    print(i, flush=True)\n    time.sleep(0.1)\n'done'")
	drop()
	if c := reattach(id); c.stdout != "0\n1\n2\n3\n4\n5\n" || c.main().GetText() != "'done'" || c.err != nil {
		t.Fatalf("reattached after a drop: stdout %q, events %v, error %v", c.stdout, c.kinds, c.err)
	}
	// Abandoned: interrupted after the grace (before any other interrupt
	// of this kernel, whose SIGINT could reach a later cell).
	id, drop = open("import time\ntime.sleep(30)")
	drop()
	start := time.Now()
	if c := execCell(h, nil, "'after'", 0); c.main().GetText() != "'after'" || time.Since(start) > 15*time.Second {
		t.Fatalf("after an abandoned cell: %v in %v", c.kinds, time.Since(start))
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Fatalf("the abandoned cell was interrupted after %v, before the grace", el)
	}
	if c := reattach(id); c.err == nil || c.err.GetName() != "KeyboardInterrupt" {
		t.Fatalf("abandoned execution: %v %v", c.kinds, c.err)
	}
	// Interrupt.
	id, drop = open("import time\ntime.sleep(30)")
	drop()
	start = time.Now()
	resp, err := h.Code().Interrupt(context.Background(), connect.NewRequest(&raydv1.InterruptRequest{ContextId: "default-python", ExecutionId: id}))
	if err != nil || !resp.Msg.GetInterrupted() {
		t.Fatalf("Interrupt: %v %v", resp, err)
	}
	// Interrupted at once: before the cell's code runs (on a loaded
	// machine) the kernel ends it without a KeyboardInterrupt.
	if c := reattach(id); (c.err != nil && c.err.GetName() != "KeyboardInterrupt") || c.end == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("interrupted execution: %v %v after %v", c.kinds, c.err, time.Since(start))
	}
	if resp, err := h.Code().Interrupt(context.Background(), connect.NewRequest(&raydv1.InterruptRequest{ContextId: "default-python", ExecutionId: id})); err != nil || resp.Msg.GetInterrupted() {
		t.Fatalf("Interrupt of an ended execution: %v %v", resp, err)
	}
	if _, err := h.Code().Interrupt(context.Background(), connect.NewRequest(&raydv1.InterruptRequest{ContextId: "default-python", ExecutionId: "exec-nope"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Interrupt of an unknown execution: %v", err)
	}
	// Queueing: the second cell starts after the first ended.
	done := make(chan *cell, 1)
	go func() {
		s, err := h.Code().Execute(context.Background(), connect.NewRequest(&raydv1.ExecuteRequest{Code: "import time\ntime.sleep(0.5)\norder = ['first']"}))
		if err != nil {
			t.Error(err)
			done <- nil
			return
		}
		done <- collectCell(t, s)
	}()
	time.Sleep(150 * time.Millisecond)
	if c := execCell(h, nil, "order.append('second'); order", 0); c.main().GetText() != "['first', 'second']" {
		t.Fatalf("queued cell: %v %v", c.results, c.err)
	}
	<-done
}

// TestCodeInvalidUTF8: output, results and errors carrying bytes that
// are not UTF-8 (lone surrogates from surrogateescape) arrive with U+FFFD
// in their place; the stream does not break.
func TestCodeInvalidUTF8(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	bad := "b'a\\xffb'.decode('utf-8', 'surrogateescape')"
	c := execCell(h, nil, "import sys\nsys.stdout.write("+bad+")\nsys.stdout.flush()\nclass R:\n    def __repr__(self):\n        return "+bad+"\nR()", 0)
	if c.stdout != "a\uFFFDb" || c.main().GetText() != "a\uFFFDb" || c.end == nil {
		t.Fatalf("stdout %q, result %q, events %v, stream error %v", c.stdout, c.main().GetText(), c.kinds, c.streamEr)
	}
	c = execCell(h, nil, "raise ValueError("+bad+")", 0)
	if c.err == nil || c.err.GetValue() != "a\uFFFDb" || c.end == nil {
		t.Fatalf("error %v, events %v, stream error %v", c.err, c.kinds, c.streamEr)
	}
}

// TestCodeKernelSpecLanguage: a language other than Python runs the
// kernel its kernelspec names (argv with {connection_file}), through the
// same launch rules and wire protocol. No bash kernel can be installed
// here (no PyPI), so a stand-in kernelspec named bash runs ipykernel.
// A kernelspec whose argv lacks {connection_file} does not count.
func TestCodeKernelSpecLanguage(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	dir, err := os.MkdirTemp("", "rayd-kernelspecs-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	write := func(spec string, argv []string) {
		if err := os.MkdirAll(filepath.Join(dir, spec), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"argv": argv, "display_name": spec, "language": spec})
		if err := os.WriteFile(filepath.Join(dir, spec, "kernel.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("bash", []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"})
	write("deno", []string{"/usr/bin/python3", "-m", "ipykernel_launcher"})
	h := daemontest.NewWith(t, func(c *daemon.Config) { c.SetTestKnobs(daemon.TestKnobs{KernelSpecDirs: []string{dir}}) })
	h.Run(nil)
	ctx := context.Background()
	resp, err := h.Code().CreateContext(ctx, connect.NewRequest(&raydv1.CreateContextRequest{Language: "bash"}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Msg.GetContext().GetContextId()
	if c := execCell(h, &id, "6*7", 0); c.main().GetText() != "42" {
		t.Fatalf("stand-in bash kernel: %v %v", c.kinds, c.err)
	}
	lang := "bash"
	s, err := h.Code().Execute(ctx, connect.NewRequest(&raydv1.ExecuteRequest{Language: &lang, Code: "x = 1\nx + 1"}))
	if err != nil {
		t.Fatal(err)
	}
	if c := collectCell(t, s); c.main().GetText() != "2" {
		t.Fatalf("default-bash: %v %v", c.kinds, c.err)
	}
	_, err = h.Code().CreateContext(ctx, connect.NewRequest(&raydv1.CreateContextRequest{Language: "javascript"}))
	if raydtest.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), "JavaScript kernel") {
		t.Fatalf("javascript with a kernelspec lacking {connection_file}: %v", err)
	}
}
