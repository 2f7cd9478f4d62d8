package rayito

import (
	"strconv"
	"strings"
)

// EndReason is why a sandbox ended, read from the platform's state reason
// (Info.EndReason, SandboxEndedError.Reason). The set is closed; later
// versions may add reasons, so treat an unknown one like EndUnknown.
type EndReason string

// The end reasons.
const (
	// EndKilledByUser: Kill (or the platform's terminate call) ended it.
	EndKilledByUser EndReason = "killed_by_user"
	// EndTimeout: its deadline passed (WithTimeout, SetTimeout) and rayd
	// ended it (exit status 124).
	EndTimeout EndReason = "timeout"
	// EndMaxDuration: the platform ended it at its maximum duration
	// (running plus paused time): the default lifetime of a sandbox
	// created without WithTimeout, or its maximum lifetime
	// (WithMaxLifetime) when paused time ran it out before its deadline.
	EndMaxDuration EndReason = "max_duration"
	// EndOutOfMemory: the sandbox ran out of memory.
	EndOutOfMemory EndReason = "out_of_memory"
	// EndInitExited: the sandbox's init (rayd) exited on its own; Detail
	// says how ("exit status 3", "killed by signal 9 (killed)").
	EndInitExited EndReason = "init_exited"
	// EndPlatformShutdown: the platform stopped and took the sandbox with
	// it (a shutdown that ended every sandbox, a sandbox lost across a
	// platform restart).
	EndPlatformShutdown EndReason = "platform_shutdown"
	// EndPlatformError: the platform failed (a launch, a run or resume
	// hook, the cgroup freezer); Detail names which.
	EndPlatformError EndReason = "platform_error"
	// EndIdle: the platform ended it after an idle or paused period.
	EndIdle EndReason = "idle"
	// EndUnknown: the platform gave no reason, or one this SDK does not
	// know (its text, if any, is the detail).
	EndUnknown EndReason = "unknown"
)

// endReasons is the closed set the local platform writes as its state
// reason, alone or followed by ": detail".
var endReasons = map[EndReason]bool{
	EndKilledByUser: true, EndTimeout: true, EndMaxDuration: true, EndOutOfMemory: true,
	EndInitExited: true, EndPlatformShutdown: true, EndPlatformError: true, EndIdle: true,
}

// The AWS texts (and an older local platform's, which copied them) that
// this SDK maps. "Success." is not mapped: the service says it for more
// than one way of ending.
const (
	awsExitPrefix  = "Container Stopped with Exit Code: "
	awsExitUnknown = "Container Stopped."
	// timeoutExitStatus is rayd's exit status when a deadline ends the
	// sandbox (contract: kill mode exits 124).
	timeoutExitStatus = 124
)

// legacyReasons are the fixed texts of older local platforms.
var legacyReasons = map[string]EndReason{
	"Platform restarted; sandbox lost.":                EndPlatformShutdown,
	"Platform stopped while the microVM was starting.": EndPlatformShutdown,
	"Terminated by the local platform.":                EndPlatformShutdown,
	"Run hook timed out.":                              EndPlatformError,
}

// maxEndDetail caps EndDetail (and the state reason in errors).
const maxEndDetail = 240

// parseEndReason reads a platform's state reason: the local platform's
// "reason" or "reason: detail" (e.g. "init_exited: killed by signal 9
// (killed)"), or the AWS service's texts ("Container Stopped with Exit
// Code: 124" is EndTimeout, any other code EndInitExited with detail
// "exit status N"; "Maximum duration reached." EndMaxDuration). Anything
// else, "" included, is EndUnknown with the text (cut to 240 bytes,
// non-printable bytes replaced) as the detail. The platform's state
// reasons are service texts, never user data.
func parseEndReason(stateReason string) (EndReason, string) {
	s := strings.TrimSpace(stateReason)
	head, detail, _ := strings.Cut(s, ":")
	if r := EndReason(head); endReasons[r] {
		return r, cleanDetail(detail)
	}
	if code, ok := strings.CutPrefix(s, awsExitPrefix); ok {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(code), "."))
		switch {
		case err != nil:
			return EndInitExited, cleanDetail(code)
		case n == timeoutExitStatus:
			return EndTimeout, ""
		default:
			return EndInitExited, "exit status " + strconv.Itoa(n)
		}
	}
	if s == awsExitUnknown {
		return EndInitExited, ""
	}
	if strings.HasPrefix(strings.ToLower(s), "maximum duration") {
		return EndMaxDuration, ""
	}
	if r, ok := legacyReasons[s]; ok {
		return r, ""
	}
	if strings.HasPrefix(s, "Sandbox launch failed") {
		return EndPlatformError, cleanDetail(strings.TrimPrefix(s, "Sandbox launch failed"))
	}
	return EndUnknown, cleanDetail(s)
}

// cleanDetail trims d, replaces what is not printable ASCII and cuts it to
// maxEndDetail bytes.
func cleanDetail(d string) string {
	d = strings.TrimLeft(strings.TrimSpace(d), ":; ")
	if len(d) > maxEndDetail {
		d = d[:maxEndDetail]
	}
	b := []byte(d)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}

// describeEnd words a reason and its detail: "timeout", "init_exited:
// exit status 3", or for EndUnknown the detail alone ("" when none).
func describeEnd(r EndReason, detail string) string {
	switch {
	case r == "" || r == EndUnknown:
		return detail
	case detail == "":
		return string(r)
	}
	return string(r) + ": " + detail
}
