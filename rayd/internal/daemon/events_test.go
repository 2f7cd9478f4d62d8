package daemon

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/events"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

const testImageARN = "arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base:3"

// lineReader collects the lines written to a pipe.
type lineReader struct {
	lines chan string
	done  chan struct{}
}

func readLines(r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan string, 64), done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lr.lines <- sc.Text()
		}
	}()
	return lr
}

// next returns the next line, failing after 10 s.
func (lr *lineReader) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case l := <-lr.lines:
		return l
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no event line", what)
		return ""
	}
}

// none fails if a line arrives within d.
func (lr *lineReader) none(t *testing.T, d time.Duration, what string) {
	t.Helper()
	select {
	case l := <-lr.lines:
		t.Fatalf("%s: unexpected line %q", what, l)
	case <-time.After(d):
	}
}

// eventsHarness is a harness whose rayd prints its event lines into a
// pipe the test reads.
func eventsHarness(t *testing.T, configure func(*Config)) (*harness, *lineReader) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the pipe closes after rayd stopped.
	t.Cleanup(func() { pr.Close() })
	t.Cleanup(func() { pw.Close() })
	h := newHarnessWith(t, func(c *Config) {
		c.EventsOut = pw
		c.ImageARN = testImageARN
		if configure != nil {
			configure(c)
		}
	})
	return h, readLines(pr)
}

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, events.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func (h *harness) configureEvents(key []byte) *raydv1.SectionResult {
	h.t.Helper()
	c := raydv1connect.NewConfigureServiceClient(h.Client, h.APIURL, raydtest.WithToken(h.Token))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Configure(ctx, connect.NewRequest(&raydv1.ConfigureRequest{LifecycleEvents: &raydv1.LifecycleEventsConfig{SandboxKey: key}}))
	if err != nil {
		h.t.Fatalf("Configure: %v", err)
	}
	if len(resp.Msg.Results) != 1 {
		h.t.Fatalf("Configure results %v", resp.Msg.Results)
	}
	return resp.Msg.Results[0]
}

// wantEvent decodes line with key and checks it is the next event.
func wantEvent(t *testing.T, key []byte, line string, sandboxID string, typ events.Type, reason events.KillReason, prev *events.Event, since time.Time) events.Event {
	t.Helper()
	ev, _, err := events.Decode(key, line)
	if err != nil {
		t.Fatalf("%s: Decode: %v (line %q)", typ, err, line)
	}
	if ev.Type != typ || ev.KillReason != reason || ev.SandboxID != sandboxID {
		t.Fatalf("got %+v, want %s %q of %s", ev, typ, reason, sandboxID)
	}
	now := time.Now()
	if ev.OccurredAtMs < since.UnixMilli() || ev.OccurredAtMs > now.UnixMilli() {
		t.Fatalf("%s: occurred_at_ms %d outside [%d, %d]", typ, ev.OccurredAtMs, since.UnixMilli(), now.UnixMilli())
	}
	if prev == nil {
		if ev.Generation != 1 {
			t.Fatalf("first event has generation %d", ev.Generation)
		}
	} else if ev.Generation <= prev.Generation || ev.EventID == prev.EventID || ev.OccurredAtMs < prev.OccurredAtMs {
		t.Fatalf("%+v does not follow %+v", ev, *prev)
	}
	return ev
}

// A keyed rayd prints created at the configure, paused at /suspend,
// resumed at /resume and killed{request} at /terminate, each a line that
// verifies with the key, in order, with increasing generations.
func TestEventLines(t *testing.T) {
	raydtest.RequireRoot(t)
	t.Parallel()
	start := time.Now()
	h, lr := eventsHarness(t, nil)
	if !h.Health().GetFeatures().GetLifecycleEvents() {
		t.Fatal("Health features.lifecycle_events is false")
	}
	h.Run(nil)
	h.Hook("suspend", nil)
	h.Hook("resume", nil)
	lr.none(t, 200*time.Millisecond, "before the key")

	key := newKey(t)
	if r := h.configureEvents(key); r.GetCode() != raydv1.SectionCode_SECTION_CODE_APPLIED {
		t.Fatalf("Configure %v", r)
	}
	ev := wantEvent(t, key, lr.next(t, "created"), "microvm-test", events.Created, "", nil, start)
	if ev.ImageARN != testImageARN {
		t.Fatalf("image_arn %q", ev.ImageARN)
	}
	// Applied again (the SDK's reconnect): no second created.
	h.configureEvents(key)
	lr.none(t, 200*time.Millisecond, "configured again")

	if r := h.Hook("suspend", nil); r["outcome"] != "changed" {
		t.Fatalf("/suspend %v", r)
	}
	ev = wantEvent(t, key, lr.next(t, "paused"), "microvm-test", events.Paused, "", &ev, start)
	h.Hook("suspend", nil) // unchanged: no event
	h.Hook("resume", nil)
	ev = wantEvent(t, key, lr.next(t, "resumed"), "microvm-test", events.Resumed, "", &ev, start)
	h.Hook("resume", nil) // unchanged
	h.Hook("suspend", nil)
	ev = wantEvent(t, key, lr.next(t, "paused again"), "microvm-test", events.Paused, "", &ev, start)
	h.Hook("resume", nil)
	ev = wantEvent(t, key, lr.next(t, "resumed again"), "microvm-test", events.Resumed, "", &ev, start)

	h.Hook("terminate", nil)
	ev = wantEvent(t, key, lr.next(t, "killed"), "microvm-test", events.Killed, events.KillRequest, &ev, start)
	if ev.Generation != 6 {
		t.Fatalf("killed has generation %d, want 6", ev.Generation)
	}
	if !h.Served(20 * time.Second) {
		t.Fatal("rayd did not stop after /terminate")
	}
	// Nothing after killed, not even at the stop.
	lr.none(t, 200*time.Millisecond, "after killed")
}

