package rayito

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/proto/runpayload"
)

// Create turns the lifetime options into the payload's lifecycle block,
// the platform's maximum duration and its idle policy.
func TestCreateSendsTheLifecycle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		opts      []Option
		lifecycle *runpayload.Lifecycle
		maxDur    int
		idle      *microvmsapi.IdlePolicy
	}{
		{"a timeout set is a deadline: kill, default cap", []Option{WithTimeout(10 * time.Minute)},
			&runpayload.Lifecycle{TimeoutS: 600, CapS: 600, OnTimeout: "kill"}, 660, nil},
		{"the default timeout set explicitly is a deadline", []Option{WithTimeout(DefaultTimeout)},
			&runpayload.Lifecycle{TimeoutS: 300, CapS: 300, OnTimeout: "kill"}, 360, nil},
		{"a short timeout set: the cap's minimum", []Option{WithTimeout(30 * time.Second)},
			&runpayload.Lifecycle{TimeoutS: 30, CapS: 120, OnTimeout: "kill"}, 180, nil},
		{"the longest deadline", []Option{WithTimeout(8*time.Hour - time.Minute)},
			&runpayload.Lifecycle{TimeoutS: 28740, CapS: 28740, OnTimeout: "kill"}, 28800, nil},
		{"no room for a deadline: the platform's maximum duration", []Option{WithTimeout(8*time.Hour - 30*time.Second)}, nil, 28770, nil},
		{"8h: the platform's maximum duration", []Option{WithTimeout(8 * time.Hour)}, nil, 28800, nil},
		{"default timeout, unmanaged", nil, nil, 300, nil},
		{"kill, default cap", []Option{WithTimeout(10 * time.Minute), WithOnTimeout(TimeoutKill)},
			&runpayload.Lifecycle{TimeoutS: 600, CapS: 600, OnTimeout: "kill"}, 660, nil},
		{"kill, short timeout: the cap's minimum", []Option{WithTimeout(30 * time.Second), WithOnTimeout(TimeoutKill)},
			&runpayload.Lifecycle{TimeoutS: 30, CapS: 120, OnTimeout: "kill"}, 180, nil},
		{"pause, default cap 8h, auto-resume", []Option{WithOnTimeout(TimeoutPause), WithAutoResume()},
			&runpayload.Lifecycle{TimeoutS: 300, CapS: 28740, OnTimeout: "pause", AutoResume: true}, 28800, nil},
		{"max lifetime alone: kill", []Option{WithTimeout(time.Hour), WithMaxLifetime(2 * time.Hour)},
			&runpayload.Lifecycle{TimeoutS: 3600, CapS: 7140, OnTimeout: "kill"}, 7200, nil},
		{"longest timeout", []Option{WithTimeout(8*time.Hour - time.Minute), WithOnTimeout(TimeoutKill)},
			&runpayload.Lifecycle{TimeoutS: 28740, CapS: 28740, OnTimeout: "kill"}, 28800, nil},
		{"idle policy", []Option{WithIdlePolicy(5*time.Minute, time.Hour, true)}, nil, 300,
			&microvmsapi.IdlePolicy{MaxIdleDurationSeconds: 300, SuspendedDurationSeconds: 3600, AutoResumeEnabled: true}},
		{"idle policy and a timeout set", []Option{WithTimeout(time.Hour), WithIdlePolicy(5*time.Minute, time.Hour, true)},
			&runpayload.Lifecycle{TimeoutS: 3600, CapS: 3600, OnTimeout: "kill"}, 3660,
			&microvmsapi.IdlePolicy{MaxIdleDurationSeconds: 300, SuspendedDurationSeconds: 3600, AutoResumeEnabled: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newPlatform(t)
			sbx, err := Create(t.Context(), p.opts(t, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer sbx.dp.close()
			p.vmMu.Lock()
			in := p.runs[0]
			p.vmMu.Unlock()
			pl, err := runpayload.Decode(in.RunHookPayload)
			if err != nil {
				t.Fatal(err)
			}
			if (pl.Lifecycle == nil) != (tc.lifecycle == nil) || pl.Lifecycle != nil && *pl.Lifecycle != *tc.lifecycle {
				t.Errorf("lifecycle %+v, want %+v", pl.Lifecycle, tc.lifecycle)
			}
			if in.MaximumDurationInSeconds != tc.maxDur {
				t.Errorf("maximumDurationInSeconds %d, want %d", in.MaximumDurationInSeconds, tc.maxDur)
			}
			if (in.IdlePolicy == nil) != (tc.idle == nil) || in.IdlePolicy != nil && *in.IdlePolicy != *tc.idle {
				t.Errorf("idlePolicy %+v, want %+v", in.IdlePolicy, tc.idle)
			}
		})
	}
}

// Bad lifetime options are refused before any call.
func TestCreateRefusesBadLifetimes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"auto-resume with kill", []Option{WithOnTimeout(TimeoutKill), WithAutoResume()}, "auto-resume"},
		{"auto-resume alone", []Option{WithAutoResume()}, "auto-resume"},
		{"unknown action", []Option{WithOnTimeout("explode")}, "TimeoutKill or TimeoutPause"},
		{"lifetime too short", []Option{WithMaxLifetime(2 * time.Minute)}, "between 3m and 8h"},
		{"lifetime too long", []Option{WithMaxLifetime(9 * time.Hour)}, "between 3m and 8h"},
		{"timeout past the lifetime", []Option{WithTimeout(time.Hour), WithMaxLifetime(30 * time.Minute)}, "a minute shorter"},
		{"timeout within a minute of the lifetime", []Option{WithTimeout(time.Hour), WithMaxLifetime(time.Hour + 30*time.Second)}, "a minute shorter"},
		{"timeout 8h with a deadline", []Option{WithTimeout(8 * time.Hour), WithOnTimeout(TimeoutKill)}, "a minute shorter"},
		{"timeout too long", []Option{WithTimeout(9 * time.Hour), WithOnTimeout(TimeoutPause)}, "between 1s and 8h"},
		{"idle too short", []Option{WithIdlePolicy(30*time.Second, 0, false)}, "idle time"},
		{"negative suspended time", []Option{WithIdlePolicy(time.Minute, -time.Second, false)}, "paused"},
	} {
		p := newPlatform(t)
		_, err := Create(t.Context(), p.opts(t, tc.opts...)...)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Create = %v, want ErrInvalidArgument mentioning %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), "With") {
			t.Errorf("%s: the message names an option: %q", tc.name, err)
		}
		p.vmMu.Lock()
		n := len(p.runs)
		p.vmMu.Unlock()
		if n != 0 {
			t.Errorf("%s: RunMicrovm was called", tc.name)
		}
	}
}

