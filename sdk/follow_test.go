package rayito

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

func testToken(t *testing.T) string {
	t.Helper()
	tok, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func emptyAWSConfig() aws.Config { return aws.Config{} }

func data(seq uint64, out string) *raydv1.ProcessEvent {
	return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_Data{Data: &raydv1.DataEvent{Seq: seq, Output: &raydv1.DataEvent_Stdout{Stdout: []byte(out)}}}}
}

func startEv(pid uint32) *raydv1.ProcessEvent {
	return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_Start{Start: &raydv1.StartEvent{Pid: pid}}}
}

func endEv(code int32) *raydv1.ProcessEvent {
	return &raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_End{End: &raydv1.EndEvent{ExitCode: code, Exited: true, Status: "exited"}}}
}

// The stream drops twice before the end; each reattach asks for the seq
// after the last one delivered, rayd replays a chunk already seen, and the
// command still sees every chunk once, in order, then its end.
func TestFollowerReattachesAndDedupes(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(42))
		_ = s.Send(data(1, "a"))
		_ = s.Send(data(2, "b"))
		return connect.NewError(connect.CodeUnavailable, errors.New("proxy reset"))
	}
	p.proc.connect = func(from uint64, s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(42))
		switch from {
		case 3:
			_ = s.Send(data(2, "b")) // a replay the client has seen
			_ = s.Send(data(3, "c"))
			return connect.NewError(connect.CodeUnavailable, errors.New("suspending"))
		case 4:
			_ = s.Send(&raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_Keepalive{Keepalive: &raydv1.KeepAlive{}}})
			_ = s.Send(data(4, "d"))
			return s.Send(endEv(3))
		}
		return wireErr(connect.CodeOutOfRange, raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED, "gone")
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	res, err := sbx.Commands.Run(t.Context(), "x", OnStdout(func(b []byte) { seen.Write(b) }))
	var ee *CommandExitError
	if !errors.As(err, &ee) || res.ExitCode != 3 || res.Stdout != "abcd" || seen.String() != "abcd" {
		t.Fatalf("Run = %+v, %v; callback saw %q", res, err, seen.String())
	}
	p.proc.mu.Lock()
	defer p.proc.mu.Unlock()
	if len(p.proc.connects) != 2 || p.proc.connects[0] != 3 || p.proc.connects[1] != 4 {
		t.Fatalf("reattached from %v, want [3 4]", p.proc.connects)
	}
}

// A reattach that finds the output dropped ends the follow with that
// reason, without retrying.
func TestFollowerStopsOnOutOfRange(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(7))
		_ = s.Send(data(1, "a"))
		return connect.NewError(connect.CodeUnavailable, errors.New("reset"))
	}
	p.proc.connect = func(uint64, *connect.ServerStream[raydv1.ProcessEvent]) error {
		return wireErr(connect.CodeOutOfRange, raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED, "output at from_seq is no longer held")
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sbx.Commands.Run(t.Context(), "x")
	if ReasonOf(err) != ReasonOutputTruncated {
		t.Fatalf("Run = %v (reason %q)", err, ReasonOf(err))
	}
	p.proc.mu.Lock()
	defer p.proc.mu.Unlock()
	if len(p.proc.connects) != 1 {
		t.Fatalf("%d reattaches, want 1", len(p.proc.connects))
	}
}

// A running sandbox that stops answering (Health up, every stream cut at
// once) makes the follower give up once its reconnect budget is spent,
// with the stream's error.
func TestFollowerGivesUp(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(7))
		return connect.NewError(connect.CodeUnavailable, errors.New("reset"))
	}
	p.proc.connect = func(uint64, *connect.ServerStream[raydv1.ProcessEvent]) error {
		return connect.NewError(connect.CodeUnavailable, errors.New("still down"))
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := time.Now()
	_, err = sbx.Commands.Run(ctx, "x")
	var re *RPCError
	if !errors.As(err, &re) || re.Code != CodeUnavailable {
		t.Fatalf("Run = %v, want the stream's error", err)
	}
	if d := time.Since(start); d < fastTimings.reconnect {
		t.Fatalf("gave up after %s, before the %s budget", d, fastTimings.reconnect)
	}
	p.proc.mu.Lock()
	defer p.proc.mu.Unlock()
	if n := len(p.proc.connects); n < 2 {
		t.Fatalf("%d reattaches, want several", n)
	}
}
