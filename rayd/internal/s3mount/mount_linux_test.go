package s3mount

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
	"github.com/rayito-dev/rayito/rayd/internal/persist/persisttest"
)

// needFUSE skips unless the test can mount FUSE for real.
func needFUSE(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: rayd mounts /dev/fuse itself")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse on this machine")
	}
}

// buildHelper builds cmd/rayito-mount-s3 where uid 990 can run it.
func buildHelper(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "s3mount-helper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "rayito-mount-s3")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/rayito-dev/rayito/rayd/cmd/rayito-mount-s3").CombinedOutput()
	if err != nil {
		t.Fatalf("building the helper: %v\n%s", err, out)
	}
	return bin
}

// platform serves the store and the metadata service on one Unix socket,
// telling them apart by Host, as the local platform does.
func platform(t *testing.T, srv *persisttest.Server) func(ctx context.Context) (net.Conn, error) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "platform.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s3u, _ := url.Parse(srv.S3.URL)
	imu, _ := url.Parse(srv.IMDS.URL)
	s3p, imp := httputil.NewSingleHostReverseProxy(s3u), httputil.NewSingleHostReverseProxy(imu)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "imds.test" {
			imp.ServeHTTP(w, r)
			return
		}
		r.Host = s3u.Host // the signature covers the host the client signed
		s3p.ServeHTTP(w, r)
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
}

func TestMountForReal(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "fsmount", true: "mount2"}[legacy], func(t *testing.T) { testMountForReal(t, legacy) })
	}
}

