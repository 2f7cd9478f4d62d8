package localvm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// asClientEnv makes the test binary a one-request HTTP client (see
// runAsClient): the other user of TestOwnerOnly.
const asClientEnv = "RAYITO_LOCALVM_TEST_GET"

// runAsClient GETs the URL in asClientEnv (Host from the second field, if
// any), prints the status, the exception and the owner headers, and exits.
func runAsClient() {
	url, host, _ := strings.Cut(os.Getenv(asClientEnv), " ")
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(0)
	}
	if host != "" {
		req.Host = host
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(0)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	fmt.Println(res.StatusCode, res.Header.Get(microvmsapi.ErrorTypeHeader), res.Header.Get(microvmsapi.OwnerHeader))
	os.Exit(0)
}

// asUID runs this test binary as uid (gid the same) to GET url with host.
func asUID(t *testing.T, uid uint32, url, host string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy the other user may execute (the test binary's own
	// directory is root's alone).
	dir, err := os.MkdirTemp("", "rayito-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "client")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{asClientEnv + "=" + url + " " + host}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("client as uid %d: %v\n%s", uid, err, out.String())
	}
	return strings.TrimSpace(out.String())
}

// TestOwnerOnly: the platform serves only the user it runs as. Another
// user of the machine gets 403 NotOwnerException, naming the owner, on
// the API and on the endpoint proxy alike (any local user could list,
// pause and kill root's sandboxes, and mint a token to read their files);
// the owner is served, over TCP and over a Unix socket.
func TestOwnerOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs a client as another user")
	}
	s, _ := newFakeServer(t, Options{})
	base, stop := serve(t, s)
	defer stop()

	const nobody = 65534
	list := base + microvmsapi.PathMicrovms
	if got := asUID(t, nobody, list, ""); got != "403 NotOwnerException 0" {
		t.Fatalf("ListMicrovms as another user: %q, want 403 NotOwnerException naming owner 0", got)
	}
	if got := asUID(t, nobody, base+"/", "x"+registry.EndpointSuffix); got != "403 NotOwnerException 0" {
		t.Fatalf("the endpoint proxy as another user: %q, want 403 NotOwnerException", got)
	}
	// The owner is served.
	res, err := http.Get(list)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("ListMicrovms as the owner: %d", res.StatusCode)
	}

	// Over a Unix socket, by SO_PEERCRED.
	dir := t.TempDir()
	sock := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Serve(ctx, ln) }()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	res, err = c.Get("http://localhost" + microvmsapi.PathMicrovms)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("ListMicrovms as the owner over a Unix socket: %d", res.StatusCode)
	}
}

// A connection whose client cannot be told is refused.
func TestOwnerUnknownClient(t *testing.T) {
	s, _ := newFakeServer(t, Options{})
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1"+microvmsapi.PathMicrovms, nil)
	req = req.WithContext(context.WithValue(req.Context(), clientKey{}, client{err: errUnknownClient}))
	if s.ownerOnly(rec, req) || rec.status != http.StatusForbidden || rec.header.Get(microvmsapi.ErrorTypeHeader) != microvmsapi.NotOwnerException {
		t.Fatalf("unknown client: status %d %v", rec.status, rec.header)
	}
	// No client at all (a listener Serve did not set up) is refused too.
	rec = &recorder{header: http.Header{}}
	req, _ = http.NewRequest(http.MethodGet, "http://127.0.0.1"+microvmsapi.PathMicrovms, nil)
	if s.ownerOnly(rec, req) {
		t.Fatal("a request without a looked-up client was served")
	}
	// AllowRemote turns the check off.
	s.opts.AllowRemote = true
	if !s.ownerOnly(&recorder{header: http.Header{}}, req) {
		t.Fatal("AllowRemote: refused")
	}
}

type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(code int)        { r.status = code }
