package proc

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// PTYConfig asks for a pseudo-terminal (see Spec.PTY). Zero fields take
// DefaultPTYCols and DefaultPTYRows.
type PTYConfig struct {
	Cols, Rows uint16
}

func (c *PTYConfig) size() (cols, rows uint16) {
	cols, rows = c.Cols, c.Rows
	if cols == 0 {
		cols = DefaultPTYCols
	}
	if rows == 0 {
		rows = DefaultPTYRows
	}
	return cols, rows
}

// Kind tells commands on pipes from commands on a PTY.
type Kind uint8

// Process kinds.
const (
	KindProcess Kind = iota + 1 // stdout and stderr pipes
	KindPTY                     // a pseudo-terminal (Spec.PTY)
)

func (k Kind) String() string {
	if k == KindPTY {
		return "pty"
	}
	return "process"
}

// Kind reports whether the process runs on a PTY.
func (p *Process) Kind() Kind {
	if p.spec.PTY != nil {
		return KindPTY
	}
	return KindProcess
}

// WriteInput writes all of b to the PTY master, as if typed: the terminal
// echoes it (unless the program turned echo off) and its line discipline
// applies (^C sends SIGINT to the foreground process group, and so on). It
// blocks while the terminal's input buffer is full, at most until ctx is
// done (it then returns ctx.Err(); part of b may have been written).
// Concurrent writes are serialised.
//
// Errors: ErrNotPTY without Spec.PTY, ErrProcessEnded once the process has
// ended, ErrStdinClosed when the terminal was already closed (its output
// is drained and nothing can read the input any more).
func (p *Process) WriteInput(ctx context.Context, b []byte) error {
	if p.master == nil {
		return ErrNotPTY
	}
	select {
	case p.stdinSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.stdinSem }()
	if err := p.ptyUsable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := writeCtx(ctx, p.master, b)
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return cerr
	}
	if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EIO) {
		if perr := p.ptyUsable(); perr != nil {
			return perr
		}
		return ErrStdinClosed
	}
	return err
}

// Resize sets the window size of the terminal; the kernel sends SIGWINCH
// to its foreground process group.
//
// Errors: ErrNotPTY without Spec.PTY, ErrInvalidSize for a zero cols or
// rows, ErrProcessEnded once the process has ended, ErrStdinClosed when
// the terminal was already closed.
func (p *Process) Resize(cols, rows uint16) error {
	if p.master == nil {
		return ErrNotPTY
	}
	if cols == 0 || rows == 0 {
		return ErrInvalidSize
	}
	if err := p.ptyUsable(); err != nil {
		return err
	}
	rc, err := p.master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	// Control holds a reference on the descriptor: the reader cannot
	// close it (and the number cannot be reused) during the ioctl.
	if err := rc.Control(func(fd uintptr) { ierr = setWinsize(fd, cols, rows) }); err != nil {
		if perr := p.ptyUsable(); perr != nil {
			return perr
		}
		return ErrStdinClosed
	}
	return ierr
}

// ptyUsable returns ErrProcessEnded once the process has ended.
func (p *Process) ptyUsable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return ErrProcessEnded
	}
	return nil
}
