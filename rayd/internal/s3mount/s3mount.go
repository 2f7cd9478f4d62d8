// Package s3mount serves rayd's s3_mounts section: it checks the mounts
// (package proto/s3mount and the allow-list RAYITO_ALLOWED_MOUNT_BUCKETS),
// walks each mount path without following symbolic links, opens /dev/fuse
// and mounts it there itself (rayd holds CAP_SYS_ADMIN in the guest), and
// starts one mount helper per mount to serve it: AWS's mount-s3 on AWS,
// rayito-mount-s3 (package mounts3) on the local platform.
//
// The helper runs as uid/gid 990, no capabilities, no_new_privs, in its
// own process group, killed with rayd (parent-death signal) and on every
// unmount. Its command line holds the bucket, the prefix, the flags, the
// owner's uid/gid, the region and the S3 endpoint; its environment only
// the metadata service's address on the local platform. Never a
// credential: the helper takes the execution role's from the metadata
// service, as on AWS. On the local platform rayd dials each of the
// helper's connections to the platform's socket (which serves rayd alone)
// and hands it over a socket pair (the broker, package mounts3).
//
// Each mount is pending until the mount answers (a stat through it) and
// then mounted, or failed with a class (proto/s3mount) when the helper
// exits first (its exit code names the class) or the timeout passes. A
// failure of one mount takes the whole section down: nothing half-done.
// Nothing here logs a bucket, a prefix or a path.
package s3mount

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
	"github.com/rayito-dev/rayito/rayd/internal/s3mount/wire"
)

// HelperUID is the uid and gid mount helpers run as.
const HelperUID = 990

// DefaultHelper is Rayito's own mount helper (package mounts3): in the
// image (image/Dockerfile.in installs it beside rayd) and on the local
// platform (its binary, bound there). AWS's mount-s3 ≥ 1.10 takes the
// same command line: `-mount-helper /usr/bin/mount-s3`.
const DefaultHelper = "/usr/local/bin/rayito-mount-s3"

// DefaultTimeout bounds a mount from start to answering.
const DefaultTimeout = 15 * time.Second

// Options configure the Manager.
type Options struct {
	// Helper is the mount helper's path; "" is DefaultHelper. Argv0, when
	// set, is its argv[0] (a multi-call binary).
	Helper string
	Argv0  string
	// Allow returns the allow-list; nil allows nothing.
	Allow func() ps3.AllowList
	// Dial, when set, makes the helper's connections (the local
	// platform's socket): the helper gets the broker and the local
	// endpoints below.
	Dial func(ctx context.Context) (net.Conn, error)
	// Endpoint is S3's base URL for the helper ("" = AWS's); IMDS the
	// metadata service's ("" = AWS's); Region the region ("" = the
	// metadata service's).
	Endpoint, IMDS, Region string
	// OwnerUID and OwnerGID own the mounted files (the sandbox's user).
	OwnerUID, OwnerGID int
	// HelperUID runs the helper; 0 means HelperUID (990).
	HelperUID int
	// Timeout bounds each mount; 0 is DefaultTimeout.
	Timeout time.Duration
	// Root is where paths are walked from; "" is "/" (tests).
	Root string
	// FUSEDevice is "/dev/fuse" unless set (tests).
	FUSEDevice string
	// Stderr receives the helpers' standard error (fixed messages, never
	// a bucket or a credential); nil discards it.
	Stderr io.Writer
	Logger *slog.Logger

	legacyMount bool // tests: mount(2) as on kernels without the new mount API
}

// State is a mount's state.
type State int

// The states of a mount.
const (
	Pending State = iota
	Mounted
	Failed
)

// Result is the section's state: Failed with the first failure's class
// and mount index, Mounted when every mount answers, else Pending.
type Result struct {
	State State
	Class string
	Index int
}

