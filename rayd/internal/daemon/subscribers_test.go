package daemon

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// The security model's cap: at most 8 streams follow one process (the
// Start stream counts); the 9th is ResourceExhausted with reason
// RESOURCE_EXHAUSTED, and a freed place can be taken again. The same cap
// holds for PTYs: both services attach through proc.Process.Subscribe.
func TestProcessSubscriberCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Run(nil)
	c := h.Processes()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := c.Start(ctx, connect.NewRequest(raydtest.Shell("sleep 30")))
	if err != nil {
		t.Fatal(err)
	}
	if !first.Receive() {
		t.Fatal(first.Err())
	}
	pid := first.Msg().GetStart().GetPid()
	defer func() {
		_, _ = c.SendSignal(context.Background(), connect.NewRequest(&raydv1.SendSignalRequest{Pid: pid, Signal: raydv1.Signal_SIGNAL_SIGKILL}))
	}()
	var streams []*connect.ServerStreamForClient[raydv1.ProcessEvent]
	for range 7 {
		s := raydtest.MustConnect(t, c, pid, 0)
		if !s.Receive() {
			t.Fatalf("attach %d: %v", len(streams)+2, s.Err())
		}
		streams = append(streams, s)
	}
	ninth := connectErr(c, pid)
	if raydtest.CodeOf(ninth) != connect.CodeResourceExhausted || raydtest.ReasonOf(ninth) != raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED {
		t.Fatalf("9th subscriber: %v (reason %v)", ninth, raydtest.ReasonOf(ninth))
	}
	// Leaving frees a place.
	first.Close()
	var again error
	for range 50 {
		if again = connectErr(c, pid); raydtest.CodeOf(again) != connect.CodeResourceExhausted {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if again != nil {
		t.Fatalf("after one left: %v", again)
	}
	for _, s := range streams {
		s.Close()
	}
}

// connectErr attaches to pid and returns the error of the attach (nil when
// the stream opened; it is closed then).
func connectErr(c raydv1connect.ProcessServiceClient, pid uint32) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.Connect(ctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: pid}))
	if err != nil {
		return err
	}
	defer s.Close()
	if !s.Receive() {
		return s.Err()
	}
	return nil
}
