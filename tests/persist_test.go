package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// TestPersistAcrossSandboxes: a file written in HOME of one local sandbox
// appears in a new sandbox created with the same persistence prefix (the
// platform's own store and credentials, the SDK's auto-restore), as do a
// link and modes; caches stay behind; the checkpoint is in the platform's
// store as the open format says; another prefix is refused by the first
// sandbox's rayd; a sandbox created with the same prefix after a restart
// of the platform still finds it.
func TestPersistAcrossSandboxes(t *testing.T) {
	stateDir := t.TempDir()
	p := startPlatform(t, stateDir)
	ctx := context.Background()
	loc := rayito.S3Prefix{Prefix: "tenants/acme", Name: "proj"}
	a, err := rayito.Create(ctx, p.opts(rayito.WithPersist(loc))...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill(ctx)
	script := `set -e
mkdir -p work/src .cache/pip
echo 'print(42)' > work/src/main.py
chmod 0750 work/src/main.py
ln -s work/src/main.py main
echo cached > .cache/pip/blob
mkfifo fifo
`
	if _, err := a.Commands.Run(ctx, script); err != nil {
		t.Fatal(err)
	}
	var progressed int
	info, err := a.CheckpointWith(ctx, rayito.PersistRequest{Progress: func(rayito.PersistProgress) { progressed++ }})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "proj" || info.Files < 1 || info.Symlinks != 1 || info.Skipped.Special != 1 || len(info.SHA256) != 64 || progressed == 0 {
		t.Errorf("checkpoint %+v (progress %d)", info, progressed)
	}
	// The open format, in the platform's store on disk.
	objs := filepath.Join(stateDir, "s3", "buckets", "rayito-local", "tenants", "acme", "proj")
	for _, name := range []string{"home.tar.gz", "manifest.json"} {
		if _, err := os.Stat(filepath.Join(objs, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if man, err := os.ReadFile(filepath.Join(objs, "manifest.json")); err != nil || !strings.Contains(string(man), `"sha256": "`+info.SHA256+`"`) || !strings.Contains(string(man), `"version": 1`) {
		t.Errorf("manifest %s, %v", man, err)
	}
	// Bound: another prefix is refused, even when asked explicitly.
	_, err = a.CheckpointWith(ctx, rayito.PersistRequest{Location: &rayito.S3Prefix{Prefix: "tenants/other"}})
	if !errors.Is(err, rayito.ErrPermissionDenied) || rayito.ReasonOf(err) != rayito.ReasonPolicyDenied {
		t.Errorf("other prefix: %v (%s)", err, rayito.ReasonOf(err))
	}

	b, err := rayito.Create(ctx, p.opts(rayito.WithPersist(loc))...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Kill(ctx)
	res, err := b.Commands.Run(ctx, `cat work/src/main.py; stat -c '%a %U' work/src/main.py; readlink main; ls -a .cache 2>&1 | wc -l; if test -e fifo; then echo fifo; fi`)
	if err != nil {
		t.Fatal(err)
	}
	owner := "user"
	if !isRoot() {
		owner = "" // rootless: the caller's own name
	}
	want := "print(42)\n750 " + owner
	if !strings.HasPrefix(res.Stdout, want) || !strings.Contains(res.Stdout, "\nwork/src/main.py\n") || strings.Contains(res.Stdout, "fifo") {
		t.Errorf("restored HOME:\n%s", res.Stdout)
	}
	if strings.Contains(res.Stdout, "cached") {
		t.Errorf(".cache was carried over")
	}

	// A new name starts empty.
	c, err := rayito.Create(ctx, p.opts(rayito.WithPersist(rayito.S3Prefix{Prefix: "tenants/acme", Name: "fresh"}))...)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Commands.Run(ctx, `test -e work && echo present || echo absent`); err != nil || strings.TrimSpace(res.Stdout) != "absent" {
		t.Errorf("fresh name: %q %v", res.Stdout, err)
	}
	c.Kill(ctx)

	// The store and the sandboxes' credentials survive the platform.
	p.stop(false)
	p = startPlatform(t, stateDir)
	defer p.stop(true)
	b2, err := rayito.Connect(ctx, b.ID(), p.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Commands.Run(ctx, `echo again > work/again`); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Checkpoint(ctx); err != nil { // the bound prefix, the name last used
		t.Fatalf("checkpoint after a platform restart: %v", err)
	}
	d, err := rayito.Create(ctx, p.opts(rayito.WithPersist(loc))...)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Kill(ctx)
	if res, err := d.Commands.Run(ctx, `cat work/again`); err != nil || res.Stdout != "again\n" {
		t.Errorf("after restart: %q %v", res.Stdout, err)
	}
}

// TestPersistReincarnate: Reincarnate checkpoints, creates a successor with
// the same options (its HOME restored) and kills the old sandbox.
func TestPersistReincarnate(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	old, err := rayito.Create(ctx, p.opts(rayito.WithPersist(rayito.S3Prefix{Prefix: "r"}), rayito.WithMetadata(map[string]string{"team": "x"}))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Commands.Run(ctx, `echo kept > kept; mkdir -p skip && echo no > skip/x`); err != nil {
		t.Fatal(err)
	}
	n, err := old.Reincarnate(ctx, "skip/")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Kill(ctx)
	if res, err := n.Commands.Run(ctx, `cat kept; if test -e skip; then echo skip; fi`); err != nil || res.Stdout != "kept\n" {
		t.Errorf("successor: %q %v", res.Stdout, err)
	}
	if _, err := old.Commands.Run(ctx, "true"); err == nil {
		t.Error("the old sandbox still runs commands")
	}
	info, err := n.Info(ctx)
	if err != nil || info.Metadata["team"] != "x" {
		t.Errorf("successor's options: %+v %v", info, err)
	}
}

// TestPersistWithoutLocation: a sandbox made without persistence has no
// location to use.
func TestPersistWithoutLocation(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	s := p.create(ctx)
	defer s.Kill(ctx)
	if _, err := s.Checkpoint(ctx); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Errorf("checkpoint without a location: %v", err)
	}
	// An explicit one works: the platform's store, its default bucket.
	if _, err := s.CheckpointWith(ctx, rayito.PersistRequest{Location: &rayito.S3Prefix{Prefix: "free"}}); err != nil {
		t.Errorf("explicit location: %v", err)
	}
	// A bucket S3 would refuse is refused before anything is made, and
	// said so in the SDK's words, not the payload's.
	for _, b := range []string{"Bad_Bucket", "ab", "a b", "bucket/x"} {
		_, err := rayito.Create(ctx, p.opts(rayito.WithPersist(rayito.S3Prefix{Bucket: b, Prefix: "x"}))...)
		if !errors.Is(err, rayito.ErrInvalidArgument) || !strings.Contains(err.Error(), "invalid persistence bucket name") {
			t.Errorf("bucket %q: %v", b, err)
		}
	}
}
