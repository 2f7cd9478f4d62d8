package rayito

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
)

// S3Mount mounts a bucket's prefix in a new sandbox (WithMounts). The
// sandbox's daemon mounts it with a helper running as a user of its own
// that takes the execution role's credentials from the instance metadata
// service (the local platform's store and metadata service locally):
// nothing the sandbox's code can read holds a credential. The bucket must
// be in the image's RAYITO_ALLOWED_MOUNT_BUCKETS. See docs/s3-mounts.md.
type S3Mount struct {
	// Bucket is the bucket's name (S3's rules, without dots).
	Bucket string
	// Prefix is the key prefix mounted: "" (the whole bucket) or ending
	// in "/".
	Prefix string
	// Writable allows new files (written sequentially, uploaded when
	// closed). The zero value is read-only.
	Writable bool
	// AllowOverwrite lets a writable mount replace files (opened with
	// O_TRUNC); AllowDelete lets it delete them.
	AllowOverwrite bool
	AllowDelete    bool
}

// MaxMounts is the most mounts a sandbox takes.
const MaxMounts = ps3.MaxMounts

// MountWait bounds how long Create waits for the mounts to answer.
const MountWait = 15 * time.Second

// Mount error codes (MountError.Code).
const (
	MountInvalid       = ps3.ClassInvalid       // a rule of WithMounts is broken
	MountInvalidPath   = ps3.ClassInvalidPath   // the path holds a symbolic link or a file
	MountNotAllowed    = ps3.ClassNotAllowed    // the bucket is not in RAYITO_ALLOWED_MOUNT_BUCKETS
	MountHelperMissing = ps3.ClassHelperMissing // the sandbox cannot mount (no helper or FUSE)
	MountNetwork       = ps3.ClassNetwork       // S3 or the metadata service did not answer
	MountIAMDenied     = ps3.ClassIAMDenied     // the execution role may not list the prefix
	MountNotFound      = ps3.ClassNotFound      // no such bucket
	MountTimeout       = ps3.ClassTimeout       // the mounts did not answer within MountWait
	MountFailed        = ps3.ClassFailed        // anything else
)

// MountError is why a sandbox's mounts failed: Code is one of the Mount*
// codes, Path the mount's path ("" when the whole section failed).
// errors.Is matches ErrInvalidArgument for MountInvalid, ErrUnimplemented
// for MountHelperMissing. Its message never holds a bucket or a path.
type MountError struct {
	Code string
	Path string
	msg  string
}

func (e *MountError) Error() string {
	if e.msg != "" {
		return "rayito: s3 mount failed (" + e.Code + "): " + e.msg
	}
	return "rayito: s3 mount failed (" + e.Code + ")"
}

// Is matches the sentinel of the error's code.
func (e *MountError) Is(target error) bool {
	switch e.Code {
	case MountInvalid:
		return target == ErrInvalidArgument
	case MountHelperMissing:
		return target == ErrUnimplemented
	}
	return false
}

// mountsConfig is WithMounts'.
type mountsConfig struct {
	mounts map[string]S3Mount
}

// WithMounts mounts S3 prefixes in a new sandbox: path (under /mnt/ or
// /home/user/, at most MaxMounts, none inside another) -> mount. Create
// waits up to MountWait for every mount to answer; a sandbox whose mounts
// fail is killed and Create returns a *MountError.
func WithMounts(mounts map[string]S3Mount) Option {
	return sandboxOption(func(c *config) { c.mounts = mounts })
}

// mountList is the mounts in path order, checked by the rules rayd
// applies (the allow-list excepted).
func mountList(m map[string]S3Mount) ([]ps3.Mount, error) {
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	out := make([]ps3.Mount, 0, len(m))
	for _, p := range paths {
		x := m[p]
		out = append(out, ps3.Mount{Path: p, Bucket: x.Bucket, Prefix: x.Prefix, ReadOnly: !x.Writable,
			AllowOverwrite: x.AllowOverwrite, AllowDelete: x.AllowDelete})
	}
	if err := ps3.Validate(out); err != nil {
		var e *ps3.Error
		msg := "invalid mounts"
		if errors.As(err, &e) {
			msg = e.Error()
		}
		return nil, &MountError{Code: MountInvalid, msg: msg}
	}
	return out, nil
}

