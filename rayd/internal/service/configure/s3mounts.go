package configure

import (
	"context"
	"errors"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
	"github.com/rayito-dev/rayito/rayd/internal/s3mount"
)

// Mounts is the S3 mounts' manager (s3mount.Manager).
type Mounts interface {
	// Apply replaces the mounts (see s3mount.Manager.Apply).
	Apply(ctx context.Context, mounts []ps3.Mount) error
	// Status is the section's state.
	Status() s3mount.Result
	// Supported reports whether the helper and /dev/fuse exist.
	Supported() bool
	// Close unmounts everything.
	Close()
}

// S3MountsSupported is Health's features.s3_mounts.
func (s *Service) S3MountsSupported() bool {
	return s.opts.Mounts != nil && s.opts.Mounts.Supported()
}

// applyS3Mounts applies the S3 mounts section: INVALID (the mounts in
// force stay) when it breaks a rule; FAILED with a class when it cannot
// start (not_allowed, invalid_path, helper_missing: nothing stays
// mounted); otherwise PENDING until every mount answers (APPLIED) or one
// fails (FAILED), as ConfigureStatus reports. An empty section unmounts
// everything.
func (s *Service) applyS3Mounts(ctx context.Context, m *raydv1.S3MountsConfig) *raydv1.SectionResult {
	const sec = raydv1.ConfigSection_CONFIG_SECTION_S3_MOUNTS
	if s.opts.Mounts == nil {
		return unsupported(sec, ClassNotBuilt, "S3 mounts are not available in this rayd (they need rayd as root, a mount helper and /dev/fuse)")
	}
	mounts := make([]ps3.Mount, 0, len(m.GetMounts()))
	for _, x := range m.GetMounts() {
		mounts = append(mounts, ps3.Mount{Path: x.GetMountPath(), Bucket: x.GetBucket(), Prefix: x.GetPrefix(),
			ReadOnly: x.GetReadOnly(), AllowOverwrite: x.GetAllowOverwrite(), AllowDelete: x.GetAllowDelete()})
	}
	err := s.opts.Mounts.Apply(ctx, mounts)
	var ve *ps3.Error
	if errors.As(err, &ve) && errors.Is(err, ps3.ErrInvalid) {
		return invalid(sec, ve.Error())
	}
	var me *s3mount.Error
	if errors.As(err, &me) {
		return mountFailed(me.Class, me.Error())
	}
	if err != nil {
		return failed(sec, ps3.ClassFailed, "the mounts could not be started")
	}
	return s3Result(s.opts.Mounts.Status())
}

// s3Result is the section's result for the manager's state r.
func s3Result(r s3mount.Result) *raydv1.SectionResult {
	const sec = raydv1.ConfigSection_CONFIG_SECTION_S3_MOUNTS
	switch r.State {
	case s3mount.Mounted:
		return &raydv1.SectionResult{Section: sec, Code: raydv1.SectionCode_SECTION_CODE_APPLIED}
	case s3mount.Failed:
		return mountFailed(r.Class, (&s3mount.Error{Class: r.Class, Index: r.Index}).Error())
	}
	return &raydv1.SectionResult{Section: sec, Code: raydv1.SectionCode_SECTION_CODE_PENDING}
}

func mountFailed(class, msg string) *raydv1.SectionResult {
	return &raydv1.SectionResult{Section: raydv1.ConfigSection_CONFIG_SECTION_S3_MOUNTS,
		Code: raydv1.SectionCode_SECTION_CODE_FAILED, ErrorClass: class, Message: msg}
}

// s3Status refreshes r, the section's last result, from the mounts'
// live state: an INVALID or UNSUPPORTED answer stays as it was.
func (s *Service) s3Status(r *raydv1.SectionResult) *raydv1.SectionResult {
	switch r.Code {
	case raydv1.SectionCode_SECTION_CODE_PENDING, raydv1.SectionCode_SECTION_CODE_APPLIED, raydv1.SectionCode_SECTION_CODE_FAILED:
		if s.opts.Mounts != nil {
			return s3Result(s.opts.Mounts.Status())
		}
	}
	return r
}

// closeMounts unmounts everything (rayd stops: terminate).
func (s *Service) closeMounts() {
	if s.opts.Mounts != nil {
		s.opts.Mounts.Close()
	}
}
