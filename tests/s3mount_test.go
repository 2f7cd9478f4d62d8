package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/spf13/afero"

	"github.com/rayito-dev/rayito/proto/localplatform"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// TestS3Mounts: on the local platform as root, a bucket of the platform's
// store allowed by the operator (RAYITO_ALLOWED_MOUNT_BUCKETS) mounts in
// a sandbox: the sandbox's user reads an object put in the store and
// writes a file in a writable mount that lands in the store; the helper
// runs as uid 990 without any credential in its command line or
// environment; a bucket outside the allow-list is not_allowed and a
// symlinked path invalid_path, each killing the sandbox.
func TestS3Mounts(t *testing.T) {
	if !isRoot() {
		t.Skip("S3 mounts need the root platform (rayd mounts FUSE as the sandbox's root)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse on this machine")
	}
	t.Setenv("RAYITO_ALLOWED_MOUNT_BUCKETS", localplatform.DefaultBucket)
	stateDir := t.TempDir()
	p := startPlatform(t, stateDir)
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// An object in the platform's store, put through the store's own
	// backend over the same files.
	objs := filepath.Join(stateDir, "s3", "buckets", localplatform.DefaultBucket)
	be, err := s3afero.MultiBucket(afero.NewBasePathFs(afero.NewOsFs(), filepath.Join(stateDir, "s3")))
	if err != nil {
		t.Fatal(err)
	}
	body := "hello from the store\n"
	if _, err := be.PutObject(localplatform.DefaultBucket, "data/in/hello.txt", map[string]string{}, strings.NewReader(body), int64(len(body)), nil); err != nil {
		t.Fatal(err)
	}

	var sbx *rayito.Sandbox
	sbx, err = rayito.Create(ctx, p.opts(rayito.WithMounts(map[string]rayito.S3Mount{
		"/mnt/data":        {Bucket: localplatform.DefaultBucket, Prefix: "data/in/"},
		"/home/user/out":   {Bucket: localplatform.DefaultBucket, Prefix: "data/out/", Writable: true},
		"/home/user/a/b/c": {Bucket: localplatform.DefaultBucket, Prefix: "data/"},
	}))...)
	if err != nil {
		t.Fatalf("create with mounts: %v", err)
	}
	defer sbx.Kill(ctx)
	res, err := sbx.Commands.Run(ctx, `set -e
id -u
cat /mnt/data/hello.txt
ls /home/user/a/b/c/in
echo written > /home/user/out/new.txt
cat /home/user/out/new.txt
if echo x > /mnt/data/x 2>/dev/null; then echo WROTE; fi
if rm /home/user/out/new.txt 2>/dev/null; then echo REMOVED; fi
stat -c %U /mnt/data/hello.txt
`)
	if err != nil {
		var ce *rayito.CommandExitError
		if errors.As(err, &ce) {
			t.Fatalf("run: %v\nstdout %q\nstderr %q", err, ce.Result.Stdout, ce.Result.Stderr)
		}
		t.Fatalf("run: %v", err)
	}
	want := "1000\nhello from the store\nhello.txt\nwritten\nuser\n"
	if res.Stdout != want {
		t.Fatalf("stdout %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(objs, "data", "out", "new.txt")); err != nil || string(b) != "written\n" {
		t.Fatalf("in the store: %q %v", b, err)
	}

	// The helpers, seen from the host: uid 990 of the sandbox, no
	// capabilities, no_new_privs, no credential in their command line or
	// environment.
	helpers := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		cmd, err := os.ReadFile(c)
		if err != nil || !strings.HasPrefix(string(cmd), "/usr/local/bin/rayito-mount-s3\x00") || !strings.Contains(string(cmd), "\x00"+localplatform.DefaultBucket+"\x00") {
			continue
		}
		dir := filepath.Dir(c)
		env, _ := os.ReadFile(filepath.Join(dir, "environ"))
		status, _ := os.ReadFile(filepath.Join(dir, "status"))
		uidMap, _ := os.ReadFile(filepath.Join(dir, "uid_map"))
		var inner, base, n, uid int
		fmt.Sscan(string(uidMap), &inner, &base, &n)
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				fmt.Sscan(v, &uid)
			}
		}
		if uid-base+inner != 990 || !strings.Contains(string(status), "\nNoNewPrivs:\t1") || !strings.Contains(string(status), "\nCapEff:\t0000000000000000") {
			t.Errorf("helper identity: uid %d (map %q)\n%s", uid, uidMap, status)
		}
		for _, kv := range strings.Split(strings.TrimRight(string(env), "\x00"), "\x00") {
			k, _, _ := strings.Cut(kv, "=")
			if k != "PATH" && k != "HOME" && k != "AWS_EC2_METADATA_SERVICE_ENDPOINT" {
				t.Errorf("helper environment holds %s", k)
			}
		}
		for _, bad := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET", "AWS_SESSION_TOKEN", "ASIA", "AKIA", "credential"} {
			if strings.Contains(string(cmd), bad) || strings.Contains(string(env), bad) {
				t.Errorf("a credential in a helper's command line or environment")
			}
		}
		helpers++
	}
	if helpers < 3 {
		t.Errorf("found %d helpers, want 3", helpers)
	}
	res, _ = sbx.Commands.Run(ctx, `test -r /dev/rayito-fuse/fuse && echo OPEN; ls /dev/fuse 2>/dev/null; true`)
	if strings.Contains(res.Stdout, "OPEN") || strings.Contains(res.Stdout, "/dev/fuse") {
		t.Fatalf("the sandbox's user reaches FUSE: %q", res.Stdout)
	}

	// Pause and resume: the helpers freeze with the sandbox and serve on.
	if err := sbx.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sbx.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = sbx.Commands.Run(ctx, `cat /mnt/data/hello.txt && echo again > /home/user/out/after.txt`)
	if err != nil || res.Stdout != body {
		t.Fatalf("after resume: %q %v", res.Stdout, err)
	}
	if b, err := os.ReadFile(filepath.Join(objs, "data", "out", "after.txt")); err != nil || string(b) != "again\n" {
		t.Fatalf("written after resume: %q %v", b, err)
	}
	// Unmounting (an empty section) leaves the directories empty.
	if err := sbx.MountS3(ctx, map[string]rayito.S3Mount{}); err != nil {
		t.Fatal(err)
	}
	if res, err := sbx.Commands.Run(ctx, `ls -A /mnt/data /home/user/out`); err != nil || strings.Contains(res.Stdout, "hello.txt") || strings.Contains(res.Stdout, "new.txt") {
		t.Fatalf("after unmount: %q %v", res.Stdout, err)
	}

	// A bucket outside the allow-list: a typed error, and no sandbox.
	_, err = rayito.Create(ctx, p.opts(rayito.WithMounts(map[string]rayito.S3Mount{"/mnt/x": {Bucket: "other-bucket"}}))...)
	var me *rayito.MountError
	if !errors.As(err, &me) || me.Code != rayito.MountNotAllowed || me.Path != "/mnt/x" {
		t.Fatalf("not allowed: %v", err)
	}
}

// TestS3MountSymlinkedPath: a path through a symbolic link the sandbox's
// code made is invalid_path (the mounts are configured again on a running
// sandbox, as WithMounts does at create).
func TestS3MountSymlinkedPath(t *testing.T) {
	if !isRoot() {
		t.Skip("S3 mounts need the root platform")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse on this machine")
	}
	t.Setenv("RAYITO_ALLOWED_MOUNT_BUCKETS", localplatform.DefaultBucket)
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbx := p.create(ctx)
	defer sbx.Kill(ctx)
	if _, err := sbx.Commands.Run(ctx, `ln -s /etc /home/user/etc`); err != nil {
		t.Fatal(err)
	}
	err := sbx.MountS3(ctx, map[string]rayito.S3Mount{"/home/user/etc/x": {Bucket: localplatform.DefaultBucket}})
	var me *rayito.MountError
	if !errors.As(err, &me) || me.Code != rayito.MountInvalidPath || me.Path != "/home/user/etc/x" {
		t.Fatalf("symlinked path: %v", err)
	}
	if res, _ := sbx.Commands.Run(ctx, `ls -d /etc/x 2>/dev/null; true`); strings.TrimSpace(res.Stdout) != "" {
		t.Fatal("made a directory through the link")
	}
}