// Manager holds the section's mounts.
type Manager struct {
	o   Options
	log *slog.Logger

	mu     sync.Mutex
	mounts []*mount
	res    Result // of a section that failed before its mounts started
}

// mount is one mount's process and state.
type mount struct {
	idx   int
	pt    *point
	cmd   *exec.Cmd
	stop  chan struct{}
	done  chan struct{} // closed when the helper has exited
	ready <-chan error  // the probe's outcome (probe)
	mu    sync.Mutex
	state State
	class string
}

// New returns a Manager with no mounts.
func New(o Options) *Manager {
	if o.Helper == "" {
		o.Helper = DefaultHelper
	}
	if o.HelperUID == 0 {
		o.HelperUID = HelperUID
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Root == "" {
		o.Root = "/"
	}
	if o.FUSEDevice == "" {
		o.FUSEDevice = "/dev/fuse"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{o: o, log: o.Logger, res: Result{State: Mounted}}
}

// Supported reports whether mounts can be served here: the helper and
// /dev/fuse exist (Health's features.s3_mounts).
func (m *Manager) Supported() bool {
	st, err := os.Stat(m.o.Helper)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return false
	}
	_, err = os.Stat(m.o.FUSEDevice)
	return err == nil
}

// Error is a section that fails at once, with its class.
type Error struct {
	Class string
	Index int
	Err   error
}

func (e *Error) Error() string {
	if e.Index < 0 {
		return "s3 mounts: " + e.Class
	}
	return "mounts[" + strconv.Itoa(e.Index) + "]: " + e.Class
}

func (e *Error) Unwrap() error { return e.Err }

// Apply replaces the section: the mounts in force are unmounted, then
// mounts are checked and started. An invalid section (an *ps3.Error
// matching ps3.ErrInvalid) changes nothing; any other error (an *Error)
// leaves no mount. Otherwise the mounts are pending: Status follows them.
func (m *Manager) Apply(ctx context.Context, mounts []ps3.Mount) error {
	if err := ps3.Validate(mounts); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unmountLocked()
	m.res = Result{State: Mounted}
	fail := func(class string, idx int, err error) error {
		m.unmountLocked()
		m.res = Result{State: Failed, Class: class, Index: idx}
		return &Error{Class: class, Index: idx, Err: err}
	}
	var allow ps3.AllowList
	if m.o.Allow != nil {
		allow = m.o.Allow()
	}
	if err := ps3.Check(mounts, allow); err != nil {
		var e *ps3.Error
		errors.As(err, &e)
		return fail(ps3.ClassNotAllowed, e.Index, err)
	}
	if len(mounts) > 0 && !m.Supported() {
		return fail(ps3.ClassHelperMissing, -1, nil)
	}
	for i, spec := range mounts {
		pt, err := walk(m.o.Root, spec.Path, m.o.OwnerUID, m.o.OwnerGID)
		if err != nil {
			return fail(ps3.ClassInvalidPath, i, err)
		}
		mt := &mount{idx: i, pt: pt, stop: make(chan struct{}), done: make(chan struct{})}
		m.mounts = append(m.mounts, mt)
		if err := m.start(mt, spec); err != nil {
			return fail(ps3.ClassFailed, i, err)
		}
	}
	for _, mt := range m.mounts {
		mt.ready = probe(mt.pt)
		go m.watch(mt)
	}
	m.log.Info("s3 mounts starting", "count", len(mounts))
	return nil
}

// start mounts /dev/fuse at the mount point and starts the helper.
func (m *Manager) start(mt *mount, spec ps3.Mount) error {
	fuse, err := unix.Open(m.o.FUSEDevice, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	fuseFile := os.NewFile(uintptr(fuse), "fuse")
	defer fuseFile.Close() // the helper holds it from now on
	if err := m.mountFUSE(mt.pt, fuse, spec.ReadOnly); err != nil {
		return err
	}
	files := []*os.File{fuseFile}
	var brokerRayd *os.File
	if m.o.Dial != nil {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		brokerRayd = os.NewFile(uintptr(pair[0]), "broker")
		helperEnd := os.NewFile(uintptr(pair[1]), "broker-helper")
		defer helperEnd.Close()
		files = append(files, helperEnd)
	}
	cmd := &exec.Cmd{
		Path:       m.o.Helper,
		Args:       append([]string{m.argv0()}, HelperArgs(spec, m.o, m.o.Dial != nil)...),
		Env:        m.helperEnv(),
		Dir:        "/",
		ExtraFiles: files,
		Stderr:     m.o.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: uint32(m.o.HelperUID), Gid: uint32(m.o.HelperUID), Groups: []uint32{}},
			Setpgid:    true,
			Pdeathsig:  unix.SIGKILL,
		},
	}
	if err := startNoNewPrivs(cmd); err != nil {
		if brokerRayd != nil {
			brokerRayd.Close()
		}
		return err
	}
	mt.cmd = cmd
	if brokerRayd != nil {
		go wire.Serve(brokerRayd, m.o.Dial, mt.done)
	}
	go func() {
		_ = cmd.Wait()
		close(mt.done)
	}()
	return nil
}

