package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Fork and snapshots copy files, never memory: the source's HomeDir goes
// as a tar archive (made by tar in the sandbox, as its user, streamed
// through the process API) into the new sandbox's HomeDir. Running
// processes, memory, /tmp and everything outside HomeDir are not copied.

// HomeDir is the directory a fork or a snapshot copies: the sandbox
// user's home.
const HomeDir = "/home/user"

// sandboxUser is the account tar runs as, in the source and in the copy.
const sandboxUser = "user"

// DefaultMaxCopyBytes is the default cap of one copy (Options.MaxCopyBytes):
// the tar archive of HomeDir a fork or a snapshot makes.
const DefaultMaxCopyBytes = 1 << 30

// copyTimeout bounds one copy (archive and extraction), on top of the
// creation of the sandbox it goes into.
const copyTimeout = 10 * time.Minute

// stdinChunk is the most one SendStdin carries.
const stdinChunk = 64 << 10

// stderrKeep is how much of tar's stderr an error quotes.
const stderrKeep = 512

// httpError is an error that says its own HTTP status and message.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

// errorStatus is the status and message of err about sandbox id: its own
// for an *httpError, else statusOf's.
func errorStatus(id string, err error) (int, string) {
	var he *httpError
	if errors.As(err, &he) {
		return he.code, he.msg
	}
	return statusOf(id, err)
}

// tooLarge is the error of a copy past its cap.
func tooLarge(max int64) error {
	return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the files under %s are larger than the %s a fork or snapshot copies", HomeDir, sizeStr(max))}
}

func sizeStr(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// limitWriter passes at most max bytes to w, then fails with err (nil:
// tooLarge).
type limitWriter struct {
	w      io.Writer
	n, max int64
	err    error
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n+int64(len(p)) > l.max {
		if l.err != nil {
			return 0, l.err
		}
		return 0, tooLarge(l.max)
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}

// fanout writes each piece to every destination that has not failed, in
// parallel: one archive of the source feeds every fork, so that they all
// get the same files. It fails only when every destination has.
type fanout struct {
	dsts []*forkDst
}

type forkDst struct {
	w   io.WriteCloser
	err error
}

func (f *fanout) Write(p []byte) (int, error) {
	var wg sync.WaitGroup
	for _, d := range f.dsts {
		if d.err != nil {
			continue
		}
		wg.Go(func() {
			if _, err := d.w.Write(p); err != nil {
				d.err = err
			}
		})
	}
	wg.Wait()
	for _, d := range f.dsts {
		if d.err == nil {
			return len(p), nil
		}
	}
	return 0, errors.New("every copy failed")
}

// tailBuffer keeps the first stderrKeep bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) add(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := stderrKeep - len(t.buf); room > 0 {
		t.buf = append(t.buf, p[:min(room, len(p))]...)
	}
}

// line is the first line of what was kept, for an error message (it goes
// back to the caller, never to the log).
func (t *tailBuffer) line() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, _, _ := strings.Cut(strings.TrimSpace(string(t.buf)), "\n")
	return strings.ToValidUTF8(l, "?")
}

// tarFailed is the error of a tar in a sandbox that did not succeed.
func tarFailed(where string, res *rayito.CommandResult, stderr *tailBuffer) error {
	if res == nil {
		return &httpError{http.StatusInternalServerError, "tar in the " + where + " sandbox failed"}
	}
	if res.Status == rayito.StatusExited && res.ExitCode == 127 {
		return &httpError{http.StatusInternalServerError, "the " + where + " sandbox has no tar: fork and snapshots need tar in the sandbox's image"}
	}
	msg := fmt.Sprintf("tar in the %s sandbox ended with status %s, exit code %d", where, res.Status, res.ExitCode)
	if l := stderr.line(); l != "" {
		msg += ": " + l
	}
	return &httpError{http.StatusInternalServerError, msg}
}

// killSoon kills the process of h, whatever ctx says.
func killSoon(ctx context.Context, h *rayito.CommandHandle) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = h.Kill(kctx)
}

