package peer

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/localvmtest"
)

// TestMain doubles as a fake envd binary for TestLaunch: with
// PEER_FAKE_ENVD=1 it parses envd's flags and serves the fake.
func TestMain(m *testing.M) {
	if os.Getenv("PEER_FAKE_ENVD") == "1" {
		fs := flag.NewFlagSet("envd", flag.ExitOnError)
		isnotfc := fs.Bool("isnotfc", false, "")
		nocg := fs.Bool("no-cgroups", false, "")
		port := fs.Int("port", 49983, "")
		_ = fs.Parse(os.Args[1:])
		if !*isnotfc || !*nocg {
			os.Exit(3)
		}
		// Like envd, on every interface of its namespace when asked
		// (PEER_FAKE_ALL=1: only in a namespace of its own).
		host := "127.0.0.1"
		if os.Getenv("PEER_FAKE_ALL") == "1" {
			host = ""
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(*port)))
		if err != nil {
			os.Exit(4)
		}
		_ = http.Serve(ln, newFake(nil))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestEnvelopeRoundTrip(t *testing.T) {
	b := appendEnvelope(nil, flagEndStream, []byte(`{}`))
	if !bytes.Equal(b, []byte{2, 0, 0, 0, 2, '{', '}'}) {
		t.Fatalf("envelope = %v", b)
	}
	flags, msg, err := readEnvelope(bytes.NewReader(b), nil)
	if err != nil || flags != flagEndStream || string(msg) != "{}" {
		t.Fatalf("read = %d %q %v", flags, msg, err)
	}
	if _, _, err := readEnvelope(bytes.NewReader(b[:6]), nil); err == nil {
		t.Fatal("short envelope accepted")
	}
}

func fakeServer(t *testing.T) (*fakeEnvd, *Client) {
	f := newFake(t)
	srv := httptest.NewServer(f)
	// A test that fails mid-stream leaves a handler running: cut the
	// connections first, so that Close does not wait for it forever.
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	c := NewClient(srv.URL, "root")
	t.Cleanup(c.Close)
	return f, c
}

func TestRunEcho(t *testing.T) {
	f, c := fakeServer(t)
	ctx := context.Background()
	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := c.Run(ctx, "/bin/echo", []string{"hi"}, func(b []byte) { out.Write(b) })
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "hi\n" || res.Pid == 0 || !res.End.Exited || res.End.ExitCode != 0 || res.StdoutBytes != 3 {
		t.Fatalf("res = %+v, out %q", res, out.String())
	}
	f.check(t)
	if len(f.starts) != 1 || f.starts[0] != `{"process":{"cmd":"/bin/echo","args":["hi"]}}` {
		t.Fatalf("Start messages = %q", f.starts)
	}
}

func TestRunStreamCountsBytes(t *testing.T) {
	f, c := fakeServer(t)
	res, err := c.Run(context.Background(), "head", []string{"-c", "1000000", "/dev/zero"}, nil)
	if err != nil || res.StdoutBytes != 1000000 {
		t.Fatalf("res = %+v, %v", res, err)
	}
	f.check(t)
}

func TestRunErrors(t *testing.T) {
	f, c := fakeServer(t)
	ctx := context.Background()
	if _, err := c.Run(ctx, "/bin/false", nil, nil); err == nil {
		t.Fatal("exit 1 should be an error")
	}
	_, err := c.Run(ctx, "/nonexistent", nil, nil)
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != "invalid_argument" {
		t.Fatalf("err = %v", err)
	}
	f.check(t)
}

func TestFilesRoundTrip(t *testing.T) {
	f, c := fakeServer(t)
	ctx := context.Background()
	data := make([]byte, 3<<20+17)
	_, _ = rand.Read(data)
	const path = "/tmp/bench dir/peer.bin"
	if err := c.Upload(ctx, path, data); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	n, err := c.Download(ctx, path, &got)
	if err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("download n=%d err=%v equal=%v", n, err, bytes.Equal(got.Bytes(), data))
	}
	if _, err := c.Download(ctx, "/missing", &got); err == nil {
		t.Fatal("missing file downloaded")
	}
	f.check(t)
}

func TestPtyEcho(t *testing.T) {
	f, c := fakeServer(t)
	ctx := context.Background()
	p, err := c.StartPty(ctx, "/bin/cat", nil, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"x", "y"} {
		if err := p.SendInput(ctx, []byte(b)); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-p.Output():
			if string(got) != b {
				t.Fatalf("echo %q, want %q", got, b)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no echo")
		}
	}
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	f.check(t)
	if want := `{"process":{"cmd":"/bin/cat"},"pty":{"size":{"cols":80,"rows":24}}}`; len(f.starts) != 1 || f.starts[0] != want {
		t.Fatalf("Start = %q, want %q", f.starts, want)
	}
	pid := strconv.Itoa(int(p.Pid()))
	want := []string{
		`SendInput {"process":{"pid":` + pid + `},"input":{"pty":"eA=="}}`,
		`SendInput {"process":{"pid":` + pid + `},"input":{"pty":"eQ=="}}`,
		`SendSignal {"process":{"pid":` + pid + `},"signal":"SIGNAL_SIGKILL"}`,
	}
	if len(f.unaries) != len(want) {
		t.Fatalf("unary calls = %q", f.unaries)
	}
	for i := range want {
		if f.unaries[i] != want[i] {
			t.Fatalf("unary %d = %q, want %q", i, f.unaries[i], want[i])
		}
	}
	// SendInput to a dead process is a not_found RPC error.
	var rpc *RPCError
	if err := p.SendInput(ctx, []byte("z")); !errors.As(err, &rpc) || rpc.Code != "not_found" {
		t.Fatalf("SendInput after kill: %v", err)
	}
}

func TestLaunch(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PEER_FAKE_ENVD", "1")
	var started *exec.Cmd
	s, err := Launch(context.Background(), exe, func(cmd *exec.Cmd) error { started = cmd; return cmd.Start() }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := started.Args[1:4]; got[0] != "-isnotfc" || got[1] != "-no-cgroups" || got[2] != "-port" {
		t.Fatalf("args = %q", started.Args)
	}
	c := NewClient(s.Base, "root")
	defer c.Close()
	if _, err := c.Run(context.Background(), "/bin/echo", []string{"hi"}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := c.Health(context.Background()); err == nil {
		t.Fatal("health after Close")
	}
}

// TestLaunchInNamespace: as root, the peer is born in a network namespace
// of its own (it listens on every interface there, not on this machine's)
// and is reached at the namespace's address.
func TestLaunchInNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a network namespace")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PEER_FAKE_ENVD", "1")
	t.Setenv("PEER_FAKE_ALL", "1")
	pn, err := localvmtest.NewPeerNet(netip.MustParsePrefix("10.252.9.0/24"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pn.Close()
	s, err := Launch(context.Background(), exe, nil, pn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Base, "http://10.252.9.2:") {
		t.Fatalf("base %s", s.Base)
	}
	port := strings.TrimPrefix(s.Base, "http://10.252.9.2:")
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		c.Close()
		t.Fatal("the peer listens on this namespace's loopback")
	}
	c := NewClient(s.Base, "root")
	defer c.Close()
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLaunchFailsFast(t *testing.T) {
	if _, err := Launch(context.Background(), "/bin/false", nil, nil); err == nil {
		t.Fatal("Launch of /bin/false succeeded")
	}
}
