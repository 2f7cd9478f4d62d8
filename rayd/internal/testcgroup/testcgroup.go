// Package testcgroup makes throwaway memory cgroups for rayd's root-only
// tests (cgroup v1 memory hierarchy or cgroup2 with the memory
// controller), and holds the memory hog those tests put in them. Only
// tests import it.
package testcgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Memory is a memory cgroup that lives as long as the test.
type Memory struct {
	Dir string
	// Events holds the cgroup's "oom_kill N" line: memory.oom_control
	// (v1) or memory.events (v2).
	Events string
	// Procs is cgroup.procs: writing a pid there moves the process in.
	Procs string
}

// NewMemory creates a memory cgroup limited to limit bytes, without swap,
// and removes it when the test ends (its processes must be gone by then).
// It skips the test when not root or without a memory cgroup.
func NewMemory(t testing.TB, limit int64) *Memory {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a memory cgroup")
	}
	v1, v2 := memoryMounts(t)
	name := fmt.Sprintf("rayd-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	mem := strconv.FormatInt(limit, 10)
	var m Memory
	switch {
	case v1 != "":
		m.Dir = filepath.Join(v1, name)
		mkdir(t, m.Dir)
		write(t, filepath.Join(m.Dir, "memory.limit_in_bytes"), mem, false)
		write(t, filepath.Join(m.Dir, "memory.memsw.limit_in_bytes"), mem, true)
		m.Events = filepath.Join(m.Dir, "memory.oom_control")
	case v2 != "":
		ctl := filepath.Join(v2, "cgroup.subtree_control")
		if b, err := os.ReadFile(ctl); err != nil || !slices.Contains(strings.Fields(string(b)), "memory") {
			write(t, ctl, "+memory", false)
		}
		m.Dir = filepath.Join(v2, name)
		mkdir(t, m.Dir)
		write(t, filepath.Join(m.Dir, "memory.max"), mem, false)
		write(t, filepath.Join(m.Dir, "memory.swap.max"), "0", true)
		m.Events = filepath.Join(m.Dir, "memory.events")
	default:
		t.Skip("no memory cgroup: neither a cgroup v1 memory hierarchy nor cgroup2 with the memory controller")
	}
	m.Procs = filepath.Join(m.Dir, "cgroup.procs")
	return &m
}

// memoryMounts finds the cgroup v1 memory hierarchy and a cgroup2 mount
// offering the memory controller.
func memoryMounts(t testing.TB) (v1, v2 string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("no mountinfo: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if !ok || len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch qf[0] {
		case "cgroup":
			if v1 == "" && slices.Contains(strings.Split(qf[2], ","), "memory") {
				v1 = pf[4]
			}
		case "cgroup2":
			b, err := os.ReadFile(filepath.Join(pf[4], "cgroup.controllers"))
			if v2 == "" && err == nil && slices.Contains(strings.Fields(string(b)), "memory") {
				v2 = pf[4]
			}
		}
	}
	return v1, v2
}

func mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			err := unix.Rmdir(dir)
			if err == nil || errors.Is(err, unix.ENOENT) {
				return
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(end) {
				t.Errorf("removing %s: %v", dir, err)
				return
			}
		}
	})
}

// write writes a cgroup file; optional files may be missing (no swap
// accounting).
func write(t testing.TB, path, value string, optional bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(value)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil && !(optional && errors.Is(err, fs.ErrNotExist)) {
		t.Fatal(err)
	}
}

// HogEnv names the cgroup.procs file the memory hog joins.
const HogEnv = "RAYD_TEST_OOM_HOG"

// Hog is the body of a test binary's helper "test" run as a child: unless
// HogEnv is set it returns false (the test then skips). Otherwise it moves
// the process into the cgroup whose cgroup.procs HogEnv names and
// allocates until the OOM killer ends it; it exits 3 if that never happens
// and 2 if it cannot join.
func Hog() bool {
	procs := os.Getenv(HogEnv)
	if procs == "" {
		return false
	}
	if err := os.WriteFile(procs, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		os.Exit(2)
	}
	var held [][]byte
	for range 4096 { // 4 GiB
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
	}
	fmt.Println(len(held))
	os.Exit(3)
	return true
}
