package tests

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestMain(m *testing.M) {
	// The platform launches each sandbox's init by re-executing this
	// binary.
	localvm.MaybeRunInit()
	code := m.Run()
	// The binaries the tests built (rayitoBin, about 100 MB; sandboxBin).
	for _, p := range []string{binPath, sbxPath} {
		if p != "" {
			_ = os.RemoveAll(filepath.Dir(p))
		}
	}
	os.Exit(code)
}

// platform is an in-process local platform for one test.
type platform struct {
	t        *testing.T
	srv      *localvm.Server
	endpoint string
	stateDir string
	cancel   context.CancelFunc
	done     chan error
	accepted *atomic.Int64 // connections the platform's listener accepted
	conns    *connSet      // the connections it holds open
}

// countingListener counts accepted connections and keeps them in a set,
// so a test can cut them all.
type countingListener struct {
	net.Listener
	n     *atomic.Int64
	conns *connSet
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
		l.conns.add(c)
	}
	return c, err
}

// connSet is the platform's accepted connections.
type connSet struct {
	mu sync.Mutex
	m  map[net.Conn]struct{}
}

func (s *connSet) add(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[net.Conn]struct{}{}
	}
	s.m[c] = struct{}{}
}

// cut closes every connection the platform accepted so far: a network
// drop as its clients see it.
func (s *connSet) cut() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.m)
	for c := range s.m {
		_ = c.Close()
	}
	clear(s.m)
	return n
}

func startPlatform(t *testing.T, stateDir string, configure ...func(*localvm.Options)) *platform {
	t.Helper()
	if stateDir == "" {
		stateDir = t.TempDir()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The tests' own scope and subnet: they never touch a real platform's
	// sandboxes on this machine.
	opts := localvm.Options{StateDir: stateDir, Logger: log, Subnet: testSubnet(t), SandboxBinary: sandboxBin(t)}
	for _, c := range configure {
		c(&opts)
	}
	srv, err := localvm.New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p := &platform{t: t, srv: srv, endpoint: "http://" + ln.Addr().String(), stateDir: stateDir, cancel: cancel, done: make(chan error, 1), accepted: &atomic.Int64{}, conns: &connSet{}}
	go func() { p.done <- srv.Serve(ctx, countingListener{ln, p.accepted, p.conns}) }()
	return p
}

// testSubnets hands each top-level test a /20 of 10.215.0.0/16 of its
// own (a second platform of the same test, on the same state directory,
// gets the same one): the tests marked parallel run their platforms side
// by side, and two launchers never share a pool of /30s. A platform that
// the CLI starts has the default subnet: at most one parallel test may
// start one.
var testSubnets struct {
	sync.Mutex
	of   map[string]netip.Prefix
	next int
}

func testSubnet(t *testing.T) netip.Prefix {
	top, _, _ := strings.Cut(t.Name(), "/")
	testSubnets.Lock()
	defer testSubnets.Unlock()
	if p, ok := testSubnets.of[top]; ok {
		return p
	}
	if testSubnets.of == nil {
		testSubnets.of = map[string]netip.Prefix{}
	}
	p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 215, byte(16 * (testSubnets.next % 16)), 0}), 20)
	testSubnets.next++
	testSubnets.of[top] = p
	return p
}

// stop stops serving; terminate says whether sandboxes go too.
func (p *platform) stop(terminate bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if terminate {
		if err := p.srv.TerminateAll(ctx); err != nil {
			p.t.Errorf("TerminateAll: %v", err)
		}
	}
	p.cancel()
	<-p.done
	if err := p.srv.Close(ctx); err != nil {
		p.t.Errorf("Close: %v", err)
	}
}

// create creates a sandbox on p or fails the test; the caller kills it.
func (p *platform) create(ctx context.Context) *rayito.Sandbox {
	p.t.Helper()
	sbx, err := rayito.Create(ctx, p.opts()...)
	if err != nil {
		p.t.Fatal(err)
	}
	return sbx
}

func (p *platform) opts(extra ...rayito.Option) []rayito.Option {
	// The platform's own token store: tests never write the user's.
	return append([]rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(p.endpoint),
		rayito.WithTokenStoreDir(filepath.Join(p.stateDir, "tokens"))}, extra...)
}

func isRoot() bool { return os.Geteuid() == 0 }

var (
	binOnce sync.Once
	binPath string
	binErr  error

	sbxOnce sync.Once
	sbxPath string
	sbxErr  error
)

// sandboxBin builds localvm's rayito-sandbox once per run, with -race
// when the tests run with it: every in-process platform starts its
// sandboxes from it (localvm.Options.SandboxBinary), as a released rayito
// does, instead of re-executing this test binary, whose package
// initialization (about 130 ms race-built) would run in every sandbox.
// Re-execution stays covered by localvm's own tests and by
// TestCLISandboxBinary.
func sandboxBin(t *testing.T) string {
	t.Helper()
	sbxOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rayito-sandbox-bin-")
		if err != nil {
			sbxErr = err
			return
		}
		sbxPath = filepath.Join(dir, localvm.SandboxBinaryName)
		args := []string{"build", "-o", sbxPath}
		if raceBuild {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/rayito-dev/rayito/localvm/cmd/rayito-sandbox")...).CombinedOutput()
		if err != nil {
			sbxErr = errors.New(string(out))
		}
	})
	if sbxErr != nil {
		t.Fatalf("build rayito-sandbox: %v", sbxErr)
	}
	return sbxPath
}
