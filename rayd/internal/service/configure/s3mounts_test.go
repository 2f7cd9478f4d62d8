package configure

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
	"github.com/rayito-dev/rayito/rayd/internal/s3mount"
)

// fakeMounts records what the section asks and reports a state.
type fakeMounts struct {
	mu     sync.Mutex
	got    [][]ps3.Mount
	state  s3mount.Result
	closed bool
}

func (f *fakeMounts) Apply(ctx context.Context, m []ps3.Mount) error {
	if err := ps3.Validate(m); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, m)
	f.state = s3mount.Result{State: s3mount.Pending}
	return nil
}
func (f *fakeMounts) Status() s3mount.Result { f.mu.Lock(); defer f.mu.Unlock(); return f.state }
func (f *fakeMounts) Supported() bool        { return true }
func (f *fakeMounts) Close()                 { f.closed = true }

func s3Section(h *harness, st *raydv1.ConfigureStatusResponse) *raydv1.SectionResult {
	for _, r := range st.Sections {
		if r.Section == raydv1.ConfigSection_CONFIG_SECTION_S3_MOUNTS {
			return r
		}
	}
	h.t.Fatal("no s3 section in the status")
	return nil
}

func TestS3MountsSection(t *testing.T) {
	fm := &fakeMounts{}
	h := newHarness(t, func(o *Options) { o.Mounts = fm })
	const sec = raydv1.ConfigSection_CONFIG_SECTION_S3_MOUNTS
	// The wire's fields reach the manager as they are.
	r := h.configure(&raydv1.ConfigureRequest{S3Mounts: &raydv1.S3MountsConfig{Mounts: []*raydv1.S3Mount{
		{MountPath: "/mnt/data", Bucket: "my-bucket", Prefix: "p/", ReadOnly: true},
		{MountPath: "/home/user/out", Bucket: "my-bucket", AllowOverwrite: true, AllowDelete: true},
	}}}).Results[0]
	wantCode(t, r, sec, raydv1.SectionCode_SECTION_CODE_PENDING, "")
	want := []ps3.Mount{{Path: "/mnt/data", Bucket: "my-bucket", Prefix: "p/", ReadOnly: true},
		{Path: "/home/user/out", Bucket: "my-bucket", AllowOverwrite: true, AllowDelete: true}}
	if len(fm.got) != 1 || len(fm.got[0]) != 2 || fm.got[0][0] != want[0] || fm.got[0][1] != want[1] {
		t.Fatalf("manager got %+v", fm.got)
	}
	// The status follows the mounts.
	wantCode(t, s3Section(h, h.status()), sec, raydv1.SectionCode_SECTION_CODE_PENDING, "")
	fm.mu.Lock()
	fm.state = s3mount.Result{State: s3mount.Mounted}
	fm.mu.Unlock()
	wantCode(t, s3Section(h, h.status()), sec, raydv1.SectionCode_SECTION_CODE_APPLIED, "")
	fm.mu.Lock()
	fm.state = s3mount.Result{State: s3mount.Failed, Class: ps3.ClassIAMDenied, Index: 1}
	fm.mu.Unlock()
	st := s3Section(h, h.status())
	wantCode(t, st, sec, raydv1.SectionCode_SECTION_CODE_FAILED, ps3.ClassIAMDenied)
	if st.Message != "mounts[1]: iam_denied" {
		t.Fatalf("message %q", st.Message)
	}
	// An invalid section names the field, never the value, and leaves
	// the manager alone.
	r = h.configure(&raydv1.ConfigureRequest{S3Mounts: &raydv1.S3MountsConfig{Mounts: []*raydv1.S3Mount{
		{MountPath: "/etc/secret-place", Bucket: "my-bucket"}}}}).Results[0]
	wantCode(t, r, sec, raydv1.SectionCode_SECTION_CODE_INVALID, ClassInvalid)
	if r.Message != "mounts[0].mount_path: not strictly under /mnt/ or /home/user/" || len(fm.got) != 1 {
		t.Fatalf("invalid: %q %d", r.Message, len(fm.got))
	}
	h.s.Close()
	if !fm.closed {
		t.Fatal("Close left the mounts")
	}
}

// The real manager's immediate refusals, through the section.
func TestS3MountsSectionRefusals(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, "helper")
	os.WriteFile(helper, []byte("#!/bin/sh\n"), 0o755)
	m := s3mount.New(s3mount.Options{Root: dir, Helper: helper, FUSEDevice: helper,
		Allow: func() ps3.AllowList { return ps3.ParseAllowList("ok-bucket") }})
	h := newHarness(t, func(o *Options) { o.Mounts = m })
	const sec = raydv1.ConfigSection_CONFIG_SECTION_S3_MOUNTS
	r := h.configure(&raydv1.ConfigureRequest{S3Mounts: &raydv1.S3MountsConfig{Mounts: []*raydv1.S3Mount{
		{MountPath: "/mnt/x", Bucket: "other-bucket", ReadOnly: true}}}}).Results[0]
	wantCode(t, r, sec, raydv1.SectionCode_SECTION_CODE_FAILED, ps3.ClassNotAllowed)
	os.MkdirAll(filepath.Join(dir, "mnt"), 0o755)
	os.Symlink("/", filepath.Join(dir, "mnt/root"))
	r = h.configure(&raydv1.ConfigureRequest{S3Mounts: &raydv1.S3MountsConfig{Mounts: []*raydv1.S3Mount{
		{MountPath: "/mnt/root/etc", Bucket: "ok-bucket", ReadOnly: true}}}}).Results[0]
	wantCode(t, r, sec, raydv1.SectionCode_SECTION_CODE_FAILED, ps3.ClassInvalidPath)
	r = h.configure(&raydv1.ConfigureRequest{S3Mounts: &raydv1.S3MountsConfig{}}).Results[0]
	wantCode(t, r, sec, raydv1.SectionCode_SECTION_CODE_APPLIED, "")
}
