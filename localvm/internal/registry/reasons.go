package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
)

// State reasons. The stateReason of a TERMINATING or TERMINATED microVM
// is one of these codes, alone or as "code: detail", where the detail is a
// fixed-form text (numbers and fixed words, never a payload, a path or an
// error message; the full error goes to the platform's log only):
//
//	killed_by_user     TerminateMicrovm
//	timeout            rayd exited 124: its lifecycle deadline passed
//	max_duration       maximumDurationInSeconds since startedAt (running and suspended time)
//	out_of_memory      rayd was killed and the sandbox cgroup's OOM kill counter rose
//	init_exited        rayd exited otherwise: "exit status N", "killed by signal N (name)",
//	                   "exit status unknown" (an adopted sandbox: not the platform's child)
//	platform_shutdown  terminate-all (rayito local down), a platform stopped while the
//	                   microVM was starting, a sandbox lost across a platform restart
//	platform_error     the launch failed, the run or resume hook failed or timed out,
//	                   the cgroup freezer failed
//	idle               suspended for idlePolicy.suspendedDurationSeconds
//
// ReasonCode returns the code of a stateReason. Every reason the registry
// sets is built in this file.
const (
	ReasonKilledByUser     = "killed_by_user"
	ReasonTimeout          = "timeout"
	ReasonMaxDuration      = "max_duration"
	ReasonOutOfMemory      = "out_of_memory"
	ReasonInitExited       = "init_exited"
	ReasonPlatformShutdown = "platform_shutdown"
	ReasonPlatformError    = "platform_error"
	ReasonIdle             = "idle"
)

// Full reasons with a fixed detail.
const (
	ReasonPlatformLost      = ReasonPlatformShutdown + ": sandbox lost across a platform restart"
	ReasonPlatformStopped   = ReasonPlatformShutdown + ": platform stopped while the microVM was starting"
	ReasonTerminateAll      = ReasonPlatformShutdown + ": all microVMs terminated by the local platform"
	ReasonLaunchFailed      = ReasonPlatformError + ": sandbox launch failed"
	ReasonRunHookTimeout    = ReasonPlatformError + ": run hook timed out"
	ReasonRunHookFailed     = ReasonPlatformError + ": run hook failed"
	ReasonResumeTimeout     = ReasonPlatformError + ": resume hook timed out"
	ReasonResumeFailed      = ReasonPlatformError + ": resume hook failed"
	ReasonFreezerFailed     = ReasonPlatformError + ": cgroup freezer failed"
	ReasonExitStatusUnknown = ReasonInitExited + ": exit status unknown"
)

// launchFailure is the state reason of a launch that failed with err. A
// refusal of what this platform cannot enforce without privileges
// (launcher.ErrNeedsPrivilege: Internet access without slirp4netns, no
// Internet access or limits without isolation) keeps its explanation,
// which is written for the user and names no path of theirs; any other
// launch error may name paths, so the log gets it and the reason a fixed
// text.
func launchFailure(err error) string {
	if !errors.Is(err, launcher.ErrNeedsPrivilege) {
		return ReasonLaunchFailed
	}
	msg := strings.TrimPrefix(err.Error(), launcher.ErrNeedsPrivilege.Error()+": ")
	return ReasonPlatformError + ": " + oneLineReason(msg, 240)
}

// oneLineReason keeps the first line of s, at most n bytes, printable
// ASCII only.
func oneLineReason(s string, n int) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	b := make([]byte, 0, min(len(s), n))
	for i := 0; i < len(s) && len(b) < n; i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b = append(b, c)
		}
	}
	return string(b)
}

// raydTimeoutExit is rayd's exit code when its lifecycle deadline ends the
// sandbox.
const raydTimeoutExit = 124

// ReasonCode returns the code of a stateReason: the text before ": ".
func ReasonCode(reason string) string {
	code, _, _ := strings.Cut(reason, ": ")
	return code
}

