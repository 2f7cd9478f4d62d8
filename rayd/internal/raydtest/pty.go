package raydtest

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
)

// Term reads a PTY stream.
type Term struct {
	t *testing.T
	s *connect.ServerStreamForClient[raydv1.PtyServerMessage]
	// Pid is the terminal's process (from the started message).
	Pid uint32
	// Out is the output so far.
	Out strings.Builder
	// LastSeq is the last data message's sequence number.
	LastSeq uint64
	// End is the exited message, once received.
	End *raydv1.EndEvent
}

// NewTerm checks the stream's first message (started{pid}).
func NewTerm(t *testing.T, s *connect.ServerStreamForClient[raydv1.PtyServerMessage]) *Term {
	t.Helper()
	if !s.Receive() {
		t.Fatalf("no first message: %v", s.Err())
	}
	st := s.Msg().GetStarted()
	if st == nil || st.GetPid() == 0 {
		t.Fatalf("first message %v", s.Msg())
	}
	t.Cleanup(func() { s.Close() })
	return &Term{t: t, s: s, Pid: st.GetPid()}
}

// Receive handles one message; false at the end of the stream.
func (m *Term) Receive() bool {
	m.t.Helper()
	if !m.s.Receive() {
		if err := m.s.Err(); err != nil {
			m.t.Fatalf("stream: %v; output %q", err, m.Out.String())
		}
		return false
	}
	switch e := m.s.Msg().Event.(type) {
	case *raydv1.PtyServerMessage_Data:
		// A message's seq is its last chunk's: it grows with every
		// message, by the number of chunks it carries.
		if seq := m.s.Msg().GetSeq(); seq <= m.LastSeq || seq == 0 {
			m.t.Fatalf("seq %d after %d", seq, m.LastSeq)
		}
		m.LastSeq = m.s.Msg().GetSeq()
		m.Out.Write(e.Data)
	case *raydv1.PtyServerMessage_Exited:
		if m.End != nil {
			m.t.Fatal("second exited")
		}
		m.End = e.Exited
	case *raydv1.PtyServerMessage_Started:
		m.t.Fatal("second started")
	}
	return true
}

// Until reads until the output matches re.
func (m *Term) Until(re string) {
	m.t.Helper()
	rx := regexp.MustCompile(re)
	for !rx.MatchString(m.Out.String()) {
		if !m.Receive() || m.End != nil {
			m.t.Fatalf("waiting for %q; output %q, end %v", re, m.Out.String(), m.End)
		}
	}
}

// Finish reads to the end of the stream.
func (m *Term) Finish() {
	m.t.Helper()
	for m.Receive() {
	}
	if m.End == nil {
		m.t.Fatalf("stream ended without exited; output %q", m.Out.String())
	}
}

// Send types input on the terminal.
func (m *Term) Send(c raydv1connect.PtyServiceClient, input string) {
	m.t.Helper()
	if _, err := c.SendInput(context.Background(), connect.NewRequest(&raydv1.SendInputRequest{Pid: m.Pid, Data: []byte(input)})); err != nil {
		m.t.Fatalf("SendInput: %v", err)
	}
}

// ShPty starts /bin/sh on a PTY with a fixed prompt.
func ShPty(t *testing.T, ctx context.Context, c raydv1connect.PtyServiceClient, size *raydv1.PtySize) *Term {
	t.Helper()
	s, err := c.Create(ctx, connect.NewRequest(&raydv1.PtyStart{Shell: Ptr("/bin/sh"), Size: size, Envs: map[string]string{"PS1": "$ "}}))
	if err != nil {
		t.Fatal(err)
	}
	return NewTerm(t, s)
}

// Close closes the stream (the terminal goes on: a client that left).
func (m *Term) Close() error { return m.s.Close() }