func testMountForReal(t *testing.T, legacy bool) {
	needFUSE(t)
	helper := buildHelper(t)
	srv := persisttest.New(t, "data-bucket", "other-bucket")
	ctx := context.Background()
	put := func(key, body string) {
		if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: ptr("data-bucket"), Key: &key, Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	put("in/hello.txt", "hello from s3\n")
	put("in/sub/deep.txt", "deep")
	big := strings.Repeat("0123456789abcdef", 1<<18) // 4 MiB
	put("in/big.bin", big)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "home/user"), 0o755)
	m := New(Options{Root: root, Helper: helper, Dial: platform(t, srv), Endpoint: "http://" + strings.TrimPrefix(srv.S3.URL, "http://"),
		IMDS: "http://imds.test", OwnerUID: 1000, OwnerGID: 1000, Timeout: 20 * time.Second, Stderr: os.Stderr, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Allow: func() ps3.AllowList { return ps3.ParseAllowList("data-bucket,missing-bucket") }, legacyMount: legacy})
	t.Cleanup(m.Close)
	err := m.Apply(ctx, []ps3.Mount{
		{Path: "/mnt/ro", Bucket: "data-bucket", Prefix: "in/", ReadOnly: true},
		{Path: "/home/user/rw", Bucket: "data-bucket", Prefix: "out/"},
		{Path: "/mnt/ow", Bucket: "data-bucket", Prefix: "in/", AllowOverwrite: true, AllowDelete: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, m, Mounted)
	for _, mt := range m.mounts {
		if (mt.pt.mnt >= 0) == legacy {
			t.Fatalf("mount descriptor %d with legacy=%v", mt.pt.mnt, legacy)
		}
	}

	ro, rw, ow := filepath.Join(root, "mnt/ro"), filepath.Join(root, "home/user/rw"), filepath.Join(root, "mnt/ow")
	if b, err := os.ReadFile(filepath.Join(ro, "hello.txt")); err != nil || string(b) != "hello from s3\n" {
		t.Fatalf("read: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(ro, "sub/deep.txt")); err != nil || string(b) != "deep" {
		t.Fatalf("read deep: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(ro, "big.bin")); err != nil || string(b) != big {
		t.Fatalf("read big: %d bytes %v", len(b), err)
	}
	ents, err := os.ReadDir(ro)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "big.bin,hello.txt,sub" {
		t.Fatalf("list %v", names)
	}
	st, _ := os.Stat(filepath.Join(ro, "hello.txt"))
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 1000 || st.Mode().Perm() != 0o444 {
		t.Fatalf("owner %d mode %v", sys.Uid, st.Mode())
	}
	// Read-only: every change is EROFS.
	if err := os.WriteFile(filepath.Join(ro, "new.txt"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write on a read-only mount: %v", err)
	}
	if err := os.Remove(filepath.Join(ro, "hello.txt")); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("remove on a read-only mount: %v", err)
	}
	// Writable: a new file is uploaded on close, larger than a part too.
	if err := os.WriteFile(filepath.Join(rw, "new.txt"), []byte("written\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := srv.Object(ctx, "data-bucket", "out/new.txt"); err != nil || string(b) != "written\n" {
		t.Fatalf("uploaded: %q %v", b, err)
	}
	huge := strings.Repeat("z", 9<<20+123)
	f, err := os.Create(filepath.Join(rw, "dir/huge.bin"))
	if err == nil {
		t.Fatal("created a file in a missing directory")
	}
	if err := os.Mkdir(filepath.Join(rw, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err = os.Create(filepath.Join(rw, "dir/huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	bw.WriteString(huge)
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := srv.Object(ctx, "data-bucket", "out/dir/huge.bin"); err != nil || len(b) != len(huge) {
		t.Fatalf("multipart: %d %v", len(b), err)
	}
	// No overwrite, no delete, no rename, no chmod without the flags.
	if err := os.WriteFile(filepath.Join(rw, "new.txt"), []byte("again"), 0o644); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("overwrite: %v", err)
	}
	if err := os.Remove(filepath.Join(rw, "new.txt")); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("delete: %v", err)
	}
	if err := os.Rename(filepath.Join(rw, "new.txt"), filepath.Join(rw, "moved.txt")); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("rename: %v", err)
	}
	if err := os.Chmod(filepath.Join(rw, "new.txt"), 0o600); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("chmod: %v", err)
	}
	if err := os.Symlink("x", filepath.Join(rw, "link")); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("symlink: %v", err)
	}
	// With the flags: overwrite (O_TRUNC) and delete.
	if err := os.WriteFile(filepath.Join(ow, "hello.txt"), []byte("replaced"), 0o644); err != nil {
		t.Fatalf("overwrite allowed: %v", err)
	}
	if b, _ := srv.Object(ctx, "data-bucket", "in/hello.txt"); string(b) != "replaced" {
		t.Fatalf("overwritten: %q", b)
	}
	if err := os.Remove(filepath.Join(ow, "sub/deep.txt")); err != nil {
		t.Fatalf("delete allowed: %v", err)
	}
	if _, err := srv.Object(ctx, "data-bucket", "in/sub/deep.txt"); err == nil {
		t.Fatal("still there")
	}

	// The helpers: uid 990, no credential in their command line or
	// environment.
	for _, mt := range m.mounts {
		pid := mt.cmd.Process.Pid
		status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if !strings.Contains(string(status), "\nUid:\t990\t990\t990\t990") || !strings.Contains(string(status), "\nNoNewPrivs:\t1") ||
			!strings.Contains(string(status), "\nCapEff:\t0000000000000000") {
			t.Fatalf("helper identity:\n%s", status)
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + f)
			if strings.Contains(string(b), srv.AccessKey) || strings.Contains(string(b), srv.SecretKey) || strings.Contains(string(b), "session") {
				t.Fatalf("a credential in the helper's %s", f)
			}
		}
	}

	// Replacing the section unmounts and stops the helpers.
	pids := []int{}
	for _, mt := range m.mounts {
		pids = append(pids, mt.cmd.Process.Pid)
	}
	if err := m.Apply(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ro, rw, ow} {
		if ents, err := os.ReadDir(p); err != nil || len(ents) != 0 {
			t.Fatalf("still mounted: %v %v", ents, err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	for _, pid := range pids {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status"); err == nil && !strings.Contains(string(b), "State:\tZ") {
			t.Fatalf("helper %d still running", pid)
		}
	}

	// A bucket that does not exist fails with not_found, and nothing
	// stays mounted.
	if err := m.Apply(ctx, []ps3.Mount{{Path: "/mnt/ro", Bucket: "data-bucket", ReadOnly: true}, {Path: "/mnt/gone", Bucket: "missing-bucket", ReadOnly: true}}); err != nil {
		t.Fatal(err)
	}
	r := waitState(t, m, Failed)
	if r.Class != ps3.ClassNotFound || r.Index != 1 {
		t.Fatalf("missing bucket: %+v", r)
	}
	if ents, _ := os.ReadDir(ro); len(ents) != 0 {
		t.Fatal("the other mount stayed")
	}
}

func waitState(t *testing.T, m *Manager, want State) Result {
	t.Helper()
	deadline := time.Now().Add(25 * time.Second)
	for time.Now().Before(deadline) {
		r := m.Status()
		if r.State == want {
			return r
		}
		if r.State != Pending {
			t.Fatalf("state %+v, want %v", r, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("still %+v", m.Status())
	return Result{}
}

// A helper that never serves times out; one that exits names the class
// by its code; either way nothing stays mounted and no helper runs on.
func TestMountHelperFailures(t *testing.T) {
	needFUSE(t)
	dir, err := os.MkdirTemp("", "s3mount-fake")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	for _, c := range []struct {
		script, class string
	}{
		{"exec sleep 30", ps3.ClassTimeout},
		{"exit 11", ps3.ClassIAMDenied},
		{"exit 10", ps3.ClassNetwork},
		{"exit 3", ps3.ClassFailed},
	} {
		helper := filepath.Join(dir, "helper")
		os.Remove(helper)
		os.WriteFile(helper, []byte("#!/bin/sh\n"+c.script+"\n"), 0o755)
		root := t.TempDir()
		m := New(Options{Root: root, Helper: helper, Timeout: time.Second, OwnerUID: 1000, OwnerGID: 1000,
			Allow: func() ps3.AllowList { return ps3.ParseAllowList("bkt") }})
		if err := m.Apply(context.Background(), []ps3.Mount{{Path: "/mnt/a", Bucket: "bkt", ReadOnly: true}}); err != nil {
			t.Fatal(err)
		}
		var pid int
		if len(m.mounts) == 1 {
			pid = m.mounts[0].cmd.Process.Pid
		}
		r := waitState(t, m, Failed)
		if r.Class != c.class || r.Index != 0 {
			t.Errorf("%q: %+v, want %s", c.script, r, c.class)
		}
		if ents, err := os.ReadDir(filepath.Join(root, "mnt/a")); err != nil || len(ents) != 0 {
			t.Errorf("%q: still mounted: %v", c.script, err)
		}
		time.Sleep(50 * time.Millisecond)
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status"); err == nil && !strings.Contains(string(b), "State:\tZ") {
			t.Errorf("%q: helper %d still running", c.script, pid)
		}
		m.Close()
	}
}
