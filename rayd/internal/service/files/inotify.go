package files

import (
	"errors"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawEvent is one decoded inotify event.
type rawEvent struct {
	wd     int32
	mask   uint32
	cookie uint32
	name   string
}

// inotify is one inotify instance read through an os.File so Go's poller
// waits for events and Close unblocks a pending read.
type inotify struct {
	fd   int
	file *os.File
	once sync.Once
}

func newInotify() (*inotify, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// The os.File name appears in its errors; it must not be a path.
	return &inotify{fd: fd, file: os.NewFile(uintptr(fd), "inotify")}, nil
}

// watchMask is what every watch asks for. IN_ONLYDIR refuses non-directories
// and IN_DONTFOLLOW refuses a symbolic link as the last component.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// remove drops a watch; errors (already gone) are ignored.
func (in *inotify) remove(wd int32) {
	_, _ = unix.InotifyRmWatch(in.fd, uint32(wd))
}

// Close closes the instance; it is safe to call more than once.
func (in *inotify) Close() error {
	var err error
	in.once.Do(func() { err = in.file.Close() })
	return err
}

// errClosed reports that the instance was closed.
var errClosed = errors.New("inotify closed")

// read blocks until events arrive and decodes them.
func (in *inotify) read(buf []byte) ([]rawEvent, error) {
	n, err := in.file.Read(buf)
	if err != nil {
		if errors.Is(err, os.ErrClosed) {
			return nil, errClosed
		}
		return nil, err
	}
	var out []rawEvent
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameLen := int(ev.Len)
		end := off + unix.SizeofInotifyEvent + nameLen
		if end > n {
			break
		}
		raw := buf[off+unix.SizeofInotifyEvent : end]
		for i, b := range raw {
			if b == 0 {
				raw = raw[:i]
				break
			}
		}
		out = append(out, rawEvent{wd: ev.Wd, mask: ev.Mask, cookie: ev.Cookie, name: string(raw)})
		off = end
	}
	return out, nil
}
