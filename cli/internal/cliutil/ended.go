package cliutil

import (
	"context"
	"errors"
	"time"

	"github.com/urfave/cli/v3"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// ExitSandboxEnded is the exit code of run, exec, shell and code when the
// sandbox was killed or ended otherwise than by its time running out
// under the command (killed_by_user, out_of_memory, idle,
// platform_shutdown, ...): 128+SIGKILL, as `docker run` exits when its
// container is killed or runs out of memory. 1 would not do: it is the
// most common code of commands themselves, so a script could not tell
// its command's failure from its sandbox's end. A sandbox whose time ran
// out (its deadline, its maximum duration) exits ExitTimeout instead, as
// the CLI's own --timeout does.
const ExitSandboxEnded = 137

// ExitCodesHelp is the exit code text of the commands that run something
// in a sandbox (run, exec, shell).
const ExitCodesHelp = "Exit codes: the command's own; 124 past --timeout, or when the sandbox's time ran out under it\n" +
	"(its deadline: timeout, or its maximum duration: max_duration); 137 when the sandbox was killed\n" +
	"or ended otherwise under it (killed_by_user, out_of_memory, idle, platform_shutdown, ...);\n" +
	"either way one line on stderr says so: rayito: sandbox ID ended: REASON.\n" +
	"126 not executable; 127 not found; 130 on Ctrl-C; 2 usage."

// SandboxEndError: the sandbox ended under a command. The CLI prints
// "rayito: sandbox ID ended: REASON" and exits ExitTimeout when the
// sandbox's time ran out (timeout, max_duration), ExitSandboxEnded
// otherwise.
type SandboxEndError struct {
	ID     string
	Reason rayito.EndReason // EndUnknown when the platform did not say
	Detail string
}

// endOf is a *SandboxEndError; an empty reason is EndUnknown.
func endOf(id string, r rayito.EndReason, detail string) *SandboxEndError {
	if r == "" {
		r = rayito.EndUnknown
	}
	return &SandboxEndError{ID: id, Reason: r, Detail: detail}
}

func (e *SandboxEndError) Error() string {
	return "sandbox " + e.ID + " ended: " + EndText(e.Reason, e.Detail)
}

// ExitCode is the CLI's exit code (cli.ExitCoder: Exit maps it).
func (e *SandboxEndError) ExitCode() int {
	switch e.Reason {
	case rayito.EndTimeout, rayito.EndMaxDuration:
		return ExitTimeout
	}
	return ExitSandboxEnded
}

var _ cli.ExitCoder = (*SandboxEndError)(nil)

// endCheckTimeout bounds EndedUnder's questions to the platform.
const endCheckTimeout = 10 * time.Second

// EndedUnder is the one rule for a sandbox that ends under a command run
// by run, exec, shell or code: given how the command ended (its exit code
// and status, "" when unknown, as Wait reported them; err is Wait's error
// when it gave no result), it returns a *SandboxEndError when the sandbox
// ended, nil when it did not or nothing says so. The platform is asked
// only when the end may be the sandbox's: a signal (an exit code above
// 128: the platform's terminate hook ends every process with SIGTERM),
// the OOM killer, or a wait that failed; never after a command that
// exited on its own, nor on Ctrl-C (ctx done). A local platform that no
// longer answers then counts as the sandbox's end (reason unknown, "its
// platform stopped answering"): nothing can reach the sandbox any more.
func EndedUnder(ctx context.Context, sbx *rayito.Sandbox, code int, status rayito.CommandStatus, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	var ended *rayito.SandboxEndedError
	switch {
	case errors.As(err, &ended):
		return endOf(sbx.ID(), ended.Reason, ended.Detail)
	case err == nil && status == rayito.StatusSandboxTimeout:
		// rayd's deadline (kill) ended every process; rayd exits next.
		return endOf(sbx.ID(), rayito.EndTimeout, "")
	case err == nil && status == rayito.StatusTimeout:
		// Its own timeout (--timeout) ended it.
		return nil
	case err == nil && status != rayito.StatusSignaled && status != rayito.StatusOOMKilled && code <= 128:
		return nil
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, endCheckTimeout)
	defer cancel()
	for {
		info, ierr := sbx.Info(ctx)
		switch {
		case ierr != nil:
			if errors.As(ierr, &ended) {
				return endOf(sbx.ID(), ended.Reason, ended.Detail)
			}
			if errors.Is(ierr, rayito.ErrPlatformUnavailable) {
				// The command's stream was cut (or a signal ended it)
				// and its local platform is gone: `rayito local down`
				// ends its sandboxes, and nothing can reach one now.
				return endOf(sbx.ID(), rayito.EndUnknown, "its platform stopped answering")
			}
			return nil
		case info.State == "TERMINATED" || info.State == "TERMINATING" && info.EndReason != "" && info.EndReason != rayito.EndUnknown:
			return endOf(sbx.ID(), info.EndReason, info.EndDetail)
		case info.State == "TERMINATING":
			// The platform ends it and has not said why yet (AWS names
			// the reason once TERMINATED).
		case info.Lifecycle != nil && info.Lifecycle.Phase == rayito.PhaseExpired && info.Lifecycle.OnTimeout == rayito.TimeoutKill:
			// Past its deadline with kill: rayd is ending it.
			return endOf(sbx.ID(), rayito.EndTimeout, "")
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return nil
			}
			return endOf(sbx.ID(), info.EndReason, info.EndDetail)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
