// Package proc is rayd's process supervision core: it starts untrusted
// commands, reaps them, and buffers their output for any number of
// subscribers.
//
// # Processes
//
// A [Supervisor] starts each command described by a [Spec] as the leader of
// a new process group, optionally under another account (setgroups, setgid,
// setuid from an identity.Identity), with separate stdout and stderr pipes,
// stdin from /dev/null or from a pipe fed by [Process.WriteStdin], and no
// other descriptor (every descriptor of rayd from 3 up is marked
// close-on-exec before the fork, including any rayd inherited without the
// flag). Processes are not tied to the caller: they outlive RPCs and are
// only stopped by a timeout, [Process.Signal] or [Supervisor.Shutdown].
//
// Resource limits (RLIMIT_NOFILE, RLIMIT_NPROC, RLIMIT_CORE from
// [Options].Rlimits) are in force from the child's first instruction: Go
// has no hook between fork and exec, so the supervisor installs the child's
// limits on rayd itself for the duration of the fork and restores rayd's
// own right after, under the spawn lock. Other goroutines of rayd run under
// the child's limits during that window (the fork and exec, about a
// millisecond), so rayd itself must stay below them: as root RLIMIT_NPROC
// does not apply to it, and it should keep fewer than Nofile descriptors
// open. With CAP_SYS_RESOURCE the hard limits are set too; without it only
// the soft limits are lowered, since rayd could not raise its own hard
// limits back.
//
// # Terminals
//
// A Spec with PTY starts the command on a new pseudo-terminal instead of
// pipes: the supervisor opens /dev/ptmx (close-on-exec, non-blocking),
// unlocks it, opens the slave (TIOCGPTPEER, or /dev/pts/N on kernels
// before 4.13), sets the window size, hands the slave to the child as fds
// 0-2 and makes it the child's controlling terminal in a new session
// (setsid, TIOCSCTTY; the session id is also the process group id). The
// slave is owned by the child's account, like a login terminal. One reader
// copies the master into the ring in reads of at most 16 KiB, all as
// Stdout; it stops at EIO (no slave descriptor left open) or, once the
// leader has been reaped, after DrainAfterExit without data, and then
// closes the master. [Process.WriteInput] writes to the master and
// [Process.Resize] sets the window size (the kernel sends SIGWINCH). PTYs
// are processes of [KindPTY] in every other respect: same cap, replay,
// subscribers, signals and timeouts.
//
// # Reaping
//
// [New] makes rayd a child subreaper, so orphaned descendants of the
// commands are reparented to rayd instead of init. A single reaper goroutine
// collects every child with wait4(-1, WNOHANG) on SIGCHLD and on a 5 s
// ticker: leaders' statuses go to their [Process], others are discarded.
// Consequently nothing else in the program may wait for children (no
// os/exec Cmd.Wait), and at most one Supervisor may be running at a time
// (tests that create Supervisors must not run in parallel).
//
// A process has ended when its leader has been reaped and both output pipes
// reached EOF, or [Options].DrainAfterExit passed without data after the
// reap (a background child that inherited the pipes cannot keep a finished
// command "running"). Ended processes stay available to [Supervisor.Get]
// and [Process.Subscribe] for [Options].EndedRetention.
//
// With [Options].OOMKills (the sandbox's count of OOM kills) a leader the
// kernel's OOM killer ended has Status "oom_killed" rather than "signaled":
// it died of a SIGKILL rayd did not send while the count rose.
//
// # Output
//
// Every read from a pipe (at most 64 KiB) becomes an immutable chunk with
// the next sequence number of the process (one counter across stdout and
// stderr, starting at 1). Each process keeps its most recent
// [Options].RingBytes for replay (always at least the newest chunk). Older
// chunks are held only for subscribers that still need them, and only while
// such a subscriber lags at most [Options].MaxSubscriberLag bytes behind the
// fastest one and the sandbox-wide total of held bytes (replay rings included)
// stays within [Options].OutputBudget. A subscriber that would lose data
// while a faster one keeps up is cut instead: it receives a [Truncated]
// event and then io.EOF. So is a subscriber that leaves data pending
// without calling Next for [Options].StuckAfter. When even the fastest
// attached subscriber is that far behind, the pipe readers pause until it
// catches up, so the process sees ordinary pipe backpressure and a lone
// slow client still gets every byte; a stuck client holds the process for
// at most StuckAfter, and a process with no subscribers never waits.
//
// A [Subscription] delivers [Data] events in sequence order, then exactly
// one [End] event carrying the [ExitInfo], then io.EOF.
//
// # Logging
//
// The package logs lifecycle events (pids, exit statuses, truncation
// reasons) to [Options].Logger at debug level. It never logs commands,
// arguments, environments or output, and its error messages do not contain
// them either.
package proc