func (m *Manager) argv0() string {
	if m.o.Argv0 != "" {
		return m.o.Argv0
	}
	return m.o.Helper
}

// HelperArgs is the helper's command line after argv[0]: mount-s3's flags,
// the bucket and the FUSE descriptor (always fd 3). Never a credential.
func HelperArgs(spec ps3.Mount, o Options, broker bool) []string {
	args := []string{"--foreground"}
	if spec.ReadOnly {
		args = append(args, "--read-only")
	}
	if spec.AllowOverwrite {
		args = append(args, "--allow-overwrite")
	}
	if spec.AllowDelete {
		args = append(args, "--allow-delete")
	}
	if spec.Prefix != "" {
		args = append(args, "--prefix", spec.Prefix)
	}
	args = append(args, "--uid", strconv.Itoa(o.OwnerUID), "--gid", strconv.Itoa(o.OwnerGID))
	if o.Region != "" {
		args = append(args, "--region", o.Region)
	}
	if o.Endpoint != "" {
		args = append(args, "--endpoint-url", o.Endpoint, "--force-path-style")
	}
	if broker {
		args = append(args, "--rayito-broker-fd", "4")
	}
	return append(args, spec.Bucket, "/dev/fd/3")
}

// helperEnv is the helper's whole environment: nothing secret.
func (m *Manager) helperEnv() []string {
	env := []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	if m.o.IMDS != "" {
		env = append(env, wire.IMDSEnv+"="+m.o.IMDS)
	}
	return env
}

// startNoNewPrivs starts cmd from a thread with no_new_privs set (the
// child inherits it). The thread lives as long as rayd, one for every
// helper: a child's parent-death signal follows the thread that
// started it, not the process.
func startNoNewPrivs(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnc = make(chan spawnReq)
		go spawner()
	})
	errc := make(chan error, 1)
	spawnc <- spawnReq{cmd, errc}
	return <-errc
}

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan<- error
}

var (
	spawnOnce sync.Once
	spawnc    chan spawnReq
)

func spawner() {
	runtime.LockOSThread() // never unlocked: the thread keeps no_new_privs
	err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	for r := range spawnc {
		if err != nil {
			r.errc <- err
			continue
		}
		r.errc <- r.cmd.Start()
	}
}

// probe stats the mount's root: the stat blocks until the helper
// answers (nil) or the connection ends.
func probe(pt *point) <-chan error {
	ready := make(chan error, 1)
	fd, base, flags := pt.parent, pt.base, unix.AT_SYMLINK_NOFOLLOW
	if pt.mnt >= 0 {
		fd, base, flags = pt.mnt, "", unix.AT_EMPTY_PATH
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		ready <- err
		return ready
	}
	go func() {
		defer unix.Close(dup)
		var st unix.Stat_t
		ready <- unix.Fstatat(dup, base, &st, flags)
	}()
	return ready
}

