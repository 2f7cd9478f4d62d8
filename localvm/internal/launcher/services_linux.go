package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/proto/localplatform"
)

// The platform's services for one sandbox's rayd (Options.Services: the
// metadata service and the S3-compatible store HOME persistence uses)
// are served on a Unix socket, localplatform.ServicesSocket, in a
// directory of its own under the sandbox's Dir. rayd gets a descriptor
// of that directory (-platform-dir-fd) and connects through it
// (/proc/self/fd/N/platform.sock), so the socket is reachable from the
// sandbox's namespaces without being anywhere in its file system, and a
// platform that restarts binds it again at the same place. Only rayd is
// served: a connection whose peer (SO_PEERCRED) is not the sandbox's
// init, which is rayd, gets 403, so the sandbox's code, even running as
// rayd's own uid (rootless), cannot use rayd's credentials.

// servicesDirName is the directory, in a sandbox's Dir, of the socket.
const servicesDirName = "services"

// fdPlatformDir names the services directory's descriptor among the
// init's extra descriptors.
const fdPlatformDir = "platform-dir"

// raydPlatformDirFlag is rayd's flag for it.
const raydPlatformDirFlag = "-platform-dir-fd"

// services is the server of one sandbox's socket.
type services struct {
	srv  *http.Server
	pid  atomic.Int64 // the init's (rayd's) pid; 0: nobody yet
	once sync.Once
	done chan struct{}
}

type peerPidKey struct{}

// serveServices serves the launcher's Options.Services for sandbox id on
// the socket under dir (the sandbox's Dir), replacing a socket a former
// platform left. It returns nil (and no error) when the launcher has no
// services. The caller sets the pid once the init runs, and closes it when
// the sandbox goes.
func (l *Launcher) serveServices(dir, id string) (*services, error) {
	if l.opts.Services == nil {
		return nil, nil
	}
	sd := filepath.Join(dir, servicesDirName)
	if err := os.Mkdir(sd, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("launcher: services directory: %w", err)
	}
	// Searchable by rayd (the sandbox's root is not the platform's uid):
	// nothing in it is listable, and the sandbox's Dir above is 0700.
	if err := os.Chmod(sd, 0o711); err != nil {
		return nil, fmt.Errorf("launcher: services directory: %w", err)
	}
	ln, err := listenIn(sd, localplatform.ServicesSocket)
	if err != nil {
		return nil, fmt.Errorf("launcher: services socket: %w", err)
	}
	s := &services{done: make(chan struct{})}
	h := l.opts.Services(id)
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pid, _ := r.Context().Value(peerPidKey{}).(int)
			if want := s.pid.Load(); want == 0 || int64(pid) != want {
				http.Error(w, "only the sandbox's rayd is served here", http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, peerPidKey{}, peerPid(c))
		},
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// peerPid is the pid of a Unix connection's peer as this process's pid
// namespace sees it, or -1.
func peerPid(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return -1
	}
	pid := -1
	_ = rc.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// openDir opens the services directory (O_PATH) for the init.
func (s *services) openDir(dir string) (int, error) {
	fd, err := unix.Open(filepath.Join(dir, servicesDirName), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("launcher: services directory: %w", err)
	}
	return fd, nil
}

// setPid admits the init's (rayd's) connections.
func (s *services) setPid(pid int) {
	if s != nil {
		s.pid.Store(int64(pid))
	}
}

// close stops serving. Idempotent; nil is fine.
func (s *services) close() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close()
		}
		<-s.done
	})
}

// servicesFor starts serving the platform's services for a sandbox being
// launched (inst.svc) and returns a descriptor of their directory for its
// init, or -1 when the launcher has none.
func (l *Launcher) servicesFor(inst *instance, spec Spec) (int, error) {
	svc, err := l.serveServices(spec.Dir, spec.ID)
	if err != nil || svc == nil {
		return -1, err
	}
	inst.svc = svc
	return svc.openDir(spec.Dir)
}

// listenIn binds a Unix socket name in dir, replacing one a former
// platform left, mode 0666 (connectable by rayd whatever its uid; the
// peer check admits it). It binds through a descriptor of dir
// (/proc/self/fd/N/name): a sandbox's directory under the state
// directory is too long a path for a socket address (108 bytes).
func listenIn(dir, name string) (net.Listener, error) {
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	_ = unix.Unlinkat(dfd, name, 0)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	addr := "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + name
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: addr}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Fchmodat(dfd, name, 0o666, 0); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.Listen(fd, 64); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "services")
	defer f.Close()
	return net.FileListener(f)
}
