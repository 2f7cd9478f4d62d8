// Package s3fs is the file system of rayito's mount helper
// (cmd/rayito-mount-s3, package mounts3): a bucket's prefix served over
// FUSE with the semantics of AWS's mount-s3.
//
//   - Directories are key prefixes ("a/b/" holds "a/b/c"); a directory made
//     with mkdir exists only in this process until a file is written in
//     it.
//   - Reads are ranged GETs, with a read-ahead window per open file.
//   - New files are written sequentially (a write elsewhere than at the end
//     is EINVAL) and uploaded when closed: up to PartSize in one PUT,
//     larger ones as a multipart upload of PartSize parts, so memory stays
//     at one part per open file and at most MaxWriters files are written
//     at once (ENFILE beyond). A file being written is visible to nobody
//     until it is closed.
//   - An existing file is replaced only with AllowOverwrite, and only when
//     opened with O_TRUNC; deleted only with AllowDelete; otherwise EPERM.
//   - rename, link, symlink, mknod, chmod and chown are EPERM (ENOTSUP for
//     rename's flags); timestamps are accepted and ignored.
//   - A ReadOnly file system refuses every change with EROFS.
//
// Nothing here logs a key, a bucket or file contents.
package s3fs

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// API is the part of the S3 client the file system uses (*s3.Client).
type API interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(ctx context.Context, in *s3.UploadPartInput, optFns ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

// Sizes of the file system's buffers.
const (
	// PartSize is the upload buffer of a file being written and the size
	// of a multipart upload's parts.
	PartSize = 8 << 20
	// ReadAhead is the least a GET of an open file asks for.
	ReadAhead = 1 << 20
	// MaxWriters bounds the files written at once.
	MaxWriters = 16
)

// Options configure the file system.
type Options struct {
	Bucket string
	// Prefix is the key prefix mounted ("" or ending in '/').
	Prefix         string
	ReadOnly       bool
	AllowOverwrite bool
	AllowDelete    bool
	// UID and GID own every file and directory.
	UID, GID uint32
}

// FS is the mounted file system's shared state.
type FS struct {
	api     API
	o       Options
	writers chan struct{}
	started time.Time
}

// New returns the root directory of the file system of o over api, for
// fs.Mount.
func New(api API, o Options) fs.InodeEmbedder {
	f := &FS{api: api, o: o, writers: make(chan struct{}, MaxWriters), started: time.Now()}
	return &dirNode{fsys: f, prefix: o.Prefix}
}

// MountOptions are the go-fuse options the helper mounts with: short
// caches (others may change the bucket), no xattrs.
func MountOptions() *fs.Options {
	sec := time.Second
	return &fs.Options{
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NegativeTimeout: &sec,
		MountOptions: fuse.MountOptions{
			FsName:        "rayito-mount-s3",
			Name:          "s3",
			DisableXAttrs: true,
			MaxBackground: 16,
		},
	}
}

// Errno maps an S3 client error to an errno: 403 EACCES, 404 ENOENT,
// 412 ESTALE, cancellation EINTR, anything else EIO.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if errors.Is(err, context.Canceled) {
		return syscall.EINTR
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusForbidden:
			return syscall.EACCES
		case http.StatusNotFound:
			return syscall.ENOENT
		case http.StatusPreconditionFailed:
			return syscall.ESTALE
		}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AccessDenied", "Forbidden":
			return syscall.EACCES
		case "NoSuchKey", "NotFound", "NoSuchBucket":
			return syscall.ENOENT
		}
	}
	return syscall.EIO
}

// Class says why a check of the bucket failed: "not_found" (no such
// bucket), "iam_denied" (403), "network" (no answer: S3, the metadata
// service or the credentials could not be reached) or "failed".
func Class(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket" {
		return "not_found"
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusForbidden:
			return "iam_denied"
		case http.StatusNotFound:
			return "not_found"
		case http.StatusMovedPermanently, http.StatusBadRequest:
			return "failed"
		}
		if re.HTTPStatusCode() >= 500 {
			return "network"
		}
		return "failed"
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return "network"
	}
	// Credentials that could not be retrieved, a resolver failure...
	return "network"
}

// Check asks S3 for one key under the mount's prefix: what the role may
// not list or a bucket that does not exist fails here, before the mount
// is served.
func Check(ctx context.Context, api API, o Options) error {
	one := int32(1)
	_, err := api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &o.Bucket, Prefix: &o.Prefix, MaxKeys: &one})
	if noSuchKey(err) {
		return nil
	}
	return err
}

// noSuchKey reports a listing that found no key: S3 answers an empty
// list, some S3-compatible stores NoSuchKey for a prefix without objects.
func noSuchKey(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey"
}

// list is ListObjectsV2. An S3-compatible store that answers a delimited
// listing of a prefix without objects with a 404 (gofakes3's file
// backend, the local platform's store) gets the same listing without the
// delimiter: when that succeeds, the prefix is empty.
func (f *FS) list(ctx context.Context, in *s3.ListObjectsV2Input) (*s3.ListObjectsV2Output, error) {
	out, err := f.api.ListObjectsV2(ctx, in)
	if err == nil || in.Delimiter == nil || Errno(err) != syscall.ENOENT {
		if noSuchKey(err) {
			return &s3.ListObjectsV2Output{}, nil
		}
		return out, err
	}
	one := int32(1)
	plain, perr := f.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: in.Bucket, Prefix: in.Prefix, MaxKeys: &one})
	if perr != nil || len(plain.Contents) > 0 {
		return nil, err
	}
	return &s3.ListObjectsV2Output{}, nil
}

func ptr[T any](v T) *T { return &v }
