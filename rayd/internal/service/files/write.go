package files

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

// MaxWriteFiles bounds the files of one Write call (the answer lists them
// all and must fit one message).
const MaxWriteFiles = 1000

// errAborted closes an upload's pipe when the client stream fails: the
// safe layer then removes its temporary file and keeps the old file.
var errAborted = errors.New("upload aborted")

// upload is one file being streamed into safefs.WriteFile through a pipe,
// so that memory stays constant whatever the file's size.
type upload struct {
	pw     *io.PipeWriter
	cancel context.CancelFunc
	done   chan uploadResult
}

type uploadResult struct {
	entry safefs.Entry
	err   error
}

// startUpload starts writing path from the pipe's data.
func (s *Service) startUpload(ctx context.Context, u safefs.User, path string, mode os.FileMode, md map[string]string) *upload {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	up := &upload{pw: pw, cancel: cancel, done: make(chan uploadResult, 1)}
	go func() {
		e, err := s.fs.WriteFile(ctx, u, path, pr, mode, md)
		// Unblock a writer still feeding a failed upload.
		if err != nil {
			pr.CloseWithError(err)
		} else {
			pr.Close()
		}
		up.done <- uploadResult{e, err}
	}()
	return up
}

// write feeds one chunk; on failure it returns the upload's own error.
func (up *upload) write(chunk []byte) error {
	if len(chunk) == 0 {
		return nil
	}
	if _, err := up.pw.Write(chunk); err != nil {
		up.cancel()
		r := <-up.done
		if r.err == nil {
			return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "write failed")
		}
		return r.err
	}
	return nil
}

// finish ends the file's data and waits for the atomic rename.
func (up *upload) finish() (safefs.Entry, error) {
	up.pw.Close()
	r := <-up.done
	up.cancel()
	return r.entry, r.err
}

// abort cancels the upload: the old file stays intact.
func (up *upload) abort() {
	up.cancel()
	up.pw.CloseWithError(errAborted)
	<-up.done
}

// fileMode validates a requested mode: permission bits only; absent or 0
// keeps the replaced file's mode (0644 for a new file).
func fileMode(m *uint32) (os.FileMode, error) {
	if m == nil {
		return 0, nil
	}
	if *m&^0o777 != 0 {
		return 0, rpcerr.Invalid("mode may only hold permission bits (at most 0777)")
	}
	return os.FileMode(*m), nil
}

// parseMode parses an octal mode from the HTTP endpoint.
func parseMode(s string) (os.FileMode, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, rpcerr.Invalid("mode must be octal permission bits")
	}
	m := uint32(v)
	return fileMode(&m)
}

// Write writes one or more files. A message with path starts a new file;
// its chunks stream into an atomic safefs.WriteFile. Files completed before
// an error stay written; the file in progress is left as it was.
func (s *Service) Write(ctx context.Context, stream *connect.ClientStream[raydv1.WriteRequest]) (*connect.Response[raydv1.WriteResponse], error) {
	var (
		cur     *upload
		entries []*raydv1.EntryInfo
	)
	fail := func(err error) (*connect.Response[raydv1.WriteResponse], error) {
		if cur != nil {
			cur.abort()
		}
		return nil, rpcerr.From(err)
	}
	first := true
	for stream.Receive() {
		msg := stream.Msg()
		if len(msg.GetChunk()) > MaxWriteChunk {
			return fail(rpcerr.Invalid("chunk larger than 1 MiB"))
		}
		if msg.Path == nil {
			if first {
				return fail(rpcerr.Invalid("the first message must carry a path"))
			}
			if len(msg.GetMetadata()) > 0 {
				return fail(rpcerr.Invalid("metadata is only allowed on a file's first message"))
			}
		} else {
			first = false
			if cur != nil {
				e, err := cur.finish()
				cur = nil
				if err != nil {
					return fail(err)
				}
				entries = append(entries, entryInfo(e))
			}
			if len(entries) >= MaxWriteFiles {
				return fail(rpcerr.Invalid("too many files in one Write call (at most 1000)"))
			}
			mode, err := fileMode(msg.Mode)
			if err != nil {
				return fail(err)
			}
			md := msg.GetMetadata()
			if err := safefs.ValidateMetadata(md); err != nil {
				return fail(err)
			}
			u, err := s.user(msg.GetUser())
			if err != nil {
				return fail(err)
			}
			cur = s.startUpload(ctx, u, msg.GetPath(), mode, md)
		}
		if err := cur.write(msg.GetChunk()); err != nil {
			cur = nil
			return fail(err)
		}
	}
	if err := stream.Err(); err != nil {
		if cur != nil {
			cur.abort()
		}
		if ctx.Err() != nil {
			return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_CANCELED, "canceled")
		}
		return nil, rpcerr.From(err)
	}
	if cur == nil {
		return nil, rpcerr.Invalid("the first message must carry a path")
	}
	// A client that cancels may still half-close the stream cleanly;
	// never commit a file for a call that is already cancelled.
	if ctx.Err() != nil {
		cur.abort()
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_CANCELED, "canceled")
	}
	e, err := cur.finish()
	if err != nil {
		return nil, rpcerr.From(err)
	}
	entries = append(entries, entryInfo(e))
	return connect.NewResponse(&raydv1.WriteResponse{Entries: entries}), nil
}
