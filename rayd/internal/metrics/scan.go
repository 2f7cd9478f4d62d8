package metrics

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// reading is one measurement of the sandbox, before it becomes a Sample.
type reading struct {
	at       stamp
	ticks    uint64 // the sandbox's CPU time, in clock ticks
	tasks    int    // processes in the sandbox, rayd included
	procs    int    // processes in the sandbox other than rayd
	self     bool   // the scan saw rayd (tasks and procs are known)
	rssBytes uint64
	mem      meminfo
	memOK    bool
	disk     diskUsage
}

type diskUsage struct{ used, total uint64 }

// task is one process of a scan.
type task struct {
	pid int
	procStat
}

// Membership of a task in the sandbox, while a scan resolves it.
const (
	unknown uint8 = iota
	inside
	outside
	visiting
)

// scanner reads /proc. Its buffers are reused from one scan to the next;
// it is not safe for concurrent use.
type scanner struct {
	proc     string // "/proc"
	self     int    // rayd's pid as /proc shows it
	meminfo  bool   // read /proc/meminfo too
	diskPath []string
	pageSize uint64

	buf   []byte
	tasks []task
	index map[int]int // pid → index in tasks
	state []uint8
	path  []int
}

func newScanner(proc string, meminfo bool, diskPaths []string) *scanner {
	self := os.Getpid()
	if b, err := os.Readlink(proc + "/self"); err == nil {
		if pid, err := strconv.Atoi(string(b)); err == nil {
			self = pid
		}
	}
	return &scanner{
		proc:     proc,
		self:     self,
		meminfo:  meminfo,
		diskPath: diskPaths,
		pageSize: uint64(os.Getpagesize()),
		buf:      make([]byte, 4096),
		index:    make(map[int]int),
	}
}

// scan reads every process of the sandbox, and /proc/meminfo and the disk
// usage. A process that ends during the scan is skipped; the error is that
// of reading /proc itself.
func (sc *scanner) scan(r *reading) error {
	names, err := readDirNames(sc.proc)
	if err != nil {
		return err
	}
	sc.tasks = sc.tasks[:0]
	clear(sc.index)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		b, ok := sc.readFile(sc.proc + "/" + name + "/stat")
		if !ok {
			continue
		}
		st, err := parseStat(b)
		if err != nil {
			continue
		}
		sc.index[pid] = len(sc.tasks)
		sc.tasks = append(sc.tasks, task{pid: pid, procStat: st})
	}
	sc.resolve()
	for i, t := range sc.tasks {
		if sc.state[i] != inside {
			continue
		}
		r.tasks++
		if t.pid == sc.self {
			r.self = true
		} else {
			r.procs++
		}
		r.ticks += t.ticks
		r.rssBytes += t.rssPages * sc.pageSize
	}
	if sc.meminfo {
		if b, ok := sc.readFile(sc.proc + "/meminfo"); ok {
			r.mem, r.memOK = parseMeminfo(b)
		}
	}
	r.disk = sc.statfs()
	return nil
}

// resolve marks each task inside the sandbox (rayd or a descendant of
// rayd) or outside, walking up the parent links once per task.
func (sc *scanner) resolve() {
	if n := len(sc.tasks); cap(sc.state) < n {
		sc.state = make([]uint8, n)
	} else {
		sc.state = sc.state[:n]
		clear(sc.state)
	}
	for i := range sc.tasks {
		sc.path = sc.path[:0]
		j, verdict := i, unknown
		for verdict == unknown {
			switch sc.state[j] {
			case inside, outside:
				verdict = sc.state[j]
				continue
			case visiting: // a cycle: the scan saw parents change
				verdict = outside
				continue
			}
			sc.state[j] = visiting
			sc.path = append(sc.path, j)
			t := sc.tasks[j]
			if t.pid == sc.self {
				verdict = inside
				continue
			}
			k, ok := sc.index[t.ppid]
			if !ok {
				verdict = outside // pid 0, or a parent outside the namespace or gone
				continue
			}
			j = k
		}
		for _, k := range sc.path {
			sc.state[k] = verdict
		}
	}
}

// readFile reads a small /proc file into the scanner's buffer (growing it
// up to 64 KiB). A short read is the end of the file: /proc's files fill
// the buffer they are given, so most take a single read. The result is
// valid until the next call.
func (sc *scanner) readFile(path string) ([]byte, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(sc.buf) {
			if len(sc.buf) >= 64<<10 {
				return nil, false
			}
			sc.buf = append(sc.buf, make([]byte, len(sc.buf))...)
		}
		m, err := unix.Read(fd, sc.buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, false
		}
		n += m
		if m == 0 || n < len(sc.buf) {
			return sc.buf[:n], true
		}
	}
}

// statfs measures the first of the disk paths that exists.
func (sc *scanner) statfs() diskUsage {
	for _, p := range sc.diskPath {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			continue
		}
		unit := uint64(st.Frsize)
		if unit == 0 {
			unit = uint64(st.Bsize)
		}
		free := min(st.Bfree, st.Blocks)
		return diskUsage{used: (st.Blocks - free) * unit, total: st.Blocks * unit}
	}
	return diskUsage{}
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