func TestSetTimeout(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	deadline := time.Now().Add(10 * time.Minute).Truncate(time.Millisecond)
	capAt := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	p.life.set = func(r *raydv1.SetTimeoutRequest) (*raydv1.LifecycleState, error) {
		switch r.GetTimeoutMs() {
		case 2 * 3600 * 1000:
			return nil, wireErr(connect.CodeInvalidArgument, raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
				"timeout beyond cap; cap_unix_ms="+strconv.FormatInt(capAt.UnixMilli(), 10))
		case 3 * 3600 * 1000:
			return nil, wireErr(connect.CodeFailedPrecondition, raydv1.ErrorReason_ERROR_REASON_LIFECYCLE_UNMANAGED, "lifecycle_unmanaged")
		}
		return &raydv1.LifecycleState{Phase: raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE, DeadlineUnixMs: deadline.UnixMilli(),
			CapUnixMs: capAt.UnixMilli(), TimeoutMs: r.GetTimeoutMs(), OnTimeout: raydv1.TimeoutAction_TIMEOUT_ACTION_PAUSE,
			AutoResume: true, Extensions: 2}, nil
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	l, err := sbx.SetTimeout(t.Context(), 10*time.Minute)
	want := Lifecycle{Phase: PhaseActive, Deadline: deadline, Cap: capAt, Timeout: 10 * time.Minute, OnTimeout: TimeoutPause, AutoResume: true, Extensions: 2}
	if err != nil || !l.Deadline.Equal(want.Deadline) || !l.Cap.Equal(want.Cap) || l.Phase != want.Phase || l.Timeout != want.Timeout ||
		l.OnTimeout != want.OnTimeout || !l.AutoResume || l.Extensions != 2 {
		t.Fatalf("SetTimeout = %+v, %v", l, err)
	}
	if m := p.life.last.GetMode(); m != raydv1.TimeoutMode_TIMEOUT_MODE_EXACT {
		t.Fatalf("mode %v, want EXACT by default", m)
	}
	if _, err := sbx.SetTimeout(t.Context(), time.Minute, AtLeast()); err != nil || p.life.last.GetMode() != raydv1.TimeoutMode_TIMEOUT_MODE_AT_LEAST {
		t.Fatalf("AtLeast: %v, mode %v", err, p.life.last.GetMode())
	}

	_, err = sbx.SetTimeout(t.Context(), 2*time.Hour)
	var ce *CapExceededError
	var re *RPCError
	if !errors.As(err, &ce) || !ce.Cap.Equal(capAt) || !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &re) {
		t.Fatalf("past the cap: %v", err)
	}
	if !strings.Contains(err.Error(), capAt.UTC().Format(time.RFC3339)) {
		t.Fatalf("message %q lacks the cap", err)
	}
	if _, err := sbx.SetTimeout(t.Context(), 3*time.Hour); !errors.Is(err, ErrLifecycleUnmanaged) || ReasonOf(err) != ReasonLifecycleUnmanaged {
		t.Fatalf("unmanaged: %v", err)
	}
	p.life.mu.Lock()
	p.life.last = nil
	p.life.mu.Unlock()
	for _, d := range []time.Duration{0, time.Millisecond, 9 * time.Hour} {
		if _, err := sbx.SetTimeout(t.Context(), d); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("SetTimeout(%s) = %v", d, err)
		}
	}
	if p.life.last != nil {
		t.Fatal("a bad duration reached rayd")
	}
}

