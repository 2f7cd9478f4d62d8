package rayito

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/proto/runpayload"
)

// S3Prefix is where a sandbox's HOME persists:
// s3://Bucket/Prefix/Name/home.tar.gz and its manifest.json, in the open
// format of docs/persistence.md.
type S3Prefix struct {
	// Bucket is the S3 bucket; "" on the local platform is its own store's
	// default bucket (rayito-local). Required on AWS.
	Bucket string
	// Prefix is the key prefix the sandbox is bound to (say, one per
	// tenant): it can checkpoint and restore under it and nowhere else.
	Prefix string
	// Name is the checkpoint's name under Prefix; "" is "default".
	Name string
	// Region is the bucket's region; "" is the sandbox's own.
	Region string
}

// String is the location as an s3:// URL (without the name).
func (p S3Prefix) String() string {
	return "s3://" + p.Bucket + "/" + strings.TrimSuffix(p.Prefix, "/")
}

// ParseS3Prefix reads "s3://bucket/prefix" (the CLI's form); the bucket
// may be empty ("s3:///prefix") for the local platform's default bucket.
func ParseS3Prefix(s string) (S3Prefix, error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return S3Prefix{}, newError(ReasonInvalidArgument, "a persistence location is s3://BUCKET/PREFIX")
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	return S3Prefix{Bucket: bucket, Prefix: prefix}, nil
}

// WithPersist makes the sandbox's HOME persist at p. The sandbox is bound
// to p's bucket and prefix: its checkpoints and restores stay inside them
// (rayd refuses others, whoever asks). Create restores the checkpoint p
// names, when there is one, before it returns the sandbox (a new name
// starts empty). On AWS the sandbox needs an execution role
// (WithExecutionRole) that may read and write under the prefix
// (infra/iam.yaml's persistence grant); rayd uses it, the sandbox's code
// cannot. On the local platform its own S3-compatible store and
// credentials are used.
func WithPersist(p S3Prefix) Option {
	return sandboxOption(func(c *config) {
		cp := p
		c.persist = &cp
	})
}

// persistPlan checks WithPersist's location for the backend and fills the
// local platform's default bucket.
func persistPlan(cfg *config) (*runpayload.Persist, error) {
	p := cfg.persist
	if p == nil {
		return nil, nil
	}
	if p.Bucket == "" {
		if cfg.backend != BackendLocal {
			return nil, newError(ReasonInvalidArgument, "persistence on AWS needs a bucket (S3Prefix.Bucket)")
		}
		p.Bucket = localplatform.DefaultBucket
	}
	if cfg.backend == BackendAWS && cfg.aws.executionRole == "" {
		return nil, newError(ReasonInvalidArgument, "persistence on AWS needs an execution role (WithExecutionRole) that may read and write the prefix: rayd checkpoints with its credentials")
	}
	if len(p.Bucket) < runpayload.MinBucketLen || len(p.Bucket) > runpayload.MaxBucketLen || !runpayload.ValidBucketChars(p.Bucket) {
		return nil, newError(ReasonInvalidArgument, fmt.Sprintf("invalid persistence bucket name: %d to %d characters of a-z, 0-9, '.' and '-'", runpayload.MinBucketLen, runpayload.MaxBucketLen))
	}
	if len(p.Prefix) > runpayload.MaxKeyPrefixLen {
		return nil, newError(ReasonInvalidArgument, fmt.Sprintf("the persistence prefix is longer than %d bytes", runpayload.MaxKeyPrefixLen))
	}
	return &runpayload.Persist{Bucket: p.Bucket, KeyPrefix: p.Prefix}, nil
}

// PersistProgress is how far a checkpoint or restore is.
type PersistProgress struct {
	// Bytes of the archive uploaded (checkpoint) or downloaded (restore).
	Bytes int64
	// Total is the archive's size when known (restore), else 0.
	Total int64
	Files uint64
}

