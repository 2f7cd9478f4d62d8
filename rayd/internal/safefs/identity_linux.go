package safefs

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysSetgroups is the setgroups(2) system call taking 32-bit gid_t values.
var sysSetgroups uintptr = unix.SYS_SETGROUPS

// setgroupsThread sets the supplementary groups of the calling thread only.
// (syscall.Setgroups changes every thread of the process.)
func setgroupsThread(gids []uint32) error {
	var p unsafe.Pointer
	if len(gids) > 0 {
		p = unsafe.Pointer(&gids[0])
	}
	_, _, e := unix.RawSyscall(sysSetgroups, uintptr(len(gids)), uintptr(p), 0)
	runtime.KeepAlive(gids)
	if e != 0 {
		return e
	}
	return nil
}

// getgroupsThread returns the calling thread's supplementary groups.
func getgroupsThread() ([]uint32, error) {
	gids, err := unix.Getgroups()
	if err != nil {
		return nil, err
	}
	out := make([]uint32, len(gids))
	for i, g := range gids {
		out[i] = uint32(g)
	}
	return out, nil
}

// creds is a thread's file system identity.
type creds struct {
	fsuid, fsgid uint32
	groups       []uint32
}

func currentCreds() (creds, error) {
	uid, err := unix.SetfsuidRetUid(-1) // -1 is invalid: only reports
	if err != nil {
		return creds{}, err
	}
	gid, err := unix.SetfsgidRetGid(-1)
	if err != nil {
		return creds{}, err
	}
	groups, err := getgroupsThread()
	if err != nil {
		return creds{}, err
	}
	return creds{uint32(uid), uint32(gid), groups}, nil
}

// applyCreds sets the calling thread's identity and verifies it.
// setfsuid(2) and setfsgid(2) do not report failure, so the result is read
// back.
func applyCreds(c creds) error {
	if err := setgroupsThread(c.groups); err != nil {
		return err
	}
	if _, err := unix.SetfsgidRetGid(int(c.fsgid)); err != nil {
		return err
	}
	if _, err := unix.SetfsuidRetUid(int(c.fsuid)); err != nil {
		return err
	}
	got, err := currentCreds()
	if err != nil {
		return err
	}
	if got.fsuid != c.fsuid || got.fsgid != c.fsgid || len(got.groups) != len(c.groups) {
		return fmt.Errorf("credentials not applied")
	}
	return nil
}

// runAs runs fn with the user's file system identity when the FS is
// privileged, and directly otherwise.
//
// fn runs in a new goroutine locked to its OS thread: setfsuid, setfsgid and
// the raw setgroups are per-thread on Linux. The thread is unlocked only
// after rayd's credentials are restored and verified; if restoring fails the
// goroutine exits still locked, and the Go runtime then terminates the
// thread rather than returning it to the scheduler. A panic in fn is
// re-raised in the caller after the credentials are restored.
func (f *FS) runAs(u User, fn func() error) error {
	return f.runAsSudo(u, func(sudo) error { return fn() })
}

// sudo runs one step with rayd's own file system identity, from inside
// [FS.runAsSudo], and switches back to the user's before returning. If
// either switch fails it returns ErrIdentity and runs nothing more as
// rayd: the caller must stop on its error.
type sudo func(step func() error) error

// runAsSudo is [FS.runAs] whose fn may run single steps as rayd through
// the sudo it is given (the envd-style parent creation of [FS.mkdirFor]).
// Without privileges there is one identity and sudo runs the step as is.
func (f *FS) runAsSudo(u User, fn func(sudo) error) error {
	if !f.privileged {
		return fn(func(step func() error) error { return step() })
	}
	type result struct {
		err      error
		panicked bool
		pv       any
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		var res result
		defer func() { ch <- res }()
		orig, err := currentCreds()
		if err != nil {
			runtime.UnlockOSThread() // nothing was changed
			res.err = perr("identity", "identity", ErrIdentity)
			return
		}
		groups := u.Groups
		if groups == nil {
			groups = []uint32{}
		}
		mine := creds{u.UID, u.GID, groups}
		broken := false
		asRayd := func(step func() error) error {
			if broken {
				return perr("identity", "identity", ErrIdentity)
			}
			if err := applyCreds(orig); err != nil {
				broken = true
				return perr("identity", "identity", ErrIdentity)
			}
			serr := step()
			if err := applyCreds(mine); err != nil {
				broken = true
				return perr("identity", "identity", ErrIdentity)
			}
			return serr
		}
		if err := applyCreds(mine); err != nil {
			res.err = perr("identity", "identity", ErrIdentity)
		} else {
			func() {
				defer func() {
					if p := recover(); p != nil {
						res.panicked, res.pv = true, p
					}
				}()
				res.err = fn(asRayd)
			}()
		}
		if err := applyCreds(orig); err != nil {
			// Tainted thread: stay locked so it dies with this goroutine.
			if res.err == nil && !res.panicked {
				res.err = perr("identity", "identity", ErrIdentity)
			}
			return
		}
		runtime.UnlockOSThread()
	}()
	res := <-ch
	if res.panicked {
		panic(res.pv)
	}
	return res.err
}
