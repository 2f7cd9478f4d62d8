// Package oomcount reads the kernel's count of OOM kills, so that rayd can
// tell a process the OOM killer ended from one killed by some other
// SIGKILL.
//
// Three files carry the count, each on a line "oom_kill N": a cgroup v2
// memory.events, a cgroup v1 memory.oom_control (Linux 4.13 and later)
// and /proc/vmstat. The kernel raises the count before it sends the
// victim SIGKILL, so a count read after the victim was reaped already
// includes its kill.
//
// The cgroup files count the kills of one sandbox; the local platform opens
// its sandbox's file and hands rayd the descriptor (rayd's mount namespace
// has no cgroup file system). /proc/vmstat counts the whole kernel's kills,
// which are the sandbox's only on a microVM.
package oomcount

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// VMStat is the kernel-wide counter file.
const VMStat = "/proc/vmstat"

// maxFile bounds what Read reads of the file (/proc/vmstat is about 6 KiB,
// the cgroup files a few lines).
const maxFile = 64 << 10

// errNoCount is returned when the file has no well-formed oom_kill line.
var errNoCount = errors.New("oomcount: no oom_kill count in the file")

// Parse returns the value of the "oom_kill N" line of a memory.events,
// memory.oom_control or /proc/vmstat text, and false when there is no
// such line or its value is not a decimal count. Other lines
// (oom_kill_disable, oom_group_kill, ...) are ignored.
func Parse(b []byte) (uint64, bool) {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		rest, ok := bytes.CutPrefix(line, []byte("oom_kill "))
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 10, 64)
		if err != nil {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// Counter reads one counter file, from offset 0 on every Read. It is safe
// for concurrent use.
type Counter struct {
	mu  sync.Mutex
	f   *os.File
	buf []byte
}

// Open opens a counter file by path (VMStat) and checks that it holds a
// count.
func Open(path string) (*Counter, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return newCounter(f)
}

// FromFD takes over descriptor fd, an open cgroup memory.events or
// memory.oom_control file, and checks that it holds a count. The
// descriptor is made close-on-exec; Close closes it.
func FromFD(fd int) (*Counter, error) {
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "memory-events")
	if f == nil {
		return nil, fmt.Errorf("descriptor %d is not valid", fd)
	}
	return newCounter(f)
}

func newCounter(f *os.File) (*Counter, error) {
	c := &Counter{f: f, buf: make([]byte, 4096)}
	if _, err := c.read(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return c, nil
}

// Read returns the current count, and false when the file cannot be read
// or holds no count.
func (c *Counter) Read() (uint64, bool) {
	n, err := c.read()
	return n, err == nil
}

func (c *Counter) read() (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for {
		if n == len(c.buf) {
			if len(c.buf) >= maxFile {
				return 0, errNoCount
			}
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		m, err := c.f.ReadAt(c.buf[n:], int64(n))
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	v, ok := Parse(c.buf[:n])
	if !ok {
		return 0, errNoCount
	}
	return v, nil
}

// Close closes the file.
func (c *Counter) Close() error { return c.f.Close() }
