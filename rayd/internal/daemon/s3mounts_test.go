package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
	"github.com/rayito-dev/rayito/rayd/internal/s3mount"
)

// The allow-list is rayd's environment and the template's variables;
// rayd's who does not mount (not root, rootless) has no manager.
func TestS3MountsAllowList(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{AllowedMountBuckets: "env-bucket", MountHelper: filepath.Join(dir, "none"), FUSEDevice: filepath.Join(dir, "none")}
	tmpl := &ptemplate.Runtime{Envs: map[string]string{ps3.AllowEnv: "tmpl-bucket"}}
	d := &Daemon{privileged: true}
	d.wireS3Mounts(cfg, tmpl, slog.New(slog.DiscardHandler))
	if d.mounts == nil || d.mounts.Supported() {
		t.Fatalf("manager %v", d.mounts)
	}
	for bucket, want := range map[string]string{"env-bucket": ps3.ClassHelperMissing, "tmpl-bucket": ps3.ClassHelperMissing, "other-bucket": ps3.ClassNotAllowed} {
		err := d.mounts.Apply(context.Background(), []ps3.Mount{{Path: "/mnt/x", Bucket: bucket, ReadOnly: true}})
		var e *s3mount.Error
		if !errors.As(err, &e) || e.Class != want {
			t.Errorf("%s: %v, want %s", bucket, err, want)
		}
	}
	for _, c := range []struct {
		priv      bool
		isolation string
	}{{false, ""}, {true, "rootless"}} {
		d := &Daemon{privileged: c.priv}
		d.wireS3Mounts(Config{Isolation: c.isolation, AllowedMountBuckets: "env-bucket"}, nil, slog.New(slog.DiscardHandler))
		if d.mounts != nil {
			t.Errorf("a manager with privileged=%v isolation=%q", c.priv, c.isolation)
		}
	}
}

func TestS3MountsFlags(t *testing.T) {
	env := map[string]string{ps3.AllowEnv: "a-bucket,b-bucket"}
	cfg, err := ParseFlags([]string{"-mount-helper", "/usr/local/bin/rayito-mount-s3", "-fuse-device", "/dev/rayito-fuse/fuse"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MountHelper != "/usr/local/bin/rayito-mount-s3" || cfg.FUSEDevice != "/dev/rayito-fuse/fuse" || cfg.AllowedMountBuckets != "a-bucket,b-bucket" {
		t.Fatalf("config %+v", cfg)
	}
	cfg, err = ParseFlags(nil, func(string) string { return "" }, io.Discard)
	if err != nil || cfg.MountHelper != s3mount.DefaultHelper || cfg.FUSEDevice != "/dev/fuse" || cfg.AllowedMountBuckets != "" {
		t.Fatalf("defaults %+v %v", cfg, err)
	}
}
