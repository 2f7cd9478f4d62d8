package s3mount

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
	"github.com/rayito-dev/rayito/rayd/internal/s3mount/wire"
)

func TestWalkRefusesSymlinks(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(root string)
		path  string
		ok    bool
	}{
		{"creates", func(root string) {}, "/mnt/a/b", true},
		{"home creates below user", func(root string) { os.MkdirAll(filepath.Join(root, "home/user"), 0o755) }, "/home/user/data", true},
		{"home user missing", func(root string) { os.MkdirAll(filepath.Join(root, "home"), 0o755) }, "/home/user/data", false},
		{"mnt symlink", func(root string) { os.Symlink("/etc", filepath.Join(root, "mnt")) }, "/mnt/a", false},
		{"middle symlink", func(root string) {
			os.MkdirAll(filepath.Join(root, "mnt"), 0o755)
			os.Symlink("/etc", filepath.Join(root, "mnt/a"))
		}, "/mnt/a/b", false},
		{"last symlink", func(root string) {
			os.MkdirAll(filepath.Join(root, "mnt/a"), 0o755)
			os.Symlink(filepath.Join(root, "mnt/a"), filepath.Join(root, "mnt/b"))
		}, "/mnt/b", false},
		{"relative symlink", func(root string) {
			os.MkdirAll(filepath.Join(root, "home/user"), 0o755)
			os.Symlink("../..", filepath.Join(root, "home/user/up"))
		}, "/home/user/up/x", false},
		{"home symlink", func(root string) {
			os.MkdirAll(filepath.Join(root, "real/user"), 0o755)
			os.Symlink("real", filepath.Join(root, "home"))
		}, "/home/user/x", false},
		{"file", func(root string) {
			os.MkdirAll(filepath.Join(root, "mnt"), 0o755)
			os.WriteFile(filepath.Join(root, "mnt/f"), nil, 0o644)
		}, "/mnt/f", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			c.setup(root)
			pt, err := walk(root, c.path, os.Getuid(), os.Getgid())
			if c.ok {
				if err != nil {
					t.Fatalf("walk: %v", err)
				}
				defer pt.close()
				st, err := os.Lstat(filepath.Join(root, c.path))
				if err != nil || !st.IsDir() {
					t.Fatalf("not a directory: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("walk = %v, want ErrInvalidPath", err)
			}
			if _, err := os.Stat("/etc/b"); err == nil && c.name == "middle symlink" {
				t.Fatal("made a directory through the link")
			}
		})
	}
}

func TestHelperArgsHoldNoCredential(t *testing.T) {
	m := New(Options{IMDS: "http://imds.platform.internal", Endpoint: "http://s3.platform.internal", OwnerUID: 1000, OwnerGID: 1000,
		Dial: func(ctx context.Context) (net.Conn, error) { return nil, errors.New("x") }})
	spec := ps3.Mount{Path: "/mnt/a", Bucket: "bkt", Prefix: "p/", AllowOverwrite: true, AllowDelete: true}
	args := HelperArgs(spec, m.o, true)
	want := []string{"--foreground", "--allow-overwrite", "--allow-delete", "--prefix", "p/", "--uid", "1000", "--gid", "1000",
		"--endpoint-url", "http://s3.platform.internal", "--force-path-style", "--rayito-broker-fd", "4", "bkt", "/dev/fd/3"}
	if !slices.Equal(args, want) {
		t.Fatalf("args %q\nwant %q", args, want)
	}
	ro := HelperArgs(ps3.Mount{Path: "/mnt/a", Bucket: "bkt", ReadOnly: true}, Options{OwnerUID: 1000, OwnerGID: 1000}, false)
	if !slices.Equal(ro, []string{"--foreground", "--read-only", "--uid", "1000", "--gid", "1000", "bkt", "/dev/fd/3"}) {
		t.Fatalf("read-only args %q", ro)
	}
	env := m.helperEnv()
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if !slices.Contains([]string{"PATH", "HOME", wire.IMDSEnv}, k) {
			t.Fatalf("unexpected variable %s", k)
		}
		for _, bad := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_"} {
			if strings.Contains(e, bad) {
				t.Fatalf("credential variable %s", k)
			}
		}
	}
}

func TestApplyRefusals(t *testing.T) {
	root := t.TempDir()
	helper := filepath.Join(t.TempDir(), "helper")
	os.WriteFile(helper, []byte("#!/bin/sh\nexit 1\n"), 0o755)
	fuse := filepath.Join(t.TempDir(), "fuse")
	os.WriteFile(fuse, nil, 0o644)
	m := New(Options{Root: root, Helper: helper, FUSEDevice: fuse, Allow: func() ps3.AllowList { return ps3.ParseAllowList("good-bucket") }})
	ctx := context.Background()

	err := m.Apply(ctx, []ps3.Mount{{Path: "/etc/x", Bucket: "good-bucket", ReadOnly: true}})
	if !errors.Is(err, ps3.ErrInvalid) {
		t.Fatalf("invalid: %v", err)
	}
	err = m.Apply(ctx, []ps3.Mount{{Path: "/mnt/x", Bucket: "other-bucket", ReadOnly: true}})
	var e *Error
	if !errors.As(err, &e) || e.Class != ps3.ClassNotAllowed || !errors.Is(err, ps3.ErrNotAllowed) {
		t.Fatalf("not allowed: %v", err)
	}
	if r := m.Status(); r.State != Failed || r.Class != ps3.ClassNotAllowed {
		t.Fatalf("status %+v", r)
	}
	// An empty allow-list allows nothing.
	m2 := New(Options{Root: root, Helper: helper, FUSEDevice: fuse})
	if err := m2.Apply(ctx, []ps3.Mount{{Path: "/mnt/x", Bucket: "good-bucket", ReadOnly: true}}); !errors.As(err, &e) || e.Class != ps3.ClassNotAllowed {
		t.Fatalf("empty list: %v", err)
	}
	os.MkdirAll(filepath.Join(root, "mnt"), 0o755)
	os.Symlink("/etc", filepath.Join(root, "mnt/link"))
	err = m.Apply(ctx, []ps3.Mount{{Path: "/mnt/link", Bucket: "good-bucket", ReadOnly: true}})
	if !errors.As(err, &e) || e.Class != ps3.ClassInvalidPath {
		t.Fatalf("symlink: %v", err)
	}
	missing := New(Options{Root: root, Helper: filepath.Join(root, "nope"), FUSEDevice: fuse, Allow: m.o.Allow})
	if missing.Supported() {
		t.Fatal("supported without a helper")
	}
	err = missing.Apply(ctx, []ps3.Mount{{Path: "/mnt/x", Bucket: "good-bucket", ReadOnly: true}})
	if !errors.As(err, &e) || e.Class != ps3.ClassHelperMissing {
		t.Fatalf("helper missing: %v", err)
	}
	// An empty section unmounts everything and is in force at once.
	if err := m.Apply(ctx, nil); err != nil || m.Status().State != Mounted {
		t.Fatalf("empty section: %v %+v", err, m.Status())
	}
}