// PersistSkipped counts what a checkpoint or restore left out.
type PersistSkipped struct {
	// Special: FIFOs, sockets and devices. HardLinks: hard links of an
	// archive (a checkpoint stores every file in full). Unreadable: what
	// the user cannot read. OtherDevice: mount points. Conflicts: entries
	// a restore could not place (a link or a file in the way of a
	// directory on disk). Other: other kinds of archive entries.
	// ModesSanitized: setuid, setgid or sticky bits dropped. Changed:
	// files that changed size while read.
	Special, HardLinks, Unreadable, OtherDevice, Conflicts, Other, ModesSanitized, Changed uint64
}

// CheckpointInfo describes a finished checkpoint or restore.
type CheckpointInfo struct {
	// Name is the checkpoint's name under its prefix.
	Name string
	// SHA256 is the archive's (as its manifest says).
	SHA256 string
	// Bytes is the archive's size.
	Bytes                        int64
	Files, Directories, Symlinks uint64
	// ContentBytes is the size of the files' contents.
	ContentBytes uint64
	Skipped      PersistSkipped
	Duration     time.Duration
}

// PersistRequest is a checkpoint or restore with every option; Checkpoint
// and Restore are the usual shortcuts.
type PersistRequest struct {
	// Location: nil is the sandbox's own (WithPersist, or the one it is
	// bound to when it was connected to).
	Location *S3Prefix
	// Excludes are patterns of HOME to leave out (checkpoint only; at most
	// 64): `path.Match` globs against the path relative to HOME when they
	// hold a "/", else against every base name; a trailing "/" matches
	// directories only. Caches (~/.cache, __pycache__) and kernels'
	// runtime files are always left out.
	Excludes []string
	// Progress, when set, is called as the archive moves.
	Progress func(PersistProgress)
}

// Checkpoint archives the sandbox's HOME to its persistence location
// (WithPersist), leaving out excludes (see PersistRequest.Excludes). rayd
// does it with the execution role's credentials: the archive, then its
// manifest with its sha256, written last. Errors: ErrBusy while another
// checkpoint or restore runs, ErrPermissionDenied outside the location
// the sandbox is bound to, ErrStorage when the store refuses or fails,
// ErrInvalidArgument for a sandbox without persistence.
func (s *Sandbox) Checkpoint(ctx context.Context, excludes ...string) (*CheckpointInfo, error) {
	return s.CheckpointWith(ctx, PersistRequest{Excludes: excludes})
}

// Restore extracts the sandbox's checkpoint into HOME (adding and
// replacing files; nothing is removed): the archive is checked against
// its manifest's sha256 before anything is written, only files,
// directories and links are made, as the sandbox's user. ErrNotFound when
// there is no checkpoint; ErrChecksumMismatch and ErrUnsafeArchive when it
// cannot be trusted (nothing is extracted then).
func (s *Sandbox) Restore(ctx context.Context) (*CheckpointInfo, error) {
	return s.RestoreWith(ctx, PersistRequest{})
}

// CheckpointWith is Checkpoint with every option.
func (s *Sandbox) CheckpointWith(ctx context.Context, r PersistRequest) (*CheckpointInfo, error) {
	if len(r.Excludes) > 64 {
		return nil, newError(ReasonInvalidArgument, "at most 64 exclude patterns")
	}
	loc, name := s.persistLocation(r.Location)
	stream, err := s.dp.fs.Checkpoint(ctx, connect.NewRequest(&raydv1.CheckpointRequest{Location: loc, Name: name, Exclude: slices.Clone(r.Excludes)}))
	if err != nil {
		return nil, rpcErr("checkpoint", err)
	}
	return persistStream("checkpoint", stream, r.Progress)
}

// RestoreWith is Restore with every option (Excludes do not apply).
func (s *Sandbox) RestoreWith(ctx context.Context, r PersistRequest) (*CheckpointInfo, error) {
	loc, name := s.persistLocation(r.Location)
	stream, err := s.dp.fs.Restore(ctx, connect.NewRequest(&raydv1.RestoreRequest{Location: loc, Name: name}))
	if err != nil {
		return nil, rpcErr("restore", err)
	}
	return persistStream("restore", stream, r.Progress)
}

