package proc

import (
	"fmt"
	"syscall"
)

// Stream identifies an output pipe of a process.
type Stream uint8

// Output streams. The values match the child's file descriptor numbers.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("Stream(%d)", uint8(s))
}

// EventKind is the type of an [Event].
type EventKind uint8

// Event kinds.
const (
	// Data carries one chunk of output (Stream, Seq, Data).
	Data EventKind = iota + 1
	// End is the last event of a process; Exit is set. Seq is the sequence
	// number the next chunk would have had (it is not consumed), so
	// Subscribe(End.Seq) on the ended process yields just the End event.
	End
	// Truncated means the subscriber was cut because it fell too far behind
	// (or stopped consuming) and output it had not received was discarded.
	// Seq is the first sequence number it missed. It is followed by io.EOF.
	Truncated
)

func (k EventKind) String() string {
	switch k {
	case Data:
		return "data"
	case End:
		return "end"
	case Truncated:
		return "truncated"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one item of a subscription.
type Event struct {
	Kind   EventKind
	Stream Stream
	Seq    uint64
	// Data is shared with the process's replay ring and every other
	// subscriber: it must not be modified.
	Data []byte
	Exit ExitInfo // set for End
}

// ExitInfo.Status values.
const (
	StatusExited   = "exited"
	StatusSignaled = "signaled"
	StatusTimeout  = "timeout"
	// StatusOOMKilled: the kernel's OOM killer ended the leader (a
	// SIGKILL rayd did not send while the sandbox's OOM kill count rose;
	// see Options.OOMKills).
	StatusOOMKilled = "oom_killed"
)

// ExitErrDeadlineExceeded is the ExitInfo.Err value of a timed-out process.
const ExitErrDeadlineExceeded = "deadline_exceeded"

// ExitInfo describes how a process ended.
//
// For a process whose Spec.Timeout expired before its leader exited, Status
// is "timeout" and Err is "deadline_exceeded"; the other fields still
// describe the leader's actual wait status (normally Exited false and
// ExitCode 128+SIGTERM or 128+SIGKILL; a child that catches SIGTERM and
// calls exit(2) reports Exited true with its own code).
type ExitInfo struct {
	// ExitCode is the exit status, or 128+signal when killed by a signal.
	ExitCode int32
	// Exited is true when the leader exited normally (exit(2) or return
	// from main) rather than being killed by a signal.
	Exited bool
	// Status is "exited", "signaled", "timeout" or "oom_killed" (then
	// ExitCode is 137 and Signal SIGKILL).
	Status string
	// Signal is the signal that killed the leader, or 0.
	Signal syscall.Signal
	// Err is "deadline_exceeded" for a timeout, else "".
	Err string
}

// rawExit is a decoded wait status of a process group leader.
type rawExit struct {
	exited bool
	code   int
	sig    syscall.Signal
}

func exitInfo(r rawExit, timedOut bool) ExitInfo {
	var e ExitInfo
	if r.exited {
		e = ExitInfo{ExitCode: int32(r.code), Exited: true, Status: StatusExited}
	} else {
		e = ExitInfo{ExitCode: 128 + int32(r.sig), Signal: r.sig, Status: StatusSignaled}
	}
	if timedOut {
		e.Status = StatusTimeout
		e.Err = ExitErrDeadlineExceeded
	}
	return e
}
