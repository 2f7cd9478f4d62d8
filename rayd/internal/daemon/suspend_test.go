package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/auth"
	"github.com/rayito-dev/rayito/rayd/internal/peercred"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

func isSuspending(err error) bool {
	return raydtest.CodeOf(err) == connect.CodeUnavailable && raydtest.ReasonOf(err) == raydv1.ErrorReason_ERROR_REASON_SUSPENDING
}

// number reads a JSON number of a hook reply.
func number(t *testing.T, reply map[string]any, key string) int {
	t.Helper()
	v, ok := reply[key].(float64)
	if !ok {
		t.Fatalf("reply %v has no number %q", reply, key)
	}
	return int(v)
}

// Suspend closes a following process stream with Unavailable SUSPENDING
// while the process keeps running; after the resume a Connect from the
// next seq continues with no byte lost or repeated.
func TestSuspendCutsStreamsAndResumeLosesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Run(nil)
	ctx := raydtest.TestCtx(t)
	const lines = 120
	s, err := h.Processes().Start(ctx, connect.NewRequest(raydtest.Shell(fmt.Sprintf("i=0; while [ $i -lt %d ]; do i=$((i+1)); echo $i; sleep 0.02; done", lines))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got bytes.Buffer
	var pid uint32
	var lastSeq uint64
	for got.Len() < 20 && s.Receive() {
		switch e := s.Msg().Event.(type) {
		case *raydv1.ProcessEvent_Start:
			pid = e.Start.GetPid()
		case *raydv1.ProcessEvent_Data:
			got.Write(e.Data.GetStdout())
			lastSeq = e.Data.GetSeq()
		}
	}
	if pid == 0 || lastSeq == 0 {
		t.Fatalf("no output before the suspend: %v", s.Err())
	}
	// A second follower (Connect) and a directory watch are cut too.
	follower, err := h.Processes().Connect(ctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: pid, FromSeq: lastSeq + 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	watch := raydtest.StartWatch(t, h.Files(), &raydv1.WatchDirRequest{Path: raydtest.UserDir(t)})

	reply := h.Hook("suspend", nil)
	if reply["outcome"] != "changed" || reply["phase"] != "suspending" || number(t, reply, "suspend_generation") != 1 {
		t.Fatalf("/suspend reply %v", reply)
	}
	if n := number(t, reply, "streams_closed"); n < 3 {
		t.Errorf("streams_closed = %d, want at least 3", n)
	}
	// The stream ends with SUSPENDING, after at most the data sent before.
	for s.Receive() {
		if d := s.Msg().GetData(); d != nil {
			got.Write(d.GetStdout())
			lastSeq = d.GetSeq()
		}
		if s.Msg().GetEnd() != nil {
			t.Fatal("the process ended instead of the stream being cut")
		}
	}
	if !isSuspending(s.Err()) {
		t.Fatalf("Start stream ended with %v, want Unavailable SUSPENDING", s.Err())
	}
	for follower.Receive() {
	}
	if !isSuspending(follower.Err()) {
		t.Errorf("Connect stream ended with %v", follower.Err())
	}
	select {
	case err := <-watch.Done:
		if !isSuspending(err) {
			t.Errorf("WatchDir ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("WatchDir was not cut")
	}

	// While suspending: Health answers, everything else is refused.
	hl := h.Health()
	if hl.GetHookPhase() != "suspending" || hl.GetSuspendGeneration() != 1 || hl.GetResumeGeneration() != 0 {
		t.Fatalf("health while suspending: %v", hl)
	}
	if _, err := h.Processes().List(ctx, connect.NewRequest(&raydv1.ListRequest{})); !isSuspending(err) {
		t.Fatalf("List while suspending: %v", err)
	}
	c, err := h.Processes().Connect(ctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: pid, FromSeq: lastSeq + 1}))
	if err == nil {
		for c.Receive() {
		}
		err = c.Err()
		c.Close()
	}
	if !isSuspending(err) {
		t.Fatalf("Connect while suspending: %v", err)
	}
	if again := h.Hook("suspend", nil); again["outcome"] != "unchanged" {
		t.Fatalf("repeated /suspend: %v", again)
	}

	time.Sleep(300 * time.Millisecond) // the process keeps writing meanwhile
	reply = h.Hook("resume", nil)
	if reply["outcome"] != "changed" || reply["phase"] != "resumed" || number(t, reply, "resume_generation") != 1 || reply["kernel_state_lost"] != false {
		t.Fatalf("/resume reply %v", reply)
	}
	if hl := h.Health(); hl.GetHookPhase() != "resumed" || hl.GetResumeGeneration() != 1 || hl.GetClockOffsetMs() < 300 {
		t.Fatalf("health after resume: %v", hl)
	}

	// Reconnect from the next seq: the rest of the output, exactly.
	r := raydtest.Collect(t, raydtest.MustConnect(t, h.Processes(), pid, lastSeq+1))
	got.WriteString(r.Stdout)
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if got.String() != want.String() {
		t.Fatalf("output across the suspend (the reconnect from seq %d ended with %v after %d messages):\n%q\nwant\n%q", lastSeq+1, r.End, r.Messages, got.String(), want.String())
	}
	if r.End.GetStatus() != "exited" || r.End.GetExitCode() != 0 {
		t.Fatalf("end %v", r.End)
	}
}

// A PTY stream is cut the same way; the shell lives on.
func TestSuspendCutsPtyStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Run(nil)
	ctx := raydtest.TestCtx(t)
	c := h.Ptys()
	s, err := c.Create(ctx, connect.NewRequest(&raydv1.PtyStart{Shell: raydtest.Ptr("/bin/sh"), Envs: map[string]string{"PS1": "$ "}}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() || s.Msg().GetStarted() == nil {
		t.Fatalf("no started: %v", s.Err())
	}
	pid := s.Msg().GetStarted().GetPid()
	h.Hook("suspend", nil)
	for s.Receive() {
		if s.Msg().GetExited() != nil {
			t.Fatal("the shell exited")
		}
	}
	if !isSuspending(s.Err()) {
		t.Fatalf("PTY stream ended with %v", s.Err())
	}
	// The plain HTTP file endpoints are gated too.
	req, err := http.NewRequest(http.MethodGet, h.APIURL+"/files?path=/etc/hostname", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(auth.Header, h.Token)
	resp, err := h.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var herr rpcerr.HTTPError
	_ = json.NewDecoder(resp.Body).Decode(&herr)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || herr.Reason != "ERROR_REASON_SUSPENDING" {
		t.Fatalf("GET /files while suspending: %d %+v", resp.StatusCode, herr)
	}
	h.Hook("resume", nil)
	list, err := h.Processes().List(ctx, connect.NewRequest(&raydv1.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range list.Msg.GetProcesses() {
		found = found || p.GetPid() == pid
	}
	if !found {
		t.Fatal("the shell did not survive the suspend")
	}
	if _, err := c.Kill(ctx, connect.NewRequest(&raydv1.KillRequest{Pid: pid})); err != nil {
		t.Fatal(err)
	}
}

// Fake peer owners for the daemon's hooks: connections from 127.0.0.3
// belong to uid 1000 (sandbox code), the others to root (the platform).
const fromSandboxAddr = "127.0.0.3"

func fakeOwner(_, remote net.Addr) (peercred.Owner, error) {
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return peercred.Owner{}, err
	}
	if ap.Addr().Unmap().String() == fromSandboxAddr {
		return peercred.Owner{UID: 1000, Inode: 2, State: peercred.StateEstablished}, nil
	}
	return peercred.Owner{UID: 0, Inode: 1, State: peercred.StateEstablished}, nil
}

// hookFrom posts a hook from a source address and returns the status and
// the reply.
func (h *harness) hookFrom(from, name string) (int, map[string]any) {
	h.t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c := &http.Client{Timeout: 40 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	resp, err := c.Post(h.HooksURL+"/aws/lambda-microvms/runtime/v1/"+name, "application/json", strings.NewReader(`{"microvmId":"forged","runHookPayload":"forged"}`))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, out
}

// Hooks forged from inside the sandbox (T2): /run, /terminate, /ready and
// /validate do nothing; /suspend and /resume are acted upon; everything is
// in the audit and counts as an anomaly.
func TestForgedHooks(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, func(c *Config) { c.knobs = &knobs{peerOwner: fakeOwner} })
	forged := func(hook, want string) {
		t.Helper()
		status, r := h.hookFrom(fromSandboxAddr, hook)
		if status != http.StatusOK || r["outcome"] != want {
			t.Fatalf("forged /%s: %d %v, want %s", hook, status, r, want)
		}
	}
	// Before /run: the sandbox's /run does not consume the boot /run.
	forged("run", "illegal")
	forged("validate", "illegal")
	forged("ready", "illegal")
	if hl := h.Health(); hl.GetAgentReady() || hl.GetHookAnomalies() != 3 || hl.GetHookPhase() != "booting" {
		t.Fatalf("health after forged calls: %v", hl)
	}
	// The platform's own /validate runs the self-check.
	if r := h.Hook("validate", nil); r["outcome"] != "validated" {
		t.Fatalf("/validate: %v", r)
	}
	h.Run(nil)
	forged("terminate", "illegal")
	forged("ready", "illegal")
	forged("validate", "illegal")
	// After /run nothing restarts, even for the platform.
	if r := h.Hook("ready", nil); r["outcome"] != "ready_escape" {
		t.Fatalf("/ready after /run: %v", r)
	}
	if r := h.Hook("validate", nil); r["outcome"] != "validate_skipped" {
		t.Fatalf("/validate after /run: %v", r)
	}
	// A forged /suspend is acted upon (residual risk), and so is /resume.
	forged("suspend", "changed")
	if hl := h.Health(); hl.GetHookPhase() != "suspending" {
		t.Fatalf("health after a forged /suspend: %v", hl)
	}
	forged("resume", "changed")
	hl := h.Health()
	if hl.GetHookPhase() != "resumed" || hl.GetHookAnomalies() != 8 || hl.GetSuspendGeneration() != 1 || hl.GetResumeGeneration() != 1 {
		t.Fatalf("health: %v", hl)
	}
	// rayd still serves: the forged /terminate did nothing.
	r := raydtest.Collect(t, raydtest.MustStart(t, h.Processes(), raydtest.Shell("echo alive")))
	if r.Stdout != "alive\n" {
		t.Fatalf("after the forged hooks: %+v", r)
	}

	// The audit needs the token and holds every call, without payloads.
	anon := raydv1connect.NewHealthServiceClient(h.Client, h.APIURL)
	if _, err := anon.HookAudit(context.Background(), connect.NewRequest(&raydv1.HookAuditRequest{})); raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("HookAudit without a token: %v", err)
	}
	audit, err := raydv1connect.NewHealthServiceClient(h.Client, h.APIURL, raydtest.WithToken(h.Token)).HookAudit(context.Background(), connect.NewRequest(&raydv1.HookAuditRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if audit.Msg.GetAnomalies() != 8 || len(audit.Msg.GetEntries()) != 12 {
		t.Fatalf("audit: %v", audit.Msg)
	}
	var forgedEntries int
	for _, e := range audit.Msg.GetEntries() {
		if e.GetCaller() == "sandbox" {
			forgedEntries++
			if e.GetUid() != 1000 || !e.GetAnomaly() {
				t.Errorf("entry %v", e)
			}
		} else if e.GetCaller() != "platform" || e.GetAnomaly() {
			t.Errorf("entry %v", e)
		}
		if e.GetTimeUnixMs() == 0 || strings.Contains(e.String(), "forged") {
			t.Errorf("entry %v", e)
		}
	}
	if forgedEntries != 8 {
		t.Errorf("%d forged entries, want 8", forgedEntries)
	}
}

// A suspend no snapshot follows is undone by the watchdog.
func TestStaleSuspendReopens(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, func(c *Config) {
		c.knobs = &knobs{staleSuspend: 300 * time.Millisecond, watchdogTick: 20 * time.Millisecond}
	})
	h.Run(nil)
	h.Hook("suspend", nil)
	if _, err := h.Processes().List(context.Background(), connect.NewRequest(&raydv1.ListRequest{})); !isSuspending(err) {
		t.Fatalf("List while suspending: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.Health().GetHookPhase() != "running" {
		if time.Now().After(deadline) {
			t.Fatal("the watchdog did not reopen the gate")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if hl := h.Health(); hl.GetResumeGeneration() != 1 {
		t.Fatalf("health %v", hl)
	}
	if _, err := h.Processes().List(context.Background(), connect.NewRequest(&raydv1.ListRequest{})); err != nil {
		t.Fatalf("List after the watchdog: %v", err)
	}
}
