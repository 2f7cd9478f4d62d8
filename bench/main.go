// Command bench runs Rayito's side-by-side benchmarks: F (the floor, done
// directly on this machine) and R (Rayito through the public SDK against an
// in-process localvm), interleaved per iteration. See README.md.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

var allSuites = []string{"create", "exec", "stream", "files1m", "files100m", "pty", "runcode", "density", "memory", "egress"}

// Result is one suite's figures.
type Result struct {
	Suite  string   `json:"suite"`
	Unit   string   `json:"unit"`
	F      *Summary `json:"f,omitempty"`
	R      *Summary `json:"r,omitempty"`
	Ratio  float64  `json:"ratio_r_over_f_p50,omitempty"`
	Note   string   `json:"note,omitempty"`
	Higher bool     `json:"higher_is_better,omitempty"`
}

type Report struct {
	Date      string   `json:"date"`
	Cores     int      `json:"cores"`
	Kernel    string   `json:"kernel"`
	GoVersion string   `json:"go_version"`
	Pinned    bool     `json:"pinned"`
	Peer      string   `json:"peer"`
	Results   []Result `json:"results"`
}

type env struct {
	ep     string
	warmup int
	iters  int
	tmp    string
}

func main() {
	localvm.MaybeRunInit()
	suiteFlag := flag.String("suite", "all", "comma-separated suites or all: "+strings.Join(allSuites, ","))
	iters := flag.Int("iterations", 20, "measured iterations per suite (create uses min(this,10); stream and files100m min(this,5))")
	warmup := flag.Int("warmup", 3, "warm-up iterations discarded per suite")
	jsonOut := flag.Bool("json", false, "print machine-readable JSON instead of the table")
	peer := flag.String("peer", os.Getenv("RAYITO_BENCH_PEER_ENVD"), "path of an optional peer binary")
	flag.Parse()

	suites := allSuites
	if *suiteFlag != "all" {
		suites = strings.Split(*suiteFlag, ",")
	}
	if err := run(suites, *iters, *warmup, *jsonOut, *peer); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(suites []string, iters, warmup int, jsonOut bool, peer string) error {
	tmp, err := os.MkdirTemp("", "rayito-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := localvm.New(ctx, localvm.Options{StateDir: filepath.Join(tmp, "state"), Logger: log, Scope: "bch", Subnet: netip.MustParsePrefix("10.217.0.0/16")})
	if err != nil {
		return fmt.Errorf("localvm: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer scancel()
		_ = srv.TerminateAll(sctx)
		cancel()
		<-done
		_ = srv.Close(sctx)
	}()

	e := &env{ep: "http://" + ln.Addr().String(), warmup: warmup, iters: iters, tmp: tmp}
	rep := Report{
		Date: time.Now().UTC().Format(time.RFC3339), Cores: runtime.NumCPU(), Kernel: kernel(),
		GoVersion: runtime.Version(), Peer: "not given",
	}
	if peer != "" {
		rep.Peer = peer + " (given, but no peer driver is implemented yet)"
	}
	var warm *rayito.Sandbox
	getWarm := func() (*rayito.Sandbox, error) {
		if warm != nil {
			return warm, nil
		}
		s, err := rayito.Create(ctx, e.opts()...)
		warm = s
		return s, err
	}
	defer func() {
		if warm != nil {
			kctx, kc := context.WithTimeout(context.Background(), 30*time.Second)
			_ = warm.Kill(kctx)
			kc()
		}
	}()
	for _, s := range suites {
		s = strings.TrimSpace(s)
		fmt.Fprintf(os.Stderr, "bench: suite %s...\n", s)
		var r Result
		var err error
		switch s {
		case "create":
			r, err = e.create(ctx)
		case "exec", "stream", "files1m", "files100m", "pty":
			var sbx *rayito.Sandbox
			if sbx, err = getWarm(); err == nil {
				switch s {
				case "exec":
					r, err = e.exec(ctx, sbx)
				case "stream":
					r, err = e.stream(ctx, sbx)
				case "files1m":
					r, err = e.files(ctx, sbx, "files1m", 1<<20, iters)
				case "files100m":
					r, err = e.files(ctx, sbx, "files100m", 100<<20, min(iters, 5))
				case "pty":
					r, err = e.pty(ctx, sbx)
				}
			}
		case "runcode", "density", "memory", "egress":
			r = Result{Suite: s, Note: "not available (feature not landed)"}
		default:
			return fmt.Errorf("unknown suite %q", s)
		}
		if err != nil {
			r = Result{Suite: s, Note: "error: " + err.Error()}
		}
		if r.F != nil && r.R != nil && r.F.P50 != 0 {
			r.Ratio = r.R.P50 / r.F.P50
		}
		rep.Results = append(rep.Results, r)
	}
	if jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printTable(rep)
	return nil
}

func (e *env) opts() []rayito.Option {
	return []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(e.ep)}
}

// loop runs warm-up plus n measured iterations of f then r, interleaved.
func (e *env) loop(n int, f, r func() (float64, error)) (fs, rs []float64, err error) {
	for i := 0; i < e.warmup+n; i++ {
		fv, err := f()
		if err != nil {
			return nil, nil, fmt.Errorf("F: %w", err)
		}
		rv, err := r()
		if err != nil {
			return nil, nil, fmt.Errorf("R: %w", err)
		}
		if i >= e.warmup {
			fs, rs = append(fs, fv), append(rs, rv)
		}
	}
	return fs, rs, nil
}

func result(suite, unit string, fs, rs []float64, higher bool, note string) Result {
	f, r := summarize(fs), summarize(rs)
	return Result{Suite: suite, Unit: unit, F: &f, R: &r, Higher: higher, Note: note}
}

func timeIt(fn func() error) (float64, error) {
	t := time.Now()
	err := fn()
	return ms(time.Since(t)), err
}

func (e *env) create(ctx context.Context) (Result, error) {
	fs, rs, err := e.loop(min(e.iters, 10),
		func() (float64, error) { return timeIt(func() error { return exec.Command("/bin/true").Run() }) },
		func() (float64, error) {
			var sbx *rayito.Sandbox
			d, err := timeIt(func() error {
				var err error
				if sbx, err = rayito.Create(ctx, e.opts()...); err != nil {
					return err
				}
				_, err = sbx.Commands.Exec(ctx, []string{"true"})
				return err
			})
			if sbx != nil {
				_ = sbx.Kill(ctx)
			}
			return d, err
		})
	if err != nil {
		return Result{}, err
	}
	return result("create", "ms", fs, rs, false, "F = fork/exec /bin/true; R = Create + Exec(true); no burst yet"), nil
}

func (e *env) exec(ctx context.Context, sbx *rayito.Sandbox) (Result, error) {
	fs, rs, err := e.loop(e.iters,
		func() (float64, error) {
			return timeIt(func() error {
				out, err := exec.Command("/bin/echo", "hi").Output()
				if err == nil && string(out) != "hi\n" {
					err = fmt.Errorf("echo gave %q", out)
				}
				return err
			})
		},
		func() (float64, error) {
			return timeIt(func() error {
				res, err := sbx.Commands.Exec(ctx, []string{"echo", "hi"})
				if err == nil && res.Stdout != "hi\n" {
					err = fmt.Errorf("echo gave %q", res.Stdout)
				}
				return err
			})
		})
	if err != nil {
		return Result{}, err
	}
	return result("exec", "ms", fs, rs, false, "F = fork/exec /bin/echo hi; R = Commands.Exec echo hi"), nil
}

const streamBytes = 200000000

func (e *env) stream(ctx context.Context, sbx *rayito.Sandbox) (Result, error) {
	argv := []string{"head", "-c", fmt.Sprint(streamBytes), "/dev/zero"}
	mbps := func(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }
	old := e.warmup
	e.warmup = min(old, 1)
	defer func() { e.warmup = old }()
	fs, rs, err := e.loop(min(e.iters, 5),
		func() (float64, error) {
			t := time.Now()
			cmd := exec.Command(argv[0], argv[1:]...)
			p, err := cmd.StdoutPipe()
			if err != nil {
				return 0, err
			}
			if err := cmd.Start(); err != nil {
				return 0, err
			}
			n, err := io.CopyBuffer(io.Discard, p, make([]byte, 256<<10))
			if werr := cmd.Wait(); err == nil {
				err = werr
			}
			if err == nil && n != streamBytes {
				err = fmt.Errorf("got %d bytes", n)
			}
			return mbps(n, time.Since(t)), err
		},
		func() (float64, error) {
			var n int64
			t := time.Now()
			_, err := sbx.Commands.Exec(ctx, argv, rayito.OnStdout(func(b []byte) { n += int64(len(b)) }), rayito.WithMaxOutputBytes(1))
			d := time.Since(t)
			if err == nil && n != streamBytes {
				err = fmt.Errorf("got %d bytes", n)
			}
			return mbps(n, d), err
		})
	if err != nil {
		return Result{}, err
	}
	return result("stream", "MB/s", fs, rs, true, "200 MB of /dev/zero; F = local pipe; warm-up 1"), nil
}

func (e *env) files(ctx context.Context, sbx *rayito.Sandbox, suite string, size, n int) (Result, error) {
	data := make([]byte, size)
	_, _ = rand.Read(data)
	local := filepath.Join(e.tmp, suite+".bin")
	remote := "bench-" + suite + ".bin"
	var check []byte
	fs, rs, err := e.loop(n,
		func() (float64, error) {
			return timeIt(func() error {
				if err := os.WriteFile(local, data, 0o644); err != nil {
					return err
				}
				var err error
				check, err = os.ReadFile(local)
				return err
			})
		},
		func() (float64, error) {
			d, err := timeIt(func() error {
				if _, err := sbx.Files.Write(ctx, remote, data); err != nil {
					return err
				}
				rc, err := sbx.Files.ReadStream(ctx, remote)
				if err != nil {
					return err
				}
				defer rc.Close()
				check, err = io.ReadAll(rc)
				return err
			})
			if err == nil && !bytes.Equal(check, data) {
				err = fmt.Errorf("read back differs (%d bytes)", len(check))
			}
			return d, err
		})
	if err != nil {
		return Result{}, err
	}
	return result(suite, "ms", fs, rs, false, fmt.Sprintf("write+read %d bytes; F = os.WriteFile+os.ReadFile in %s", size, os.TempDir())), nil
}

// pty: one byte into cat on a terminal, timed until its echo returns.
func (e *env) pty(ctx context.Context, sbx *rayito.Sandbox) (Result, error) {
	lp, err := startLocalPty()
	if err != nil {
		return Result{}, fmt.Errorf("local pty: %w", err)
	}
	defer lp.close()

	echoes := make(chan []byte, 1024)
	h, err := sbx.Pty.Create(ctx, rayito.PtyOptions{Shell: "cat", OnData: func(b []byte) {
		echoes <- append([]byte(nil), b...)
	}})
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = h.Kill(ctx) }()
	drain := func() {
		for {
			select {
			case <-echoes:
			case <-time.After(50 * time.Millisecond):
				return
			}
		}
	}
	drain()
	fs, rs, err := e.loop(max(e.iters, 50),
		func() (float64, error) { return lp.roundTrip() },
		func() (float64, error) {
			t := time.Now()
			if err := h.SendInput(ctx, []byte{'x'}); err != nil {
				return 0, err
			}
			select {
			case b := <-echoes:
				d := ms(time.Since(t))
				if !bytes.Contains(b, []byte{'x'}) {
					return d, fmt.Errorf("echo %q", b)
				}
				return d, nil
			case <-time.After(5 * time.Second):
				return 0, fmt.Errorf("no echo within 5s")
			}
		})
	if err != nil {
		return Result{}, err
	}
	return result("pty", "ms", fs, rs, false, "F = local pty (/dev/ptmx) running cat; R = Pty.Create(Shell: cat) + SendInput; n=max(iterations,50)"), nil
}

type localPty struct {
	master *os.File
	cmd    *exec.Cmd
	buf    []byte
}

func ioctl(fd, req, arg uintptr) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, req, arg); e != 0 {
		return e
	}
	return nil
}

