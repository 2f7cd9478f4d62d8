//go:build !linux

package launcher

import (
	"context"
	"errors"
	"net"
)

// ErrUnsupported is returned by New on systems other than Linux.
var ErrUnsupported = errors.New("launcher: localvm sandboxes need Linux")

// Launcher starts and manages sandboxes (Linux only).
type Launcher struct{}

// New returns ErrUnsupported on systems other than Linux.
func New(opts Options) (*Launcher, error) { return nil, ErrUnsupported }

// Privileged reports false.
func (l *Launcher) Privileged() bool { return false }

// Launch returns ErrUnsupported.
func (l *Launcher) Launch(ctx context.Context, spec Spec) (Instance, error) {
	return nil, ErrUnsupported
}

// Adopt returns ErrUnsupported.
func (l *Launcher) Adopt(rec Record) (Instance, error) { return nil, ErrUnsupported }

// Cleanup returns ErrUnsupported.
func (l *Launcher) Cleanup(rec Record) error { return ErrUnsupported }

// Sweep returns ErrUnsupported.
func (l *Launcher) Sweep(keep []Record) error { return ErrUnsupported }

// Release does nothing.
func (l *Launcher) Release() error { return nil }

// Idle reports true.
func (l *Launcher) Idle() bool { return true }

// Isolation reports IsolationNone.
func (l *Launcher) Isolation() Isolation { return IsolationNone }

// Check returns ErrUnsupported.
func (l *Launcher) Check(spec Spec) error { return ErrUnsupported }

// DialContext dials with a net.Dialer.
func (l *Launcher) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// SuspendSupport returns ErrUnsupported.
func (l *Launcher) SuspendSupport() error { return ErrUnsupported }

// PoolSupport returns ErrUnsupported.
func (l *Launcher) PoolSupport() error { return ErrUnsupported }

// CheckBinary returns ErrUnsupported.
func CheckBinary(path string) error { return ErrUnsupported }