// Without a key rayd prints nothing, whatever happens.
func TestNoKeyNoEventLines(t *testing.T) {
	t.Parallel()
	h, lr := eventsHarness(t, nil)
	h.Run(nil)
	h.Hook("suspend", nil)
	h.Hook("resume", nil)
	// An empty section turns events off: still nothing.
	h.configureEvents(nil)
	h.Hook("terminate", nil)
	if !h.Served(20 * time.Second) {
		t.Fatal("rayd did not stop after /terminate")
	}
	lr.none(t, 300*time.Millisecond, "without a key")
}

// A wrong-sized key is INVALID and prints nothing.
func TestEventKeyInvalid(t *testing.T) {
	raydtest.RequireRoot(t)
	t.Parallel()
	h, lr := eventsHarness(t, nil)
	h.Run(nil)
	r := h.configureEvents(make([]byte, 31))
	if r.GetCode() != raydv1.SectionCode_SECTION_CODE_INVALID || !strings.Contains(r.GetMessage(), "sandbox_key") {
		t.Fatalf("Configure %v", r)
	}
	h.Hook("suspend", nil)
	lr.none(t, 200*time.Millisecond, "after an invalid key")
}

// The sandbox's timeout with on_timeout kill prints killed{timeout}. Not
// parallel: the timeout ends every process of the shared supervisor.
func TestEventKilledByTimeout(t *testing.T) {
	raydtest.RequireRoot(t)
	start := time.Now()
	h, lr := eventsHarness(t, nil)
	h.Run(withLifecycle(2, 120, runpayload.OnTimeoutKill))
	key := newKey(t)
	h.configureEvents(key)
	ev := wantEvent(t, key, lr.next(t, "created"), "microvm-test", events.Created, "", nil, start)
	wantEvent(t, key, lr.next(t, "killed"), "microvm-test", events.Killed, events.KillTimeout, &ev, start)
	if !h.Served(20 * time.Second) {
		t.Fatal("rayd did not stop after the timeout")
	}
	if !errors.Is(h.d.StopReason(), ErrSandboxTimeout) {
		t.Fatalf("stop reason %v", h.d.StopReason())
	}
	lr.none(t, 200*time.Millisecond, "after killed")
}

// freePort returns a loopback port nobody listens on now (another
// process may take it before it is used: see startStdoutChild).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// stdoutChild is rayd's Main in a process of its own, its stdout read
// line by line.
type stdoutChild struct {
	cmd            *exec.Cmd
	apiAddr, hooks string
	stderr         *syncBuffer
	lr             *lineReader
	exitFile       string     // Main's exit code, written by the child
	waited         chan error // cmd.Wait's result, sent once
	mu             sync.Mutex
	all            []string // every stdout line
}

// startStdoutChild starts rayd on two free loopback ports and waits until
// it is ready. A port taken between freePort and rayd's bind is retried
// with new ports. Every wait is bounded: the child is killed and reaped
// when the test ends, whatever happened.
func startStdoutChild(t *testing.T) *stdoutChild {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := tryStdoutChild(t)
		if err == nil {
			return c
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; new ports", attempt, err)
	}
}

