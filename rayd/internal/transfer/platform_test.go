package transfer

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

// TestPlatformSocket: with the local platform's store configured, a
// transfer whose URL is for its host (https, port 443, as the policy
// demands) goes through the platform's socket in plain HTTP with the
// same Host, path and query; a URL for any other host never reaches the
// socket.
func TestPlatformSocket(t *testing.T) {
	const host = "rayito-local.s3.local.amazonaws.com"
	sock := filepath.Join(t.TempDir(), "platform.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		line := r.Method + " " + r.Host + " " + r.URL.RequestURI()
		if r.Method == http.MethodPut {
			line += " length=" + r.Header.Get("Content-Length") + strings.Join(r.TransferEncoding, ",")
		}
		seen = append(seen, line)
		mu.Unlock()
		if r.Method == http.MethodGet {
			w.Write([]byte("from the platform"))
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	home := t.TempDir()
	fsys, err := safefs.New(safefs.Options{DiskReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	m := New(Options{
		FS: fsys, SandboxID: func() string { return sandbox },
		Platform: &Platform{Host: host, Dial: func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) }},
		Lookup:   func(context.Context, string) ([]netip.Addr, error) { return nil, errors.New("no such host") },
	})
	t.Cleanup(m.Close)
	user := safefs.User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Home: home}
	key := "rayito-transfer/" + sandbox + "/up/t1"
	q := "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=K%2F20260101%2Flocal%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=ab"
	o := Object{Bucket: "rayito-local", Key: key, Region: "local"}
	id, err := m.StartImport(ImportRequest{Object: o, Get: Signed{URL: "https://" + host + "/" + key + q},
		Delete: &Signed{URL: "https://" + host + ":443/" + key + q}, Path: "f", User: user, Mode: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	st := waitEnded(t, m, id)
	if st.Phase != Done {
		t.Fatalf("import through the socket: %+v", st)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "f")); string(b) != "from the platform" {
		t.Errorf("file %q", b)
	}
	mu.Lock()
	got := strings.Join(seen, "\n")
	mu.Unlock()
	want := "GET " + host + " /" + key + q + "\nDELETE " + host + " /" + key + q
	if got != want {
		t.Errorf("the socket saw\n%s\nwant\n%s", got, want)
	}

	// An empty file's export: one PUT with Content-Length: 0 (S3 refuses
	// a chunked body with 411).
	if err := os.WriteFile(filepath.Join(home, "empty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	down := "rayito-transfer/" + sandbox + "/down/e1"
	id, err = m.StartExport(ExportRequest{Object: Object{Bucket: "rayito-local", Key: down, Region: "local"}, Path: "empty", User: user,
		Put: &Signed{URL: "https://" + host + "/" + down + q}})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitEnded(t, m, id); st.Phase != Done {
		t.Fatalf("empty export: %+v", st)
	}
	mu.Lock()
	last := seen[len(seen)-1]
	seen = seen[:len(seen)-1]
	mu.Unlock()
	if last != "PUT "+host+" /"+down+q+" length=0" {
		t.Errorf("empty export's PUT: %s", last)
	}

	// Another bucket's host goes to the network (here: no address).
	o2 := Object{Bucket: "other-bucket", Key: key, Region: "local"}
	id, err = m.StartImport(ImportRequest{Object: o2, Get: Signed{URL: "https://other-bucket.s3.local.amazonaws.com/" + key + q}, Path: "g", User: user})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitEnded(t, m, id); st.Phase != Failed {
		t.Errorf("another host: %+v", st)
	}
	mu.Lock()
	n := len(seen)
	mu.Unlock()
	if n != 2 {
		t.Errorf("the socket saw another host's request (%d requests)", n)
	}
}

func waitEnded(t *testing.T, m *Manager, id string) State {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st, err := m.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Phase.Ended() {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the transfer did not end")
	return State{}
}
