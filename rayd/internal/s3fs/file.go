package s3fs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fileNode is an object (or one being written).
type fileNode struct {
	fs.Inode
	fsys *FS
	key  string

	mu      sync.Mutex
	size    int64
	mtime   time.Time
	etag    string
	writing *writer // the handle writing the file, if any
}

var (
	_ fs.NodeGetattrer = (*fileNode)(nil)
	_ fs.NodeSetattrer = (*fileNode)(nil)
	_ fs.NodeOpener    = (*fileNode)(nil)
)

func (n *fileNode) fileAttr(a *fuse.Attr) {
	mode := uint32(0o644)
	if n.fsys.o.ReadOnly {
		mode = 0o444
	}
	a.Mode = syscall.S_IFREG | mode
	a.Nlink = 1
	a.Uid, a.Gid = n.fsys.o.UID, n.fsys.o.GID
	a.Size = uint64(n.size)
	a.Blocks = (a.Size + 511) / 512
	a.Blksize = 4096
	t := n.mtime
	a.SetTimes(&t, &t, &t)
}

func (n *fileNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fileAttr(&out.Attr)
	return 0
}

func (n *fileNode) Setattr(ctx context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.fsys.refuseChange(); e != 0 {
		return e
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := in.GetMode(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetUID(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetGID(); ok {
		return syscall.EPERM
	}
	if sz, ok := in.GetSize(); ok {
		// Only the truncation of a file being written to what it holds
		// (O_TRUNC on a new or overwritten file).
		// (Without atomic_o_trunc the kernel opens first and truncates
		// after.)
		if n.writing == nil || int64(sz) != n.size {
			return syscall.EPERM
		}
		n.writing.truncated = true
	}
	n.fileAttr(&out.Attr)
	return 0
}

func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	acc := flags & syscall.O_ACCMODE
	if acc == syscall.O_RDONLY {
		n.mu.Lock()
		busy := n.writing != nil
		size, etag := n.size, n.etag
		n.mu.Unlock()
		if busy {
			return nil, 0, syscall.EBUSY
		}
		return &reader{fsys: n.fsys, key: n.key, size: size, etag: etag}, fuse.FOPEN_KEEP_CACHE, 0
	}
	if e := n.fsys.refuseChange(); e != 0 {
		return nil, 0, e
	}
	if acc != syscall.O_WRONLY || flags&syscall.O_APPEND != 0 {
		return nil, 0, syscall.EPERM // no random writes, no appends
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.writing != nil {
		return nil, 0, syscall.EBUSY
	}
	// An existing file is replaced only when truncated: with O_TRUNC
	// (the kernel truncates right after this open) or a write from 0.
	if !n.fsys.o.AllowOverwrite {
		return nil, 0, syscall.EPERM
	}
	w, e := n.fsys.newWriter(n.key)
	if e != 0 {
		return nil, 0, e
	}
	w.node, w.replacing = n, true
	w.truncated = flags&syscall.O_TRUNC != 0
	n.writing, n.size, n.mtime = w, 0, time.Now()
	return w, fuse.FOPEN_DIRECT_IO, 0
}

// reader reads an object by ranged GETs, keeping the last window.
type reader struct {
	fsys *FS
	key  string
	size int64
	etag string

	mu  sync.Mutex
	off int64
	buf []byte
}

var _ fs.FileReader = (*reader)(nil)

func (r *reader) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= r.size || len(dest) == 0 {
		return fuse.ReadResultData(nil), 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if end := r.off + int64(len(r.buf)); off >= r.off && off < end && (off+int64(len(dest)) <= end || end == r.size) {
		b := r.buf[off-r.off:]
		if len(b) > len(dest) {
			b = b[:len(dest)]
		}
		return fuse.ReadResultData(b), 0
	}
	n := max(int64(len(dest)), ReadAhead)
	end := min(off+n, r.size) - 1
	in := &s3.GetObjectInput{Bucket: &r.fsys.o.Bucket, Key: &r.key, Range: ptr("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(end, 10))}
	if r.etag != "" {
		in.IfMatch = &r.etag
	}
	out, err := r.fsys.api.GetObject(ctx, in)
	if err != nil {
		return nil, Errno(err)
	}
	defer out.Body.Close()
	buf := make([]byte, end-off+1)
	got, err := io.ReadFull(out.Body, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, syscall.EIO
	}
	r.off, r.buf = off, buf[:got]
	b := r.buf
	if len(b) > len(dest) {
		b = b[:len(dest)]
	}
	return fuse.ReadResultData(b), 0
}

// writer uploads a file written sequentially: parts of PartSize, the
// last one (or the whole file) when it is flushed.
type writer struct {
	fsys *FS
	key  string
	node *fileNode

	mu      sync.Mutex
	buf     bytes.Buffer
	written int64
	upload  *string
	parts   []types.CompletedPart
	done    bool
	failed  syscall.Errno
	// replacing: the file exists; it is uploaded only once truncated
	// (or written from 0), so an open without O_TRUNC changes nothing.
	replacing, truncated bool
	released             bool
}

var (
	_ fs.FileWriter   = (*writer)(nil)
	_ fs.FileFlusher  = (*writer)(nil)
	_ fs.FileReleaser = (*writer)(nil)
	_ fs.FileFsyncer  = (*writer)(nil)
)

// newWriter takes one of the MaxWriters slots.
func (f *FS) newWriter(key string) (*writer, syscall.Errno) {
	select {
	case f.writers <- struct{}{}:
	default:
		return nil, syscall.ENFILE
	}
	return &writer{fsys: f, key: key}, 0
}

func (w *writer) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != 0 {
		return 0, w.failed
	}
	if w.done {
		return 0, syscall.EBADF
	}
	if off != w.written {
		return 0, syscall.EINVAL // sequential writes only
	}
	for rest := data; len(rest) > 0; {
		n := min(len(rest), PartSize-w.buf.Len())
		w.buf.Write(rest[:n])
		rest = rest[n:]
		if w.buf.Len() == PartSize {
			if e := w.uploadPart(ctx); e != 0 {
				w.fail(ctx, e)
				return 0, e
			}
		}
	}
	w.written += int64(len(data))
	w.node.mu.Lock()
	w.node.size = w.written
	w.node.mu.Unlock()
	return uint32(len(data)), 0
}

// uploadPart sends the buffer as the next part (starting the multipart
// upload on the first).
func (w *writer) uploadPart(ctx context.Context) syscall.Errno {
	b := &w.fsys.o.Bucket
	if w.upload == nil {
		out, err := w.fsys.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: &w.key})
		if err != nil {
			return Errno(err)
		}
		w.upload = out.UploadId
	}
	num := int32(len(w.parts) + 1)
	out, err := w.fsys.api.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: &w.key, UploadId: w.upload, PartNumber: &num,
		Body: bytes.NewReader(w.buf.Bytes()), ContentLength: ptr(int64(w.buf.Len()))})
	if err != nil {
		return Errno(err)
	}
	w.parts = append(w.parts, types.CompletedPart{ETag: out.ETag, PartNumber: &num})
	w.buf.Reset()
	return 0
}

