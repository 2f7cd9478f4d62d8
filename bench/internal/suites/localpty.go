package suites

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	"github.com/rayito-dev/rayito/bench/internal/pin"
)

// localPty is the PTY floor: cat on a terminal the harness opened from
// /dev/ptmx.
type localPty struct {
	master *os.File
	cmd    *exec.Cmd
	buf    []byte
}

func startLocalPty(p *pin.Pinner) (*localPty, error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("pty number: %w", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, err
	}
	cmd := exec.Command("cat")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err = p.Start(cmd)
	s.Close()
	if err != nil {
		m.Close()
		return nil, err
	}
	return &localPty{master: m, cmd: cmd, buf: make([]byte, 4096)}, nil
}

// roundTrip writes one byte and waits until the terminal echoes it.
func (p *localPty) roundTrip() (float64, error) {
	if err := p.master.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return 0, err
	}
	t := time.Now()
	if _, err := p.master.Write([]byte{'x'}); err != nil {
		return 0, err
	}
	n, err := p.master.Read(p.buf)
	d := harness.Ms(time.Since(t))
	if err == nil && !bytes.Contains(p.buf[:n], []byte{'x'}) {
		err = fmt.Errorf("echo %q", p.buf[:n])
	}
	return d, err
}

func (p *localPty) close() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.master.Close()
}