// An expired sandbox refuses other calls with ErrSandboxTimeout.
func TestExpiredSandbox(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.proc.list = func() error {
		return wireErr(connect.CodeFailedPrecondition, raydv1.ErrorReason_ERROR_REASON_SANDBOX_TIMEOUT, "sandbox_timeout")
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Commands.List(t.Context()); !errors.Is(err, ErrSandboxTimeout) || ReasonOf(err) != ReasonSandboxTimeout {
		t.Fatalf("List = %v", err)
	}
}

// Pause asks once and waits for SUSPENDED; a second Pause asks nothing;
// Resume asks once, waits for RUNNING and for rayd.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	var steps int
	p.suspend = func(vm *microvmsapi.Microvm) error { vm.State = microvmsapi.StateSuspending; steps = 3; return nil }
	p.resume = func(vm *microvmsapi.Microvm) error { vm.State = microvmsapi.StateSuspended; steps = 3; return nil }
	p.onGet = func(vm *microvmsapi.Microvm) {
		if steps > 0 {
			steps--
			if steps == 0 {
				switch vm.State {
				case microvmsapi.StateSuspending:
					vm.State = microvmsapi.StateSuspended
				case microvmsapi.StateSuspended:
					vm.State = microvmsapi.StateRunning
				}
			}
		}
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := sbx.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p.state() != microvmsapi.StateSuspended || p.suspends.Load() != 1 {
		t.Fatalf("after Pause: %s, %d suspends", p.state(), p.suspends.Load())
	}
	if err := sbx.Pause(t.Context()); err != nil || p.suspends.Load() != 1 {
		t.Fatalf("second Pause: %v, %d suspends", err, p.suspends.Load())
	}
	// Connect to a paused sandbox does not reach it.
	healths := p.health.healths.Load()
	other, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	if p.health.healths.Load() != healths {
		t.Fatal("Connect asked a paused sandbox's Health")
	}
	if err := other.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p.state() != microvmsapi.StateRunning || p.resumes.Load() != 1 || p.health.healths.Load() == healths {
		t.Fatalf("after Resume: %s, %d resumes, Health asked: %v", p.state(), p.resumes.Load(), p.health.healths.Load() != healths)
	}
	if err := Resume(t.Context(), fakeID, p.opts(t)...); err != nil || p.resumes.Load() != 1 {
		t.Fatalf("Resume of a running sandbox: %v, %d resumes", err, p.resumes.Load())
	}
	if err := Pause(t.Context(), fakeID, p.opts(t)...); err != nil || p.suspends.Load() != 2 {
		t.Fatalf("package Pause: %v, %d suspends", err, p.suspends.Load())
	}
	if err := Resume(t.Context(), fakeID, p.opts(t)...); err != nil || p.resumes.Load() != 2 {
		t.Fatalf("package Resume: %v, %d resumes", err, p.resumes.Load())
	}
}

// A conflict from the platform (the state moved under the call) is read
// again, not returned; an ended sandbox is a *SandboxEndedError; ctx
// bounds the wait; unknown ids are not found.
func TestPauseEdges(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.suspend = func(vm *microvmsapi.Microvm) error {
		vm.State = microvmsapi.StateSuspended
		return errors.New(microvmsapi.ConflictException)
	}
	if err := Pause(t.Context(), fakeID, p.opts(t)...); err != nil {
		t.Fatalf("Pause after a conflict: %v", err)
	}

	p.setVM(func(vm *microvmsapi.Microvm) { vm.State = microvmsapi.StateRunning })
	p.suspend = func(vm *microvmsapi.Microvm) error { return errors.New(microvmsapi.ValidationException) }
	if err := Pause(t.Context(), fakeID, p.opts(t)...); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "cannot pause it (a local platform without root") {
		t.Fatalf("Pause refused by the platform: %v", err)
	}

	p.suspend = func(vm *microvmsapi.Microvm) error { return nil } // accepted, never happens
	p.setVM(func(vm *microvmsapi.Microvm) { vm.State = microvmsapi.StateRunning })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := Pause(ctx, fakeID, p.opts(t)...); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pause that never happens: %v", err)
	}

	p.setVM(func(vm *microvmsapi.Microvm) { vm.State, vm.StateReason = microvmsapi.StateTerminated, "max_duration" })
	var ee *SandboxEndedError
	if err := Pause(t.Context(), fakeID, p.opts(t)...); !errors.As(err, &ee) || ee.Reason != EndMaxDuration {
		t.Fatalf("Pause of an ended sandbox: %v", err)
	}
	if err := Resume(t.Context(), fakeID, p.opts(t)...); !errors.As(err, &ee) {
		t.Fatalf("Resume of an ended sandbox: %v", err)
	}
	if err := Pause(t.Context(), "microvm-nope", p.opts(t)...); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Pause of an unknown id: %v", err)
	}
	if err := Resume(t.Context(), "../x", p.opts(t)...); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Resume of a malformed id: %v", err)
	}
}

