package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// lineCounter collects a command's stdout and checks it is the lines 0, 1,
// 2, ... each exactly once.
type lineCounter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *lineCounter) write(b []byte) {
	c.mu.Lock()
	c.buf.Write(b)
	c.mu.Unlock()
}

// lines returns the complete lines received so far.
func (c *lineCounter) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.buf.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		return nil
	}
	return strings.Split(s, "\n")
}

// check fails unless the lines are 0..n-1 in order: none lost, none
// repeated.
func (c *lineCounter) check(t *testing.T) int {
	t.Helper()
	lines := c.lines()
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			lo := max(0, i-3)
			t.Fatalf("line %d is %q (lines %d..%d: %q): a line was lost or repeated", i, l, lo, i, lines[lo:i+1])
		}
	}
	return len(lines)
}

// waitLines waits until at least n lines arrived.
func (c *lineCounter) waitLines(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(c.lines()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d lines after %v, want %d", len(c.lines()), within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A command printing a counter every 10 ms keeps running across ten
// pause/resume cycles: the client's one handle receives every line exactly
// once, nothing runs while the sandbox is paused, and a file written before
// each pause is intact after each resume.
func TestPauseResumeLosesNothing(t *testing.T) {
	if !isRoot() {
		t.Skip("pause and resume need the root platform's cgroup freezer; run as root")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sbx := p.create(ctx)
	defer sbx.Kill(context.Background())

	var out lineCounter
	h, err := sbx.Commands.Start(ctx, `i=0; while :; do echo $i; i=$((i+1)); sleep 0.01; done`,
		rayito.OnStdout(out.write))
	if err != nil {
		t.Fatal(err)
	}
	out.waitLines(t, 5, 10*time.Second)

	const cycles = 10
	for c := range cycles {
		path := fmt.Sprintf("/home/user/before-pause-%d.txt", c)
		want := bytes.Repeat([]byte(fmt.Sprintf("cycle %d\n", c)), 1000)
		if _, err := sbx.Files.Write(ctx, path, want); err != nil {
			t.Fatalf("cycle %d: write: %v", c, err)
		}
		if err := sbx.Pause(ctx); err != nil {
			t.Fatalf("cycle %d: pause: %v", c, err)
		}
		info, err := sbx.Info(ctx)
		if err != nil || info.State != "SUSPENDED" {
			t.Fatalf("cycle %d: after pause: %+v %v", c, info, err)
		}
		// Nothing runs while paused: the counter does not move.
		n := len(out.lines())
		time.Sleep(150 * time.Millisecond)
		if m := len(out.lines()); m > n+1 { // one line may still be in flight
			t.Fatalf("cycle %d: %d lines arrived while paused", c, m-n)
		}
		if err := sbx.Resume(ctx); err != nil {
			t.Fatalf("cycle %d: resume: %v", c, err)
		}
		got, err := sbx.Files.Read(ctx, path)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("cycle %d: file after resume: %d bytes, %v", c, len(got), err)
		}
		// The counter goes on after each resume. The wait is generous:
		// under heavy load (a full -race run with GOGC=10) 10 s once
		// was not enough for five lines; a stalled stream still fails.
		out.waitLines(t, len(out.lines())+5, 30*time.Second)
	}
	n := out.check(t)
	if err := h.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Wait(ctx); err == nil {
		t.Fatal("a killed counter should end with an exit error")
	}
	if m := out.check(t); m < n {
		t.Fatalf("lines went from %d to %d", n, m)
	}
	t.Logf("%d lines across %d pause/resume cycles, each exactly once", out.check(t), cycles)
}

// A sandbox created with a deadline (kill) and nobody connected ends on
// time, counted in running time: the time it spent paused does not count.
// It ends with the reason timeout.
func TestDeadlineKillCountsRunningTime(t *testing.T) {
	if !isRoot() {
		t.Skip("pause needs the root platform's cgroup freezer; run as root")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const timeout, paused = 4 * time.Second, 3 * time.Second
	start := time.Now()
	sbx, err := rayito.Create(ctx, p.opts(rayito.WithTimeout(timeout), rayito.WithOnTimeout(rayito.TimeoutKill))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(context.Background())
	id := sbx.ID()
	time.Sleep(time.Second)
	if err := sbx.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(paused)
	if err := sbx.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	// Nobody is connected from here on: only the control plane is asked.
	var info *rayito.Info
	for {
		infos, err := rayito.List(ctx, p.opts(rayito.WithEndReasons())...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range infos {
			if infos[i].ID == id && infos[i].State == "TERMINATED" {
				info = &infos[i]
			}
		}
		if info != nil {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatal("the sandbox did not end within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	if took < timeout+paused-500*time.Millisecond {
		t.Fatalf("ended after %v: the %v paused were counted", took, paused)
	}
	if info.EndReason != rayito.EndTimeout {
		t.Fatalf("end reason %q (%q), want timeout", info.EndReason, info.EndDetail)
	}
	t.Logf("ended after %v of wall time (%v paused), reason %s", took.Round(time.Millisecond), paused, info.EndReason)
}

// A deadline with on_timeout pause: the platform suspends the sandbox on
// time; after a resume only Health and SetTimeout answer (the resume
// grace) until a SetTimeout gives it a new deadline, and then everything
// works again, the files written before included.
func TestDeadlinePause(t *testing.T) {
	if !isRoot() {
		t.Skip("pause needs the root platform's cgroup freezer; run as root")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const timeout = 3 * time.Second
	start := time.Now()
	sbx, err := rayito.Create(ctx, p.opts(rayito.WithTimeout(timeout), rayito.WithOnTimeout(rayito.TimeoutPause))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(context.Background())
	if _, err := sbx.Files.Write(ctx, "/home/user/kept.txt", []byte("kept\n")); err != nil {
		t.Fatal(err)
	}
	for {
		info, err := rayito.GetInfo(ctx, sbx.ID(), p.opts()...)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == "SUSPENDED" {
			break
		}
		if info.State != "RUNNING" && info.State != "SUSPENDING" {
			t.Fatalf("state %s (%s), want SUSPENDED", info.State, info.StateReason)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("not suspended 30 s after a 3 s deadline")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("suspended after %v, before its %v deadline", took, timeout)
	}
	if err := sbx.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	// The resume grace: commands are refused with ErrSandboxTimeout.
	if _, err := sbx.Commands.Run(ctx, "true"); !errors.Is(err, rayito.ErrSandboxTimeout) {
		t.Fatalf("a command in the resume grace: %v, want ErrSandboxTimeout", err)
	}
	if _, err := sbx.Metrics(ctx); !errors.Is(err, rayito.ErrSandboxTimeout) {
		t.Fatalf("Metrics in the resume grace: %v, want ErrSandboxTimeout", err)
	}
	lc, err := sbx.SetTimeout(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Phase != rayito.PhaseActive || time.Until(lc.Deadline) < 50*time.Second {
		t.Fatalf("after SetTimeout: %+v", lc)
	}
	res, err := sbx.Commands.Run(ctx, "cat /home/user/kept.txt")
	if err != nil || res.Stdout != "kept\n" {
		t.Fatalf("after the extension: %+v %v", res, err)
	}
}

// With auto-resume, a sandbox paused by its deadline is active again when
// resumed: commands answer at once, and its deadline is its timeout again.
func TestDeadlinePauseAutoResume(t *testing.T) {
	if !isRoot() {
		t.Skip("pause needs the root platform's cgroup freezer; run as root")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbx, err := rayito.Create(ctx, p.opts(rayito.WithTimeout(3*time.Second), rayito.WithOnTimeout(rayito.TimeoutPause), rayito.WithAutoResume())...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(context.Background())
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		info, err := rayito.GetInfo(ctx, sbx.ID(), p.opts()...)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == "SUSPENDED" {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("not suspended 30 s after a 3 s deadline: %s", info.State)
		}
	}
	if err := sbx.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := sbx.Commands.Run(ctx, "echo awake"); err != nil || res.Stdout != "awake\n" {
		t.Fatalf("after an auto-resume: %+v %v", res, err)
	}
	info, err := sbx.Info(ctx)
	if err != nil || info.Lifecycle == nil || info.Lifecycle.Phase != rayito.PhaseActive || info.Lifecycle.Extensions != 1 {
		t.Fatalf("lifecycle after an auto-resume: %+v %v", info, err)
	}
}