func (r rayitoSandbox) TarHome(ctx context.Context, w io.Writer, flat bool) error {
	var (
		mu     sync.Mutex
		werr   error
		failed = make(chan struct{})
		stderr tailBuffer
	)
	onOut := func(p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if werr != nil {
			return
		}
		if _, err := w.Write(p); err != nil {
			werr = err
			close(failed)
		}
	}
	// WithMaxOutputBytes(0): nothing is kept in the result, every piece
	// goes to onOut. The follower reads the next piece only once onOut
	// returns, so a slow destination slows tar (rayd pauses a lone slow
	// reader's process instead of dropping its output).
	argv := []string{"tar", "-C", HomeDir, "-cf", "-", "."}
	if flat {
		argv = []string{"tar", "-C", HomeDir, "--hard-dereference", "--ignore-failed-read", "-cf", "-", "."}
	}
	h, err := r.s.Commands.StartExec(ctx, argv,
		rayito.WithUser(sandboxUser), rayito.WithMaxOutputBytes(0), rayito.OnStdout(onOut), rayito.OnStderr(stderr.add))
	if err != nil {
		return err
	}
	waited := make(chan struct{})
	defer close(waited)
	go func() {
		select {
		case <-failed:
			killSoon(ctx, h)
		case <-waited:
		}
	}()
	_, err = h.Wait(ctx)
	if ctx.Err() != nil {
		killSoon(ctx, h)
		return ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	if werr != nil {
		return werr
	}
	var exit *rayito.CommandExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		// GNU tar's 1: a file changed while it was read; the archive is
		// whole.
		if exit.Result.Status == rayito.StatusExited && exit.Result.ExitCode == 1 {
			return nil
		}
		return tarFailed("source", exit.Result, &stderr)
	}
	return err
}

func (r rayitoSandbox) UntarHome(ctx context.Context) (io.WriteCloser, error) {
	u := &untar{ctx: ctx}
	// -p keeps the archive's permission bits (not masked by the umask).
	h, err := r.s.Commands.StartExec(ctx, []string{"tar", "-C", HomeDir, "-xpf", "-"},
		rayito.WithStdin(), rayito.WithUser(sandboxUser), rayito.WithMaxOutputBytes(0), rayito.OnStderr(u.stderr.add))
	if err != nil {
		return nil, err
	}
	u.h = h
	return u, nil
}

// untar is the stdin of a tar -x in a sandbox. GNU tar may end as soon
// as it has read the archive's end marker, before the padding after it:
// stdin then fails, and tar's own status says whether all is well.
type untar struct {
	ctx    context.Context
	h      *rayito.CommandHandle
	stderr tailBuffer
	ended  bool // tar ended well: the rest is padding
}

func (u *untar) Write(p []byte) (int, error) {
	if u.ended {
		return len(p), nil
	}
	n := 0
	for len(p) > 0 {
		c := p[:min(len(p), stdinChunk)]
		if err := u.h.SendStdin(u.ctx, c); err != nil {
			if done, werr := u.wait(5 * time.Second); done {
				if werr != nil {
					return n, werr
				}
				u.ended = true
				return n + len(p), nil
			}
			return n, err
		}
		n += len(c)
		p = p[len(c):]
	}
	return n, nil
}

// wait waits up to d for tar's end: done says it ended, and err is its
// failure.
func (u *untar) wait(d time.Duration) (done bool, err error) {
	ctx, cancel := context.WithTimeout(u.ctx, d)
	defer cancel()
	_, err = u.h.Wait(ctx)
	if ctx.Err() != nil {
		return false, nil
	}
	var exit *rayito.CommandExitError
	if errors.As(err, &exit) {
		return true, tarFailed("new", exit.Result, &u.stderr)
	}
	return true, err
}

func (u *untar) Close() error {
	if !u.ended {
		if err := u.h.CloseStdin(u.ctx); err != nil {
			if done, werr := u.wait(5 * time.Second); done {
				return werr
			}
			return err
		}
	}
	_, err := u.h.Wait(u.ctx)
	var exit *rayito.CommandExitError
	if errors.As(err, &exit) {
		return tarFailed("new", exit.Result, &u.stderr)
	}
	return err
}