func startLocalPty() (*localPty, error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	var unlock int32
	if err := ioctl(m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); err != nil {
		m.Close()
		return nil, err
	}
	var n uint32
	if err := ioctl(m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); err != nil {
		m.Close()
		return nil, err
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, err
	}
	cmd := exec.Command("cat")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		s.Close()
		m.Close()
		return nil, err
	}
	s.Close()
	return &localPty{master: m, cmd: cmd, buf: make([]byte, 4096)}, nil
}

func (p *localPty) roundTrip() (float64, error) {
	t := time.Now()
	if _, err := p.master.Write([]byte{'x'}); err != nil {
		return 0, err
	}
	n, err := p.master.Read(p.buf)
	d := ms(time.Since(t))
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

func kernel() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "unknown"
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

func printTable(rep Report) {
	fmt.Printf("date: %s\ncores: %d\nkernel: %s\ngo: %s\npinned: %v\npeer: %s\n\n", rep.Date, rep.Cores, rep.Kernel, rep.GoVersion, rep.Pinned, rep.Peer)
	fmt.Printf("%-10s %-5s %4s %10s %10s %10s   %10s %10s %10s   %8s\n", "suite", "unit", "n", "F min", "F p50", "F p95", "R min", "R p50", "R p95", "R/F p50")
	for _, r := range rep.Results {
		if r.F == nil || r.R == nil {
			fmt.Printf("%-10s %s\n", r.Suite, r.Note)
			continue
		}
		fmt.Printf("%-10s %-5s %4d %10.3f %10.3f %10.3f   %10.3f %10.3f %10.3f   %8.2f\n", r.Suite, r.Unit, r.R.N,
			r.F.Min, r.F.P50, r.F.P95, r.R.Min, r.R.P50, r.R.P95, r.Ratio)
	}
	fmt.Println()
	for _, r := range rep.Results {
		if r.F != nil && r.Note != "" {
			fmt.Printf("  %s: %s\n", r.Suite, r.Note)
		}
	}
	fmt.Println("  (for MB/s rows \"min\" is the slowest run; higher is better)")
}
