package cgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Version is the cgroup layout of a machine.
type Version int

// The cgroup layouts.
const (
	None Version = iota // no usable hierarchy
	V1                  // cgroup v1: memory, pids and freezer hierarchies
	V2                  // cgroup v2: one unified hierarchy
)

// String is "v1", "v2" or "none".
func (v Version) String() string {
	switch v {
	case V1:
		return "v1"
	case V2:
		return "v2"
	}
	return "none"
}

// v1Controllers are the cgroup v1 hierarchies a sandbox gets a directory in.
var v1Controllers = []string{"memory", "pids", "freezer"}

// Layout is where the sandboxes' cgroup directories live on this machine:
// the hierarchies of its cgroup version and, under each, one parent
// directory holding a directory per sandbox.
type Layout struct {
	version Version
	// v2root is the cgroup2 mount point (v2 only).
	v2root string
	// v1 maps each controller of v1Controllers to its mount point (v1 only).
	v1 map[string]string
	// parent is the directory under each hierarchy that holds the
	// sandboxes' directories.
	parent string
	// setLimits is false only in tests that exercise a cgroup2 hierarchy
	// without controllers.
	setLimits bool
}

// mountEntry is one cgroup mount from /proc/self/mountinfo.
type mountEntry struct {
	point  string
	fstype string
	opts   []string // super options
}

// cgroupMounts lists this process's cgroup mounts.
func cgroupMounts() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo returns the cgroup and cgroup2 mounts of a
// /proc/<pid>/mountinfo; lines it cannot read are skipped.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf := strings.Fields(pre)
		qf := strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		if qf[0] != "cgroup" && qf[0] != "cgroup2" {
			continue
		}
		point := strings.ReplaceAll(pf[4], `\040`, " ")
		out = append(out, mountEntry{point: point, fstype: qf[0], opts: strings.Split(qf[2], ",")})
	}
	return out, sc.Err()
}

// ErrNoHierarchy is the error of Detect on a machine without a usable
// cgroup hierarchy.
var ErrNoHierarchy = errors.New("launcher: no usable cgroup hierarchy (need cgroup2 with memory and pids, or cgroup v1 memory, pids and freezer)")

// Detect picks the layout: cgroup v1 when the memory controller is
// mounted as a v1 hierarchy (hybrid or legacy machines), else cgroup v2
// when a cgroup2 mount offers memory and pids. parent is the directory
// under each hierarchy that holds the sandboxes' directories. The error
// wraps ErrNoHierarchy when there is none.
func Detect(parent string) (*Layout, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, fmt.Errorf("launcher: reading mounts: %w", err)
	}
	return pick(mounts, parent)
}

// pick is Detect on the given mounts.
func pick(mounts []mountEntry, parent string) (*Layout, error) {
	v1 := map[string]string{}
	var v2 []string
	for _, m := range mounts {
		switch m.fstype {
		case "cgroup":
			for _, c := range v1Controllers {
				if slices.Contains(m.opts, c) {
					if _, dup := v1[c]; !dup {
						v1[c] = m.point
					}
				}
			}
		case "cgroup2":
			v2 = append(v2, m.point)
		}
	}
	if _, ok := v1["memory"]; ok {
		for _, c := range v1Controllers {
			if _, ok := v1[c]; !ok {
				return nil, fmt.Errorf("%w: cgroup v1 memory hierarchy found but no %s hierarchy", ErrNoHierarchy, c)
			}
		}
		return &Layout{version: V1, v1: v1, parent: parent, setLimits: true}, nil
	}
	for _, p := range v2 {
		b, err := os.ReadFile(filepath.Join(p, "cgroup.controllers"))
		if err != nil {
			continue
		}
		ctrl := strings.Fields(string(b))
		if slices.Contains(ctrl, "memory") && slices.Contains(ctrl, "pids") {
			return &Layout{version: V2, v2root: p, parent: parent, setLimits: true}, nil
		}
	}
	return nil, ErrNoHierarchy
}