func tryStdoutChild(t *testing.T) (*stdoutChild, error) {
	c := &stdoutChild{apiAddr: freePort(t), hooks: freePort(t), stderr: &syncBuffer{}, waited: make(chan error, 1),
		exitFile: filepath.Join(t.TempDir(), "exit"),
		lr:       &lineReader{lines: make(chan string, 64), done: make(chan struct{})}}
	args := []string{"-api-addr", c.apiAddr, "-hooks-addr", c.hooks, "-e2b=false", "-egress", "off",
		"-state-dir", filepath.Join(t.TempDir(), "state"), "-ready-fd", "3", "-debug"}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer readyR.Close()
	c.cmd = exec.Command(os.Args[0], "-test.run", "^$")
	c.cmd.Env = append(os.Environ(), listenChildEnv+"=1", listenArgsEnv+"="+strings.Join(args, "\n"), imageARNEnv+"="+testImageARN, listenExitEnv+"="+c.exitFile)
	c.cmd.ExtraFiles = []*os.File{readyW}
	c.cmd.Stderr = c.stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		readyW.Close()
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		readyW.Close()
		return nil, err
	}
	readyW.Close()
	go func() {
		defer close(c.lr.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.mu.Lock()
			c.all = append(c.all, sc.Text())
			c.mu.Unlock()
			select {
			case c.lr.lines <- sc.Text():
			default: // nobody reads any more; all keeps it
			}
		}
	}()
	// StdoutPipe's reader must be drained before Wait: Wait starts after it.
	go func() { <-c.lr.done; c.waited <- c.cmd.Wait() }()
	_ = readyR.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(readyR)
	if err != nil || string(got) != "R" {
		c.kill(t)
		return nil, fmt.Errorf("rayd is not ready (%q, %v):\n%s", got, err, c.stderr.String())
	}
	t.Cleanup(func() { c.kill(t) })
	return c, nil
}

// kill kills the child (if it still runs) and reaps it, waiting at most
// 20 s.
func (c *stdoutChild) kill(t *testing.T) {
	_ = c.cmd.Process.Kill()
	select {
	case err := <-c.waited:
		c.waited <- err
	case <-time.After(20 * time.Second):
		t.Errorf("rayd (pid %d) was not reaped 20 s after SIGKILL", c.cmd.Process.Pid)
	}
}

// The real thing: rayd's Main in a process of its own, its stdout a pipe.
// Event lines are all its stdout holds and none is in its logs (stderr);
// a SIGTERM without /terminate is killed{unknown}.
func TestEventLinesOnStdout(t *testing.T) {
	raydtest.RequireRoot(t)
	t.Parallel()
	start := time.Now()
	c := startStdoutChild(t)
	lr, apiAddr, hooksAddr := c.lr, c.apiAddr, c.hooks
	tok, digest := raydtest.NewToken(t)
	h := &harness{Harness: raydtest.Attach(t, "http://"+apiAddr, "http://"+hooksAddr, tok), t: t}
	raw, err := runpayload.Encode(&runpayload.Payload{V: 1, TokenSHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	if out := h.Hook("run", map[string]string{"microvmId": "mvm-stdout-1", "runHookPayload": raw}); out["outcome"] != "installed" {
		t.Fatalf("/run %v", out)
	}
	key := newKey(t)
	if r := h.configureEvents(key); r.GetCode() != raydv1.SectionCode_SECTION_CODE_APPLIED {
		t.Fatalf("Configure %v", r)
	}
	ev := wantEvent(t, key, lr.next(t, "created"), "mvm-stdout-1", events.Created, "", nil, start)
	if ev.ImageARN != testImageARN {
		t.Fatalf("image_arn %q", ev.ImageARN)
	}
	h.Hook("suspend", nil)
	ev = wantEvent(t, key, lr.next(t, "paused"), "mvm-stdout-1", events.Paused, "", &ev, start)
	h.Hook("resume", nil)
	ev = wantEvent(t, key, lr.next(t, "resumed"), "mvm-stdout-1", events.Resumed, "", &ev, start)
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, key, lr.next(t, "killed"), "mvm-stdout-1", events.Killed, events.KillUnknown, &ev, start)
	select {
	case err := <-c.waited:
		c.waited <- err
	case <-time.After(20 * time.Second):
		t.Fatal("rayd did not exit 20 s after SIGTERM")
	}
	// Wait itself may fail (ECHILD): the tests' shared supervisor reaps
	// every child. The child wrote its exit code before exiting.
	if code, err := os.ReadFile(c.exitFile); err != nil || string(code) != "0" {
		t.Fatalf("rayd exited with code %q (%v):\n%s", code, err, c.stderr.String())
	}
	c.mu.Lock()
	all := c.all
	c.mu.Unlock()
	if len(all) != 4 {
		t.Fatalf("stdout holds %d lines, want the 4 events: %q", len(all), all)
	}
	logs := c.stderr.String()
	if !strings.Contains(logs, "lifecycle events configured") {
		t.Fatalf("no configure log in rayd's stderr:\n%s", logs)
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.HasPrefix(l, events.LinePrefix) {
			t.Fatalf("rayd's logs hold an event line: %q", l)
		}
	}
	// The key and the lines' MACs never reach the logs.
	for _, l := range all {
		if f := strings.Fields(l); len(f) != 3 || strings.Contains(logs, f[2]) || strings.Contains(logs, f[1]) {
			t.Fatalf("an event line or MAC is in the logs")
		}
	}
	if bytes.Contains([]byte(logs), key) || strings.Contains(logs, fmt.Sprintf("%x", key)) {
		t.Fatal("the key is in the logs")
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
