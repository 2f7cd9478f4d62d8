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
	c := raydv1connect.NewConfigureServiceClient(h.client, h.apiURL, withToken(h.token))
	resp, err := c.Configure(context.Background(), connect.NewRequest(&raydv1.ConfigureRequest{LifecycleEvents: &raydv1.LifecycleEventsConfig{SandboxKey: key}}))
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
	requireRoot(t)
	t.Parallel()
	start := time.Now()
	h, lr := eventsHarness(t, nil)
	if !h.health().GetFeatures().GetLifecycleEvents() {
		t.Fatal("Health features.lifecycle_events is false")
	}
	h.run(nil)
	h.hook("suspend", nil)
	h.hook("resume", nil)
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

	if r := h.hook("suspend", nil); r["outcome"] != "changed" {
		t.Fatalf("/suspend %v", r)
	}
	ev = wantEvent(t, key, lr.next(t, "paused"), "microvm-test", events.Paused, "", &ev, start)
	h.hook("suspend", nil) // unchanged: no event
	h.hook("resume", nil)
	ev = wantEvent(t, key, lr.next(t, "resumed"), "microvm-test", events.Resumed, "", &ev, start)
	h.hook("resume", nil) // unchanged
	h.hook("suspend", nil)
	ev = wantEvent(t, key, lr.next(t, "paused again"), "microvm-test", events.Paused, "", &ev, start)
	h.hook("resume", nil)
	ev = wantEvent(t, key, lr.next(t, "resumed again"), "microvm-test", events.Resumed, "", &ev, start)

	h.hook("terminate", nil)
	ev = wantEvent(t, key, lr.next(t, "killed"), "microvm-test", events.Killed, events.KillRequest, &ev, start)
	if ev.Generation != 6 {
		t.Fatalf("killed has generation %d, want 6", ev.Generation)
	}
	select {
	case err := <-h.done:
		h.done <- err
	case <-time.After(20 * time.Second):
		t.Fatal("rayd did not stop after /terminate")
	}
	// Nothing after killed, not even at the stop.
	lr.none(t, 200*time.Millisecond, "after killed")
}

// Without a key rayd prints nothing, whatever happens.
func TestNoKeyNoEventLines(t *testing.T) {
	t.Parallel()
	h, lr := eventsHarness(t, nil)
	h.run(nil)
	h.hook("suspend", nil)
	h.hook("resume", nil)
	// An empty section turns events off: still nothing.
	h.configureEvents(nil)
	h.hook("terminate", nil)
	select {
	case err := <-h.done:
		h.done <- err
	case <-time.After(20 * time.Second):
		t.Fatal("rayd did not stop after /terminate")
	}
	lr.none(t, 300*time.Millisecond, "without a key")
}

// A wrong-sized key is INVALID and prints nothing.
func TestEventKeyInvalid(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	h, lr := eventsHarness(t, nil)
	h.run(nil)
	r := h.configureEvents(make([]byte, 31))
	if r.GetCode() != raydv1.SectionCode_SECTION_CODE_INVALID || !strings.Contains(r.GetMessage(), "sandbox_key") {
		t.Fatalf("Configure %v", r)
	}
	h.hook("suspend", nil)
	lr.none(t, 200*time.Millisecond, "after an invalid key")
}

// The sandbox's timeout with on_timeout kill prints killed{timeout}. Not
// parallel: the timeout ends every process of the shared supervisor.
func TestEventKilledByTimeout(t *testing.T) {
	requireRoot(t)
	start := time.Now()
	h, lr := eventsHarness(t, nil)
	h.run(withLifecycle(2, 120, runpayload.OnTimeoutKill))
	key := newKey(t)
	h.configureEvents(key)
	ev := wantEvent(t, key, lr.next(t, "created"), "microvm-test", events.Created, "", nil, start)
	wantEvent(t, key, lr.next(t, "killed"), "microvm-test", events.Killed, events.KillTimeout, &ev, start)
	select {
	case err := <-h.done:
		h.done <- err
	case <-time.After(20 * time.Second):
		t.Fatal("rayd did not stop after the timeout")
	}
	if !errors.Is(h.d.StopReason(), ErrSandboxTimeout) {
		t.Fatalf("stop reason %v", h.d.StopReason())
	}
	lr.none(t, 200*time.Millisecond, "after killed")
}

// freePort returns a loopback port nobody listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The real thing: rayd's Main in a process of its own, its stdout a pipe.
// Event lines are all its stdout holds and none is in its logs (stderr);
// a SIGTERM without /terminate is killed{unknown}.
func TestEventLinesOnStdout(t *testing.T) {
	requireRoot(t)
	t.Parallel()
	start := time.Now()
	apiAddr, hooksAddr := freePort(t), freePort(t)
	args := []string{"-api-addr", apiAddr, "-hooks-addr", hooksAddr, "-e2b=false", "-egress", "off",
		"-state-dir", filepath.Join(t.TempDir(), "state"), "-ready-fd", "3", "-debug"}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer readyR.Close()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), listenChildEnv+"=1", listenArgsEnv+"="+strings.Join(args, "\n"), imageARNEnv+"="+testImageARN)
	cmd.ExtraFiles = []*os.File{readyW}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		readyW.Close()
		t.Fatal(err)
	}
	readyW.Close()
	var all []string
	var allMu sync.Mutex
	lr := &lineReader{lines: make(chan string, 64), done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			allMu.Lock()
			all = append(all, sc.Text())
			allMu.Unlock()
			lr.lines <- sc.Text()
		}
	}()
	waited := make(chan error, 1)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-lr.done
			<-waited
		}
	})
	_ = readyR.SetReadDeadline(time.Now().Add(30 * time.Second))
	if got, err := io.ReadAll(readyR); err != nil || string(got) != "R" {
		t.Fatalf("rayd is not ready (%q, %v):\n%s", got, err, stderr.String())
	}
	tok, digest := newToken(t)
	h := &harness{t: t, apiURL: "http://" + apiAddr, hooksURL: "http://" + hooksAddr, token: tok, client: h2cClient()}
	raw, err := runpayload.Encode(&runpayload.Payload{V: 1, TokenSHA256: digest})
	if err != nil {
		t.Fatal(err)
	}
	if out := h.hook("run", map[string]string{"microvmId": "mvm-stdout-1", "runHookPayload": raw}); out["outcome"] != "installed" {
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
	h.hook("suspend", nil)
	ev = wantEvent(t, key, lr.next(t, "paused"), "mvm-stdout-1", events.Paused, "", &ev, start)
	h.hook("resume", nil)
	ev = wantEvent(t, key, lr.next(t, "resumed"), "mvm-stdout-1", events.Resumed, "", &ev, start)
	go func() { waited <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, key, lr.next(t, "killed"), "mvm-stdout-1", events.Killed, events.KillUnknown, &ev, start)
	select {
	case <-lr.done:
	case <-time.After(20 * time.Second):
		t.Fatal("rayd's stdout did not close")
	}
	if err := <-waited; err != nil {
		t.Fatalf("rayd: %v\n%s", err, stderr.String())
	}
	stopped = true
	allMu.Lock()
	defer allMu.Unlock()
	if len(all) != 4 {
		t.Fatalf("stdout holds %d lines, want the 4 events: %q", len(all), all)
	}
	logs := stderr.String()
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
