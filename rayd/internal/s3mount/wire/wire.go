// Package wire is the contract between rayd and its S3 mount helper
// (package mounts3), kept apart so that rayd's binary does not link the
// helper's FUSE library: the broker protocol on the socket pair, the exit
// codes that name a failure class, and the metadata service's variable.
//
// The broker protocol, on a SOCK_SEQPACKET socket pair (the helper's fd
// 4): the helper sends one message of one byte, Ask; rayd answers one
// message, OK with the connected descriptor (SCM_RIGHTS), or Fail
// without.
package wire

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The broker's messages.
const (
	Ask  = 'c'
	OK   = 'o'
	Fail = 'e'
)

// Exit codes of the helper that name a mount's failure class.
const (
	ExitFailed    = 1
	ExitUsage     = 2
	ExitNetwork   = 10
	ExitIAMDenied = 11
	ExitNotFound  = 12
)

// ClassOfExit maps a helper's exit code to a failure class of package
// proto/s3mount; AWS's mount-s3 exits 1 ("failed").
func ClassOfExit(code int) string {
	switch code {
	case ExitNetwork:
		return "network"
	case ExitIAMDenied:
		return "iam_denied"
	case ExitNotFound:
		return "not_found"
	}
	return "failed"
}

// IMDSEnv names the metadata service's base URL (the AWS SDKs' own
// variable); unset: AWS's.
const IMDSEnv = "AWS_EC2_METADATA_SERVICE_ENDPOINT"

// ErrBroker is a connection rayd could not make.
var ErrBroker = errors.New("s3mount: no connection from rayd")

// Broker is the helper's side: it asks rayd for connections, one at a
// time.
type Broker struct {
	mu sync.Mutex
	fd int
}

// NewBroker returns the broker on descriptor fd.
func NewBroker(fd int) *Broker {
	unix.CloseOnExec(fd)
	return &Broker{fd: fd}
}

// Dial returns a connection rayd made (to the platform's socket).
func (b *Broker) Dial(ctx context.Context) (net.Conn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := unix.Sendmsg(b.fd, []byte{Ask}, nil, nil, 0); err != nil {
		return nil, ErrBroker
	}
	return recvConn(b.fd)
}

// recvConn reads one answer from fd.
func recvConn(fd int) (net.Conn, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || n != 1 {
		return nil, ErrBroker
	}
	var fds []int
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, m := range msgs {
			if r, rerr := unix.ParseUnixRights(&m); rerr == nil {
				fds = append(fds, r...)
			}
		}
	}
	if buf[0] != OK || len(fds) != 1 {
		for _, f := range fds {
			unix.Close(f)
		}
		return nil, ErrBroker
	}
	f := os.NewFile(uintptr(fds[0]), "broker")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, ErrBroker
	}
	return c, nil
}

// Serve is rayd's side: it answers the requests on f (its end of the
// pair) with connections from dial until the helper closes its end or
// stop is closed.
func Serve(f *os.File, dial func(ctx context.Context) (net.Conn, error), stop <-chan struct{}) {
	defer f.Close()
	fd := int(f.Fd())
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		select {
		case <-stop:
			_ = unix.Shutdown(fd, unix.SHUT_RDWR)
		case <-quit:
		}
	}()
	buf := make([]byte, 1)
	for {
		n, _, _, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n != 1 || buf[0] != Ask {
			return
		}
		if err := answer(fd, dial); err != nil {
			return
		}
	}
}

// answer dials and sends the connection's descriptor (or Fail).
func answer(fd int, dial func(ctx context.Context) (net.Conn, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fail := func() error { return unix.Sendmsg(fd, []byte{Fail}, nil, nil, 0) }
	c, err := dial(ctx)
	if err != nil {
		return fail()
	}
	defer c.Close()
	sc, ok := c.(interface{ File() (*os.File, error) })
	if !ok {
		return fail()
	}
	cf, err := sc.File()
	if err != nil {
		return fail()
	}
	defer cf.Close()
	return unix.Sendmsg(fd, []byte{OK}, unix.UnixRights(int(cf.Fd())), nil, 0)
}
