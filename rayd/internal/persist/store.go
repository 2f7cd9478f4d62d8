package persist

import (
	"context"
	"errors"
	"io"
)

// Errors of the object store. Messages never carry a bucket, a key, a URL
// or the store's own message.
var (
	// ErrObjectNotFound: no such object.
	ErrObjectNotFound = errors.New("persist: no such object")
	// ErrNoCredentials: rayd has no credentials (no execution role).
	ErrNoCredentials = errors.New("persist: no credentials for the object store (the sandbox has no execution role)")
	// ErrStorageDenied: the store refused rayd's credentials for this
	// bucket or key.
	ErrStorageDenied = errors.New("persist: the object store denied access")
	// ErrStorageUnavailable: the store could not be reached, or failed.
	ErrStorageUnavailable = errors.New("persist: the object store is unavailable")
)

// Part is an uploaded part of a multipart upload.
type Part struct {
	Number int32
	ETag   string
}

// Store is the object store as persistence uses it: one bucket's objects,
// read whole and written whole or in parts. Implementations map their
// errors onto the sentinels above.
type Store interface {
	// Get opens an object; size is its length.
	Get(ctx context.Context, bucket, key string) (body io.ReadCloser, size int64, err error)
	// Put writes a small object in one request.
	Put(ctx context.Context, bucket, key string, body []byte, contentType string) error
	// CreateMultipart starts a multipart upload.
	CreateMultipart(ctx context.Context, bucket, key, contentType string) (uploadID string, err error)
	// UploadPart uploads part number n (1-based).
	UploadPart(ctx context.Context, bucket, key, uploadID string, n int32, body []byte) (Part, error)
	// CompleteMultipart assembles the parts, in order, into the object.
	CompleteMultipart(ctx context.Context, bucket, key, uploadID string, parts []Part) error
	// AbortMultipart discards an upload and its parts.
	AbortMultipart(ctx context.Context, bucket, key, uploadID string) error
}

// Stores gives the Store of a region ("" is the sandbox's own).
type Stores interface {
	Store(ctx context.Context, region string) (Store, error)
}