// Reasons lists every reason code.
func Reasons() []string {
	return []string{ReasonKilledByUser, ReasonTimeout, ReasonMaxDuration, ReasonOutOfMemory,
		ReasonInitExited, ReasonPlatformShutdown, ReasonPlatformError, ReasonIdle}
}

// exitReason is the stateReason of a sandbox whose rayd ended by itself:
// st and known are its exit status (unknown for an adopted sandbox), and
// oomBefore and oomAfter the sandbox cgroup's OOM kill counter at the
// last sample before rayd ended and after (oomOK false without a
// counter). rayd is the OOM killer's last choice (oom_score_adj -1000,
// its processes 1000); a counter that rose while rayd was killed by
// SIGKILL (or ended with an unknown status) means the kernel killed it.
func exitReason(st launcher.ExitStatus, known bool, oomBefore, oomAfter uint64, oomOK bool) string {
	if oomOK && oomAfter > oomBefore && (!known || st.Signal == syscall.SIGKILL) {
		return ReasonOutOfMemory
	}
	switch {
	case !known:
		return ReasonExitStatusUnknown
	case st.Signal != 0:
		name := st.Signal.String()
		if strings.HasPrefix(name, "signal ") { // no name known
			return fmt.Sprintf("%s: killed by signal %d", ReasonInitExited, int(st.Signal))
		}
		return fmt.Sprintf("%s: killed by signal %d (%s)", ReasonInitExited, int(st.Signal), name)
	case st.Code == raydTimeoutExit:
		return ReasonTimeout
	}
	return fmt.Sprintf("%s: exit status %d", ReasonInitExited, st.Code)
}

// instanceExitReason is exitReason for inst, which has ended.
func instanceExitReason(inst launcher.Instance, oomBefore uint64, oomBeforeOK bool) string {
	st, known := inst.ExitStatus()
	after, ok := inst.OOMKills()
	return exitReason(st, known, oomBefore, after, ok && oomBeforeOK)
}

// runFailureReason is the stateReason for a failed run hook (errExited is
// handled by the caller: rayd's exit explains it).
func runFailureReason(err error) string {
	var se *hookStatusError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("%s with HTTP status %d", ReasonRunHookFailed, se.status)
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonRunHookTimeout
	}
	return ReasonRunHookFailed
}

// resumeFailureReason is the stateReason for a failed resume hook.
func resumeFailureReason(err error) string {
	var se *hookStatusError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("%s with HTTP status %d", ReasonResumeFailed, se.status)
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonResumeTimeout
	}
	return ReasonResumeFailed
}

// legacyReason maps a stateReason written by a platform from before the
// closed set ("Success.", "Container Stopped with Exit Code: N", ...) to
// its code, so that a restarted platform answers the closed set only.
func legacyReason(reason string) string {
	switch reason {
	case "", ReasonKilledByUser, ReasonTimeout, ReasonMaxDuration, ReasonOutOfMemory, ReasonIdle:
		return reason
	case "Success.":
		return ReasonKilledByUser
	case "Maximum duration reached.":
		return ReasonMaxDuration
	case "Platform restarted; sandbox lost.":
		return ReasonPlatformLost
	case "Platform stopped while the microVM was starting.":
		return ReasonPlatformStopped
	case "Terminated by the local platform.":
		return ReasonTerminateAll
	case "Run hook timed out.":
		return ReasonRunHookTimeout
	case "Container Stopped.":
		return ReasonExitStatusUnknown
	}
	var code int
	if n, err := fmt.Sscanf(reason, "Container Stopped with Exit Code: %d", &code); n == 1 && err == nil {
		return exitReason(launcher.ExitStatus{Code: code}, true, 0, 0, false)
	}
	for _, c := range Reasons() {
		if ReasonCode(reason) == c {
			return reason
		}
	}
	if strings.HasPrefix(reason, "Sandbox launch failed") {
		return ReasonLaunchFailed
	}
	return ReasonPlatformError // "Run hook failed ..." and anything unknown
}