// Info, GetInfo and List report why a sandbox ended.
func TestEndReasonInInfo(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.health.lifecycle = &raydv1.LifecycleState{Phase: raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE, DeadlineUnixMs: 1_800_000_000_000,
		OnTimeout: raydv1.TimeoutAction_TIMEOUT_ACTION_KILL}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	in, err := sbx.Info(t.Context())
	if err != nil || in.EndReason != "" || in.Lifecycle == nil || in.Lifecycle.Phase != PhaseActive || in.Lifecycle.OnTimeout != TimeoutKill ||
		!in.Lifecycle.Deadline.Equal(time.UnixMilli(1_800_000_000_000)) {
		t.Fatalf("Info of a running sandbox: %+v, %v", in, err)
	}
	in, err = GetInfo(t.Context(), endedID, p.opts(t)...)
	if err != nil || in.State != "TERMINATED" || in.EndReason != EndUnknown || in.EndDetail != "timeout reached" || !in.EndedAt.Equal(p.endedAt) || in.Lifecycle != nil {
		t.Fatalf("GetInfo of an ended sandbox: %+v, %v", in, err)
	}
	if _, err := GetInfo(t.Context(), "microvm-nope", p.opts(t)...); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetInfo unknown: %v", err)
	}
	list, err := List(t.Context(), p.opts(t)...)
	if err != nil || len(list) != 2 || list[1].EndReason != "" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	list, err = List(t.Context(), p.opts(t, WithEndReasons())...)
	if err != nil || len(list) != 2 || list[0].EndReason != "" || list[1].EndReason != EndUnknown || list[1].EndDetail != "timeout reached" {
		t.Fatalf("List WithEndReasons = %+v, %v", list, err)
	}
}