// fail aborts a multipart upload and keeps e for later calls.
func (w *writer) fail(ctx context.Context, e syscall.Errno) {
	w.failed = e
	if w.upload != nil {
		_, _ = w.fsys.api.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: &w.fsys.o.Bucket, Key: &w.key, UploadId: w.upload})
		w.upload = nil
	}
	w.buf = bytes.Buffer{}
}

// finish uploads what is left: the file is visible from then on.
func (w *writer) finish(ctx context.Context) syscall.Errno {
	if w.failed != 0 {
		return w.failed
	}
	if w.done {
		return 0
	}
	if w.replacing && !w.truncated && w.written == 0 {
		return 0 // opened without O_TRUNC and never written: unchanged
	}
	ctx = context.WithoutCancel(ctx) // a close interrupted must still upload or abort
	b := &w.fsys.o.Bucket
	var etag *string
	if w.upload == nil {
		out, err := w.fsys.api.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: &w.key, Body: bytes.NewReader(w.buf.Bytes()), ContentLength: ptr(int64(w.buf.Len()))})
		if err != nil {
			w.fail(ctx, Errno(err))
			return w.failed
		}
		etag = out.ETag
	} else {
		if w.buf.Len() > 0 {
			if e := w.uploadPart(ctx); e != 0 {
				w.fail(ctx, e)
				return e
			}
		}
		out, err := w.fsys.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: &w.key, UploadId: w.upload,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts}})
		if err != nil {
			w.fail(ctx, Errno(err))
			return w.failed
		}
		etag = out.ETag
	}
	w.done = true
	w.buf = bytes.Buffer{}
	w.node.mu.Lock()
	w.node.etag = deref(etag)
	w.node.mtime = time.Now()
	w.node.mu.Unlock()
	return 0
}

// Flush (each close of a descriptor) uploads the file once something
// was written: a close before the first write (a shell's dup2 and close
// of the descriptor it opened) leaves it open for writing, and Release
// uploads a file closed without any write. A write after the upload is
// EBADF. The upload's outcome is close's.
func (w *writer) Flush(ctx context.Context) syscall.Errno {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written == 0 && !w.done && w.failed == 0 {
		return 0
	}
	return w.finish(ctx)
}

// Fsync cannot make a partial object durable: it is a no-op, like
// mount-s3's before close.
func (w *writer) Fsync(ctx context.Context, flags uint32) syscall.Errno { return 0 }

// Release frees the writer's slot; an upload never flushed is finished
// (or aborted) here.
func (w *writer) Release(ctx context.Context) syscall.Errno {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.released {
		return 0
	}
	w.released = true
	e := w.finish(ctx)
	w.node.mu.Lock()
	if w.node.writing == w {
		w.node.writing = nil
	}
	w.node.mu.Unlock()
	<-w.fsys.writers
	return e
}