// enableMounts hands the mounts to the sandbox's daemon and waits for
// them (MountS3).
func (s *Sandbox) enableMounts(ctx context.Context, m map[string]S3Mount) error {
	list, err := mountList(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, MountWait)
	defer cancel()
	resp, err := s.dp.config.Configure(ctx, connect.NewRequest(&raydv1.ConfigureRequest{RequestId: newRequestID(), S3Mounts: mountsSection(list)}))
	if err != nil {
		return rpcErr("configure s3 mounts", err)
	}
	return s.waitMounts(ctx, resp.Msg.GetResults(), list)
}

// mountsSection is list's Configure section.
func mountsSection(list []ps3.Mount) *raydv1.S3MountsConfig {
	sec := &raydv1.S3MountsConfig{}
	for _, x := range list {
		// read_only is false on the wire by default: always sent.
		sec.Mounts = append(sec.Mounts, &raydv1.S3Mount{MountPath: x.Path, Bucket: x.Bucket, Prefix: x.Prefix,
			ReadOnly: x.ReadOnly, AllowOverwrite: x.AllowOverwrite, AllowDelete: x.AllowDelete})
	}
	return sec
}

// waitMounts waits, until ctx ends (MountTimeout), for the s3 mounts
// section of results to be applied or to fail: rayd mounts in the
// background and answers PENDING meanwhile.
func (s *Sandbox) waitMounts(ctx context.Context, results []*raydv1.SectionResult, list []ps3.Mount) error {
	var r *raydv1.SectionResult
	for _, x := range results {
		if x.GetSection() == raydv1.ConfigSection_CONFIG_SECTION_S3_MOUNTS {
			r = x
		}
	}
	if r == nil {
		return newError(ReasonInternal, "the sandbox did not answer for its s3 mounts")
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for r.GetCode() == raydv1.SectionCode_SECTION_CODE_PENDING {
		select {
		case <-ctx.Done():
			return &MountError{Code: MountTimeout}
		case <-tick.C:
		}
		st, err := s.dp.config.ConfigureStatus(ctx, connect.NewRequest(&raydv1.ConfigureStatusRequest{}))
		if err != nil {
			if ctx.Err() != nil {
				return &MountError{Code: MountTimeout}
			}
			return rpcErr("s3 mounts status", err)
		}
		for _, x := range st.Msg.GetSections() {
			if x.GetSection() == raydv1.ConfigSection_CONFIG_SECTION_S3_MOUNTS {
				r = x
			}
		}
	}
	return mountResult(r, list)
}

// mountResult is the error of a section's final result.
func mountResult(r *raydv1.SectionResult, list []ps3.Mount) error {
	switch r.GetCode() {
	case raydv1.SectionCode_SECTION_CODE_APPLIED:
		return nil
	case raydv1.SectionCode_SECTION_CODE_INVALID:
		return &MountError{Code: MountInvalid, msg: r.GetMessage()}
	case raydv1.SectionCode_SECTION_CODE_UNSUPPORTED:
		return &MountError{Code: MountHelperMissing, msg: r.GetMessage()}
	}
	code := r.GetErrorClass()
	if !slices.Contains(ps3.Classes, code) {
		code = MountFailed
	}
	e := &MountError{Code: code}
	// rayd's message is "mounts[i]: class": the path is the caller's own.
	msg := r.GetMessage()
	for i, x := range list {
		if len(msg) > 0 && strings.HasPrefix(msg, "mounts["+strconv.Itoa(i)+"]") {
			e.Path = x.Path
		}
	}
	return e
}

// MountS3 replaces the sandbox's S3 mounts with m (empty: unmounts them
// all) and waits up to MountWait for them, as WithMounts does at create;
// a failure leaves no mount and is a *MountError. The sandbox stays.
func (s *Sandbox) MountS3(ctx context.Context, m map[string]S3Mount) error {
	return s.enableMounts(ctx, m)
}