// UnifiedWithoutLimits returns a cgroup v2 layout on this machine's first
// cgroup2 mount that writes no limits: the controller-less unified
// hierarchy of a hybrid machine, on which tests exercise the v2 code path
// (CLONE_INTO_CGROUP, cgroup.kill, cgroup.freeze). The error wraps
// ErrNoHierarchy when there is no cgroup2 mount.
func UnifiedWithoutLimits(parent string) (*Layout, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, fmt.Errorf("launcher: reading mounts: %w", err)
	}
	for _, m := range mounts {
		if m.fstype == "cgroup2" {
			return &Layout{version: V2, v2root: m.point, parent: parent}, nil
		}
	}
	return nil, fmt.Errorf("%w: no cgroup2 mount", ErrNoHierarchy)
}

// Version is the layout's cgroup version.
func (c *Layout) Version() Version { return c.version }

// Roots returns the directories that hold the sandboxes' cgroups: one per
// hierarchy, <mount point>/<parent>.
func (c *Layout) Roots() []string {
	if c.version == V2 {
		return []string{filepath.Join(c.v2root, c.parent)}
	}
	out := make([]string, 0, len(v1Controllers))
	for _, ctrl := range v1Controllers {
		out = append(out, filepath.Join(c.v1[ctrl], c.parent))
	}
	return out
}

// Dirs returns the cgroup directories of sandbox id.
func (c *Layout) Dirs(id string) []string {
	roots := c.Roots()
	out := make([]string, len(roots))
	for i, r := range roots {
		out[i] = filepath.Join(r, id)
	}
	return out
}

// Owns reports whether dir is a directory of sandbox id in this layout
// (<root>/<id> for one of its roots), which its owner may remove.
func (c *Layout) Owns(dir, id string) bool {
	return slices.Contains(c.Dirs(id), filepath.Clean(dir))
}

// writeFile writes value to an existing cgroup file.
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// enableControllers enables the controllers of want in dir's children.
func enableControllers(dir string, want []string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	have := strings.Fields(string(b))
	var add []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			add = append(add, "+"+w)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return writeFile(filepath.Join(dir, "cgroup.subtree_control"), strings.Join(add, " "))
}

// Create makes the directories of sandbox id and writes its limits (see
// WriteLimits); nothing of them is left when it fails. For cgroup v2 it
// also returns an open descriptor of the directory for CLONE_INTO_CGROUP
// (-1 for v1); the caller closes it.
func (c *Layout) Create(id string, memBytes int64, pidsMax int) (dirs []string, cgfd int, err error) {
	cgfd = -1
	dirs = c.Dirs(id)
	var made []string
	defer func() {
		if err != nil {
			for _, d := range made {
				_ = unix.Rmdir(d)
			}
			dirs = nil
		}
	}()
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Dir(d), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, -1, fmt.Errorf("launcher: cgroup: %w", err)
		}
	}
	if c.version == V2 && c.setLimits {
		if err := enableControllers(c.v2root, []string{"memory", "pids"}); err != nil {
			return nil, -1, fmt.Errorf("launcher: cgroup: enabling memory and pids at the root: %w", err)
		}
		if err := enableControllers(filepath.Dir(dirs[0]), []string{"memory", "pids"}); err != nil {
			return nil, -1, fmt.Errorf("launcher: cgroup: enabling memory and pids: %w", err)
		}
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, -1, fmt.Errorf("launcher: cgroup: %w", err)
		}
		made = append(made, d)
	}
	if err := c.WriteLimits(id, memBytes, pidsMax); err != nil {
		return nil, -1, err
	}
	if c.version == V2 {
		fd, err := unix.Open(dirs[0], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, -1, fmt.Errorf("launcher: cgroup: %w", err)
		}
		cgfd = fd
	}
	return dirs, cgfd, nil
}