// watch waits for mt to answer (mounted), its helper to exit or the
// timeout (failed); a failure takes the section down.
func (m *Manager) watch(mt *mount) {
	ready := mt.ready
	t := time.NewTimer(m.o.Timeout)
	defer t.Stop()
	var class string
	select {
	case err := <-ready:
		if err == nil {
			mt.set(Mounted, "")
			select {
			case <-mt.done:
				class = wire.ClassOfExit(mt.cmd.ProcessState.ExitCode())
			case <-mt.stop:
				return
			}
		} else {
			// The connection ended (the helper is going) or the stat
			// failed: the helper's exit names the class.
			select {
			case <-mt.done:
				class = wire.ClassOfExit(mt.cmd.ProcessState.ExitCode())
			case <-t.C:
				class = ps3.ClassTimeout
			case <-mt.stop:
				return
			}
		}
	case <-mt.done:
		class = wire.ClassOfExit(mt.cmd.ProcessState.ExitCode())
	case <-t.C:
		class = ps3.ClassTimeout
	case <-mt.stop:
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-mt.stop: // unmounted meanwhile
		return
	default:
	}
	mt.set(Failed, class)
	exit := -1
	if isDone(mt.done) {
		exit = mt.cmd.ProcessState.ExitCode()
	}
	m.log.Warn("s3 mount failed", "index", mt.idx, "class", class, "helper_exit", exit)
	m.unmountLocked()
	m.res = Result{State: Failed, Class: class, Index: mt.idx}
}

func (mt *mount) set(s State, class string) {
	mt.mu.Lock()
	mt.state, mt.class = s, class
	mt.mu.Unlock()
}

// Status is the section's state.
func (m *Manager) Status() Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.mounts) == 0 {
		return m.res
	}
	r := Result{State: Mounted}
	for _, mt := range m.mounts {
		mt.mu.Lock()
		s, c := mt.state, mt.class
		mt.mu.Unlock()
		switch {
		case s == Failed:
			return Result{State: Failed, Class: c, Index: mt.idx}
		case s == Pending:
			r.State = Pending
		}
	}
	return r
}

// Close unmounts every mount and stops the helpers (terminate, a
// replaced section).
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unmountLocked()
}

// unmountLocked detaches each mount (lazily: files still open keep
// working until closed... and fail once the helper is gone) and kills its
// helper's process group.
func (m *Manager) unmountLocked() {
	for _, mt := range m.mounts {
		close(mt.stop)
		if mt.cmd != nil && mt.cmd.Process != nil {
			_ = unix.Kill(-mt.cmd.Process.Pid, unix.SIGKILL)
		}
		if mt.pt != nil {
			detach(mt.pt)
			mt.pt.close()
		}
	}
	m.mounts = nil
}

// detach unmounts what is mounted at pt (MNT_DETACH): through the
// mount's own descriptor (the new mount API), else through its parent's
// descriptor (a mount point cannot be renamed, so the name in the parent
// is still the mount).
func detach(pt *point) {
	if pt.mnt >= 0 {
		_ = unix.Unmount("/proc/self/fd/"+strconv.Itoa(pt.mnt), unix.MNT_DETACH)
		return
	}
	fd, err := unix.Openat2(pt.parent, pt.base, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	})
	if err != nil {
		return
	}
	defer unix.Close(fd)
	// The mount ids from /proc (a stat would ask the helper, which may
	// be gone or stuck).
	if a, b := mountID(fd), mountID(pt.dir); a == "" || a == b {
		return // nothing mounted there (any more)
	}
	_ = unix.Unmount("/proc/self/fd/"+strconv.Itoa(fd), unix.MNT_DETACH)
}

// mountID is the mnt_id of descriptor fd, "" when unknown.
func mountID(fd int) string {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "mnt_id:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