// persistLocation is the wire location of loc, else of WithPersist's; nil
// (rayd's binding and the name it last used) for a sandbox connected to.
func (s *Sandbox) persistLocation(loc *S3Prefix) (*raydv1.S3Location, string) {
	if loc == nil {
		loc = s.cfg.persist
	}
	if loc == nil {
		return nil, ""
	}
	bucket := loc.Bucket
	if bucket == "" && s.cfg.backend == BackendLocal {
		bucket = localplatform.DefaultBucket
	}
	out := &raydv1.S3Location{Bucket: bucket, KeyPrefix: loc.Prefix}
	if loc.Region != "" {
		out.Region = &loc.Region
	}
	return out, loc.Name
}

// persistStream reads a Checkpoint or Restore stream to its end.
func persistStream(op string, stream *connect.ServerStreamForClient[raydv1.PersistEvent], progress func(PersistProgress)) (*CheckpointInfo, error) {
	defer stream.Close()
	var total int64
	var streamErr *raydv1.StreamError
	for stream.Receive() {
		switch e := stream.Msg().Event.(type) {
		case *raydv1.PersistEvent_Started:
			total = int64(e.Started.GetBytesTotal())
		case *raydv1.PersistEvent_Progress:
			if progress != nil {
				p := e.Progress
				t := int64(p.GetBytesTotal())
				if t == 0 {
					t = total
				}
				progress(PersistProgress{Bytes: int64(p.GetBytesDone()), Total: t, Files: p.GetFilesDone()})
			}
		case *raydv1.PersistEvent_Error:
			streamErr = e.Error
		case *raydv1.PersistEvent_Done:
			d := e.Done
			k := d.GetSkipped()
			return &CheckpointInfo{
				Name: d.GetName(), SHA256: d.GetSha256(), Bytes: int64(d.GetBytes()),
				Files: d.GetFiles(), Directories: d.GetDirectories(), Symlinks: d.GetSymlinks(), ContentBytes: d.GetContentBytes(),
				Duration: time.Duration(d.GetDurationMs()) * time.Millisecond,
				Skipped: PersistSkipped{Special: k.GetSpecial(), HardLinks: k.GetHardLinks(), Unreadable: k.GetUnreadable(), OtherDevice: k.GetOtherDevice(),
					Conflicts: k.GetConflicts(), Other: k.GetOther(), ModesSanitized: k.GetModesSanitized(), Changed: k.GetChanged()},
			}, nil
		}
	}
	if err := stream.Err(); err != nil {
		return nil, rpcErr(op, err)
	}
	if streamErr != nil {
		// An error event without the call's error (an older rayd).
		return nil, &RPCError{Op: op, Code: Code(streamErr.GetCode()), Reason: reasonOfCode(Code(streamErr.GetCode())), Message: streamErr.GetMessage()}
	}
	return nil, newError(ReasonInternal, "rayito: "+op+": the stream ended without a result")
}

// autoRestore restores the checkpoint WithPersist names into a new
// sandbox; no checkpoint yet is not an error.
func (s *Sandbox) autoRestore(ctx context.Context) error {
	_, err := s.Restore(ctx)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// Reincarnate checkpoints the sandbox (leaving out excludes), creates a
// new one with the options it was created with (which restores the
// checkpoint into it: its HOME carries over, its processes, memory and
// files outside HOME do not), and kills the old one. It needs a sandbox
// made by Create with WithPersist in this process; on an error the old
// sandbox is left running, and a new one that was made is killed.
func (s *Sandbox) Reincarnate(ctx context.Context, excludes ...string) (*Sandbox, error) {
	if s.cfg.persist == nil || s.createOpts == nil {
		return nil, newError(ReasonInvalidArgument, "reincarnate needs a sandbox created with WithPersist by this process (use Checkpoint, then Create with the same options)")
	}
	if _, err := s.Checkpoint(ctx, excludes...); err != nil {
		return nil, err
	}
	n, err := Create(ctx, s.createOpts...)
	if err != nil {
		return nil, err
	}
	if err := s.Kill(ctx); err != nil {
		return n, fmt.Errorf("rayito: reincarnated as %s, but the old sandbox was not killed: %w", n.ID(), err)
	}
	return n, nil
}