// WriteLimits writes sandbox id's memory and pids limits to its cgroup
// (no swap beyond the memory limit, where the kernel accounts swap).
func (c *Layout) WriteLimits(id string, memBytes int64, pidsMax int) error {
	if !c.setLimits {
		return nil
	}
	mem := strconv.FormatInt(memBytes, 10)
	pids := strconv.Itoa(pidsMax)
	switch c.version {
	case V2:
		dir := filepath.Join(c.v2root, c.parent, id)
		if err := writeFile(filepath.Join(dir, "memory.max"), mem); err != nil {
			return fmt.Errorf("launcher: cgroup: memory.max: %w", err)
		}
		if err := writeFile(filepath.Join(dir, "memory.swap.max"), "0"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("launcher: cgroup: memory.swap.max: %w", err)
		}
		if err := writeFile(filepath.Join(dir, "pids.max"), pids); err != nil {
			return fmt.Errorf("launcher: cgroup: pids.max: %w", err)
		}
	case V1:
		memDir := filepath.Join(c.v1["memory"], c.parent, id)
		if err := writeFile(filepath.Join(memDir, "memory.limit_in_bytes"), mem); err != nil {
			return fmt.Errorf("launcher: cgroup: memory.limit_in_bytes: %w", err)
		}
		if err := writeFile(filepath.Join(memDir, "memory.memsw.limit_in_bytes"), mem); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("launcher: cgroup: memory.memsw.limit_in_bytes: %w", err)
		}
		if err := writeFile(filepath.Join(c.v1["pids"], c.parent, id, "pids.max"), pids); err != nil {
			return fmt.Errorf("launcher: cgroup: pids.max: %w", err)
		}
	}
	return nil
}

// AddProc moves pid into every directory of dirs (cgroup v1; v2 uses
// CLONE_INTO_CGROUP).
func AddProc(dirs []string, pid int) error {
	for _, d := range dirs {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("launcher: cgroup: joining %s: %w", filepath.Base(filepath.Dir(filepath.Dir(d))), err)
		}
	}
	return nil
}

// Pids lists the processes of one cgroup directory.
func Pids(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}

