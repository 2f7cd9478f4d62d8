package raydtest

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
)

// UserDir makes a directory owned by uid 1000 that the sandbox user can
// write into (t.TempDir is root's and 0700).
func UserDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "rayd-files-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	return dir
}

// UpFile is one file of a Write call.
type UpFile struct {
	Path string
	Data []byte
	MD   map[string]string
	Mode *uint32
}

// WriteFiles sends files in one Write call, in chunks of 1 MiB.
func WriteFiles(ctx context.Context, c raydv1connect.FilesystemServiceClient, files ...UpFile) (*raydv1.WriteResponse, error) {
	s := c.Write(ctx)
	for _, f := range files {
		p := f.Path
		first := &raydv1.WriteRequest{Path: &p, Metadata: f.MD, Mode: f.Mode}
		data := f.Data
		n := min(len(data), 1<<20)
		first.Chunk, data = data[:n], data[n:]
		if err := s.Send(first); err != nil {
			break
		}
		for len(data) > 0 {
			n := min(len(data), 1<<20)
			if err := s.Send(&raydv1.WriteRequest{Chunk: data[:n]}); err != nil {
				break
			}
			data = data[n:]
		}
	}
	resp, err := s.CloseAndReceive()
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// ReadFile reads a file through Read.
func ReadFile(ctx context.Context, c raydv1connect.FilesystemServiceClient, path string) (*raydv1.EntryInfo, []byte, error) {
	s, err := c.Read(ctx, connect.NewRequest(&raydv1.ReadRequest{Path: path}))
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var entry *raydv1.EntryInfo
	var buf bytes.Buffer
	for s.Receive() {
		switch ev := s.Msg().Event.(type) {
		case *raydv1.ReadResponse_Entry:
			entry = ev.Entry
		case *raydv1.ReadResponse_Chunk:
			if entry == nil {
				return nil, nil, io.ErrUnexpectedEOF
			}
			if len(ev.Chunk) > 256<<10 {
				return nil, nil, io.ErrShortBuffer
			}
			buf.Write(ev.Chunk)
		}
	}
	if err := s.Err(); err != nil {
		return nil, buf.Bytes(), err
	}
	return entry, buf.Bytes(), nil
}

// WatchStream is an open WatchDir stream.
type WatchStream struct {
	t    *testing.T
	s    *connect.ServerStreamForClient[raydv1.WatchDirResponse]
	msgs chan *raydv1.WatchDirResponse
	// Done receives the stream's end (its error) once.
	Done chan error
	// Seen is the events WaitFor read so far.
	Seen []*raydv1.FilesystemEvent
	// Cancel ends the stream.
	Cancel context.CancelFunc
}

// StartWatch opens a WatchDir stream and requires `started` first.
func StartWatch(t *testing.T, c raydv1connect.FilesystemServiceClient, req *raydv1.WatchDirRequest) *WatchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.WatchDir(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Receive() {
		t.Fatalf("no first message: %v", s.Err())
	}
	if s.Msg().GetStarted() == nil {
		t.Fatalf("first message %v, want started", s.Msg())
	}
	w := &WatchStream{t: t, s: s, msgs: make(chan *raydv1.WatchDirResponse, 4096), Done: make(chan error, 1), Cancel: cancel}
	go func() {
		for s.Receive() {
			w.msgs <- s.Msg()
		}
		w.Done <- s.Err()
		close(w.msgs)
	}()
	return w
}

// Msgs is the stream's messages after started, in order; closed at the
// stream's end.
func (w *WatchStream) Msgs() <-chan *raydv1.WatchDirResponse { return w.msgs }

// WaitFor reads events until one has the name and one of the types.
func (w *WatchStream) WaitFor(name string, types ...raydv1.FilesystemEventType) *raydv1.FilesystemEvent {
	w.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m, ok := <-w.msgs:
			if !ok {
				w.t.Fatalf("stream ended waiting for %s %v; seen %v", name, types, w.Seen)
			}
			ev := m.GetFilesystem()
			if ev == nil {
				if m.GetError() != nil {
					w.t.Fatalf("stream error %v", m.GetError())
				}
				continue
			}
			w.Seen = append(w.Seen, ev)
			if ev.GetName() == name {
				for _, typ := range types {
					if ev.GetType() == typ {
						return ev
					}
				}
			}
		case <-timeout:
			w.t.Fatalf("timeout waiting for %s %v; seen %v", name, types, w.Seen)
		}
	}
}
