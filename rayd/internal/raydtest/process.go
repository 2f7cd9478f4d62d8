package raydtest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// Result is a collected process stream.
type Result struct {
	Pid      uint32
	Stdout   string
	Stderr   string
	LastSeq  uint64
	End      *raydv1.EndEvent
	Messages int
}

// Collect reads a process stream to its end, checking that it starts
// with start, that its sequence numbers grow and that it ends with end.
func Collect(t *testing.T, s *connect.ServerStreamForClient[raydv1.ProcessEvent]) Result {
	t.Helper()
	defer s.Close()
	var r Result
	var out, errOut strings.Builder
	for s.Receive() {
		ev := s.Msg()
		if r.Messages == 0 && ev.GetStart() == nil {
			t.Fatalf("first message is not start: %v", ev)
		}
		r.Messages++
		switch e := ev.Event.(type) {
		case *raydv1.ProcessEvent_Start:
			r.Pid = e.Start.GetPid()
		case *raydv1.ProcessEvent_Data:
			if e.Data.GetSeq() <= r.LastSeq {
				t.Fatalf("seq went from %d to %d", r.LastSeq, e.Data.GetSeq())
			}
			r.LastSeq = e.Data.GetSeq()
			out.Write(e.Data.GetStdout())
			errOut.Write(e.Data.GetStderr())
		case *raydv1.ProcessEvent_End:
			r.End = e.End
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if r.End == nil {
		t.Fatal("stream ended without end")
	}
	r.Stdout, r.Stderr = out.String(), errOut.String()
	return r
}

// Shell is a StartRequest running script with /bin/sh -c.
func Shell(script string) *raydv1.StartRequest {
	return &raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}}
}

// CodeOf is err's Connect code (CodeUnknown for an error without one).
func CodeOf(err error) connect.Code {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code()
	}
	return connect.CodeUnknown
}

// RequireRoot skips the test unless it runs as root.
func RequireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: identity switching and rlimits are only enforced when rayd runs as root")
	}
}

// NewToken returns a fresh access token and its digest.
func NewToken(t *testing.T) (string, string) {
	t.Helper()
	tok, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	d, err := accesstoken.Digest(tok)
	if err != nil {
		t.Fatal(err)
	}
	return tok, d
}

// MustConnect reattaches to process pid from sequence number from.
func MustConnect(t *testing.T, c interface {
	Connect(context.Context, *connect.Request[raydv1.ConnectRequest]) (*connect.ServerStreamForClient[raydv1.ProcessEvent], error)
}, pid uint32, from uint64) *connect.ServerStreamForClient[raydv1.ProcessEvent] {
	t.Helper()
	s, err := c.Connect(context.Background(), connect.NewRequest(&raydv1.ConnectRequest{Pid: pid, FromSeq: from}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// MustStart starts req; the stream's context ends with the test (or after
// three minutes).
func MustStart(t *testing.T, c interface {
	Start(context.Context, *connect.Request[raydv1.StartRequest]) (*connect.ServerStreamForClient[raydv1.ProcessEvent], error)
}, req *raydv1.StartRequest) *connect.ServerStreamForClient[raydv1.ProcessEvent] {
	t.Helper()
	// Bounded: a rayd that stopped under the test must not hang it. The
	// context bounds the whole stream: longer than any test follows one.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	s, err := c.Start(ctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return s
}

// Ptr is a pointer to v.
func Ptr[T any](v T) *T { return &v }

// TestCtx is a context that ends with the test or after 30 seconds.
func TestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ReasonOf reads the ErrorInfo detail of a Connect error
// (ERROR_REASON_UNSPECIFIED without one).
func ReasonOf(err error) raydv1.ErrorReason {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return raydv1.ErrorReason_ERROR_REASON_UNSPECIFIED
	}
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*raydv1.ErrorInfo); ok {
				return info.GetReason()
			}
		}
	}
	return raydv1.ErrorReason_ERROR_REASON_UNSPECIFIED
}