// exists reports whether path exists (without following a last symlink).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// Kill kills every process in dirs (which may mix v1 and v2
// directories): cgroup.kill where the kernel has it, else the freezer
// (freeze, SIGKILL each member, thaw), else SIGKILL of each listed member.
// It returns once the cgroups are empty or the deadline passes.
func Kill(dirs []string, deadline time.Time) error {
	var live []string
	for _, d := range dirs {
		if exists(d) {
			live = append(live, d)
		}
	}
	if len(live) == 0 {
		return nil
	}
	var freezer string
	for _, d := range live {
		if exists(filepath.Join(d, "freezer.state")) {
			freezer = d
		}
	}
	for attempt := 0; ; attempt++ {
		empty := true
		for _, d := range live {
			if pids, err := Pids(d); err == nil && len(pids) > 0 {
				empty = false
			}
		}
		if empty {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("launcher: cgroup: processes survive SIGKILL")
		}
		if attempt%10 == 0 { // re-kill every ~200 ms, let exits progress in between
			for _, d := range live {
				if err := writeFile(filepath.Join(d, "cgroup.kill"), "1"); err == nil {
					continue
				}
				if d == freezer {
					freezeKill(d)
					continue
				}
				if pids, err := Pids(d); err == nil {
					for _, p := range pids {
						_ = unix.Kill(p, unix.SIGKILL)
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freezeKill freezes a v1 freezer cgroup so that nothing in it can fork,
// SIGKILLs every member and thaws it so that they die.
func freezeKill(dir string) {
	state := filepath.Join(dir, "freezer.state")
	if writeFile(state, "FROZEN") == nil {
		for end := time.Now().Add(time.Second); time.Now().Before(end); {
			b, err := os.ReadFile(state)
			if err != nil || strings.TrimSpace(string(b)) == "FROZEN" {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if pids, err := Pids(dir); err == nil {
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL)
		}
	}
	_ = writeFile(state, "THAWED")
}

// Remove removes dirs, retrying while they still have members,
// until the deadline. Missing directories are not an error.
func Remove(dirs []string, deadline time.Time) error {
	var errs []error
	for _, d := range dirs {
		for {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("launcher: cgroup: removing %s: %w", d, err))
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// List returns the sandbox ids that have a cgroup directory, with their
// directories: the directories under the roots whose name validID
// accepts (nil).
func (c *Layout) List(validID func(name string) error) map[string][]string {
	out := map[string][]string{}
	for _, r := range c.Roots() {
		ents, err := os.ReadDir(r)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() && validID(e.Name()) == nil {
				out[e.Name()] = append(out[e.Name()], filepath.Join(r, e.Name()))
			}
		}
	}
	return out
}

// freezeTimeout bounds a freeze or a thaw: the kernel reports FREEZING
// (v1) or frozen 0 (v2) until every task has stopped.
const freezeTimeout = 10 * time.Second

// FreezerOf returns the directory of dirs that freezes the sandbox and
// whether it is a cgroup v2 one (cgroup.freeze) rather than a v1 freezer
// hierarchy's (freezer.state); "" when none of them can.
func FreezerOf(dirs []string) (dir string, v2 bool) {
	for _, d := range dirs {
		if exists(filepath.Join(d, "freezer.state")) {
			return d, false
		}
	}
	for _, d := range dirs {
		if exists(filepath.Join(d, "cgroup.freeze")) {
			return d, true
		}
	}
	return "", false
}

// SetFrozen freezes or thaws the cgroup dir and waits until the kernel
// says it is done, the deadline passes or ctx ends.
func SetFrozen(ctx context.Context, dir string, v2, frozen bool) error {
	var file, value, want string
	switch {
	case v2 && frozen:
		file, value, want = "cgroup.freeze", "1", "frozen 1"
	case v2:
		file, value, want = "cgroup.freeze", "0", "frozen 0"
	case frozen:
		file, value, want = "freezer.state", "FROZEN", "FROZEN"
	default:
		file, value, want = "freezer.state", "THAWED", "THAWED"
	}
	if err := writeFile(filepath.Join(dir, file), value); err != nil {
		return fmt.Errorf("launcher: cgroup freezer: %w", err)
	}
	done := func() (bool, error) {
		if v2 {
			b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
			if err != nil {
				return false, err
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "frozen ") {
					return strings.TrimSpace(line) == want, nil
				}
			}
			return false, errors.New("cgroup.events has no frozen line")
		}
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return false, err
		}
		return strings.TrimSpace(string(b)) == want, nil
	}
	deadline := time.Now().Add(freezeTimeout)
	pause := time.Millisecond
	for i := 1; ; i++ {
		if !v2 && frozen && i > 1 {
			// A v1 freeze can stay FREEZING while the cgroup's processes
			// keep forking: write FROZEN again (each write freezes the tasks
			// there now) and, now and then, thaw for a moment (what runc
			// does too).
			if i%50 == 0 {
				_ = writeFile(filepath.Join(dir, file), "THAWED")
				time.Sleep(10 * time.Millisecond)
			}
			if err := writeFile(filepath.Join(dir, file), value); err != nil {
				return fmt.Errorf("launcher: cgroup freezer: %w", err)
			}
		}
		ok, err := done()
		if err != nil {
			return fmt.Errorf("launcher: cgroup freezer: %w", err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			what := "thawed"
			if frozen {
				what = "frozen"
			}
			return fmt.Errorf("launcher: cgroup freezer: not %s after %s", what, freezeTimeout)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("launcher: cgroup freezer: %w", ctx.Err())
		case <-t.C:
		}
		if v2 || !frozen {
			pause = min(2*pause, 20*time.Millisecond)
		}
	}
}

// Thaw thaws whatever of dirs is frozen, without waiting: killed
// tasks of a frozen v1 cgroup die only once it is thawed.
func Thaw(dirs []string) {
	for _, d := range dirs {
		if exists(filepath.Join(d, "freezer.state")) {
			_ = writeFile(filepath.Join(d, "freezer.state"), "THAWED")
		}
		if exists(filepath.Join(d, "cgroup.freeze")) {
			_ = writeFile(filepath.Join(d, "cgroup.freeze"), "0")
		}
	}
}

// MemoryEventsFile returns the file of dirs that counts the sandbox's OOM
// kills: memory.events (cgroup v2) or memory.oom_control (v1); "" if none.
func MemoryEventsFile(dirs []string) string {
	for _, d := range dirs {
		for _, name := range []string{"memory.oom_control", "memory.events"} {
			if p := filepath.Join(d, name); exists(p) {
				return p
			}
		}
	}
	return ""
}

// ParseOOMKill returns the oom_kill counter of the content of
// memory.events or memory.oom_control; false when it has none.
func ParseOOMKill(b []byte) (uint64, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
