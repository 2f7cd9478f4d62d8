package e2b

import (
	"context"
	"errors"
	"io"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// EntryInfo describes a file or directory (E2B's EntryInfo).
type EntryInfo = rayito.Entry

// WriteEntry is one file of WriteFiles.
type WriteEntry = rayito.WriteEntry

// FilesystemEvent is one change under a watched directory (E2B's
// FilesystemEvent: Name and Op, "create", "write", "remove", "rename" or
// "chmod").
type FilesystemEvent = rayito.FileEvent

// Filesystem reads and writes files in the sandbox (E2B's sandbox.files).
// Relative paths are under the user's home directory.
type Filesystem struct{ sbx *rayito.Sandbox }

// Read returns a file's content as text (E2B's files.read).
func (f *Filesystem) Read(ctx context.Context, path string) (string, error) {
	b, err := f.sbx.Files.Read(ctx, path)
	return string(b), wrap(err)
}

// ReadBytes returns a file's content (E2B's read with format "bytes").
func (f *Filesystem) ReadBytes(ctx context.Context, path string) ([]byte, error) {
	b, err := f.sbx.Files.Read(ctx, path)
	return b, wrap(err)
}

// ReadStream streams a file's content (E2B's read with format "stream").
func (f *Filesystem) ReadStream(ctx context.Context, path string) (io.ReadCloser, error) {
	r, err := f.sbx.Files.ReadStream(ctx, path)
	return r, wrap(err)
}

// Write writes a file atomically, making its parents (E2B's files.write).
func (f *Filesystem) Write(ctx context.Context, path string, data []byte) (*EntryInfo, error) {
	e, err := f.sbx.Files.Write(ctx, path, data)
	return e, wrap(err)
}

// WriteFiles writes several files (E2B's files.write with an array).
func (f *Filesystem) WriteFiles(ctx context.Context, files []WriteEntry) ([]EntryInfo, error) {
	es, err := f.sbx.Files.WriteMany(ctx, files)
	return es, wrap(err)
}

// List lists a directory down to depth levels (E2B's files.list; depth 1
// is the directory itself).
func (f *Filesystem) List(ctx context.Context, path string, depth int) ([]EntryInfo, error) {
	es, err := f.sbx.Files.List(ctx, path, max(depth, 1))
	return es, wrap(err)
}

// Exists reports whether path exists.
func (f *Filesystem) Exists(ctx context.Context, path string) (bool, error) {
	ok, err := f.sbx.Files.Exists(ctx, path)
	return ok, wrap(err)
}

// GetInfo describes path (E2B's files.getInfo).
func (f *Filesystem) GetInfo(ctx context.Context, path string) (*EntryInfo, error) {
	e, err := f.sbx.Files.Stat(ctx, path)
	return e, wrap(err)
}

// MakeDir makes a directory and its parents: false when it existed
// already (E2B's files.makeDir).
func (f *Filesystem) MakeDir(ctx context.Context, path string) (bool, error) {
	_, err := f.sbx.Files.MakeDir(ctx, path)
	if errors.Is(err, rayito.ErrAlreadyExists) {
		return false, nil
	}
	return err == nil, wrap(err)
}

// Rename moves oldPath to newPath (E2B's files.rename).
func (f *Filesystem) Rename(ctx context.Context, oldPath, newPath string) (*EntryInfo, error) {
	e, err := f.sbx.Files.Rename(ctx, oldPath, newPath)
	return e, wrap(err)
}

// Remove removes a file or a directory with its contents (E2B's
// files.remove). As on E2B, removing a path that does not exist succeeds.
func (f *Filesystem) Remove(ctx context.Context, path string) error {
	err := f.sbx.Files.Remove(ctx, path, true)
	if errors.Is(err, rayito.ErrNotFound) {
		return nil
	}
	return wrap(err)
}

// WatchDir watches a directory (E2B's files.watchDir), recursively when
// asked, and calls onEvent with each change until Stop or ctx ends.
func (f *Filesystem) WatchDir(ctx context.Context, path string, onEvent func(FilesystemEvent), recursive bool) (*WatchHandle, error) {
	var opts []rayito.WatchOption
	if recursive {
		opts = append(opts, rayito.Recursive())
	}
	w, err := f.sbx.Files.Watch(ctx, path, opts...)
	if err != nil {
		return nil, wrap(err)
	}
	h := &WatchHandle{w: w, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			ev, err := w.Next()
			if err != nil {
				return
			}
			if !ev.Resynced {
				onEvent(ev)
			}
		}
	}()
	return h, nil
}

// WatchHandle is a running watch (E2B's WatchHandle).
type WatchHandle struct {
	w    *rayito.Watcher
	done chan struct{}
}

// Stop ends the watch; onEvent is not called after it returns.
func (h *WatchHandle) Stop() error {
	err := h.w.Close()
	<-h.done
	return err
}
