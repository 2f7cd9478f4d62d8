package localvm

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	evlocal "github.com/rayito-dev/rayito/events/local"
	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// Lifecycle events (docs/events.md): the platform holds a stack key (32
// random bytes in StackKeyFile, 0600, kept across restarts), follows
// every sandbox's rayd log for the lines rayd prints on its stdout, and
// feeds them to the events pipeline (events/local: the forwarder's
// admission and the deliverer, in process) under the id of the sandbox
// whose log it read. The owner reaches the pipeline through the routes of
// localplatform (events.go there): a sandbox's key, webhooks, events.

// StackKeyFile is the stack key's file in the state directory.
const StackKeyFile = "events-stack-key"

// eventsDir is the pipeline's directory in the state directory.
const eventsDir = "events"

// followEvery is how often the rayd logs are read for new lines.
const followEvery = 200 * time.Millisecond

// maxEventLine bounds a line kept while it is not complete; rayd's lines
// are at most 4096 bytes.
const maxEventLine = 8 << 10

// loadStackKey reads the stack key, or creates it (32 random bytes, 0600)
// the first time.
func loadStackKey(stateDir string) ([]byte, error) {
	path := filepath.Join(stateDir, StackKeyFile)
	for try := 0; try < 2; try++ {
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err == nil {
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				return nil, err
			}
			if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 || fi.Size() != 32 {
				return nil, fmt.Errorf("localvm: %s must be a 0600 file of 32 bytes", StackKeyFile)
			}
			key := make([]byte, 32)
			if _, err := io.ReadFull(f, key); err != nil {
				return nil, fmt.Errorf("localvm: %s: %w", StackKeyFile, err)
			}
			return key, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("localvm: %s: %w", StackKeyFile, err)
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		tmp, err := os.CreateTemp(stateDir, ".stack-key-*")
		if err != nil {
			return nil, fmt.Errorf("localvm: %s: %w", StackKeyFile, err)
		}
		_, werr := tmp.Write(key)
		if werr == nil {
			werr = tmp.Sync()
		}
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			// A hard link fails if another platform made the file first.
			werr = os.Link(tmp.Name(), path)
			if errors.Is(werr, os.ErrExist) {
				werr = nil
			}
		}
		_ = os.Remove(tmp.Name())
		if werr != nil {
			return nil, fmt.Errorf("localvm: %s: %w", StackKeyFile, werr)
		}
	}
	return nil, fmt.Errorf("localvm: %s could not be created", StackKeyFile)
}

// eventsPlane is the Server's pipeline and log follower.
type eventsPlane struct {
	p      *evlocal.Pipeline
	log    *slog.Logger
	vmsDir string
	cancel context.CancelFunc
	done   chan struct{}
	logs   map[string]*followed // by sandbox id; the follower's own
}

// followed is one rayd log being read.
type followed struct {
	off     int64
	partial []byte
	skip    bool // inside an overlong line: drop up to the next newline
}

// openEvents loads the stack key, opens the pipeline and starts the
// follower.
func openEvents(opts Options) (*eventsPlane, error) {
	key, err := loadStackKey(opts.StateDir)
	if err != nil {
		return nil, err
	}
	p, err := evlocal.New(evlocal.Options{
		Dir: filepath.Join(opts.StateDir, eventsDir), StackKey: key,
		AllowLoopback: opts.EventsAllowLoopback, ExtraRoots: opts.EventsRootCAs, Logger: opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("localvm: events: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &eventsPlane{p: p, log: opts.Logger, vmsDir: registry.VMsDir(opts.StateDir), cancel: cancel, done: make(chan struct{}), logs: map[string]*followed{}}
	go e.follow(ctx)
	return e, nil
}

func (e *eventsPlane) close() {
	e.cancel()
	<-e.done
	_ = e.p.Close()
}

func (e *eventsPlane) follow(ctx context.Context) {
	defer close(e.done)
	t := time.NewTicker(followEvery)
	defer t.Stop()
	for {
		e.scan(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scan reads what every sandbox's rayd log gained since the last scan.
func (e *eventsPlane) scan(ctx context.Context) {
	ents, err := os.ReadDir(e.vmsDir)
	if err != nil {
		return
	}
	seen := make(map[string]bool, len(ents))
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		id := de.Name()
		seen[id] = true
		f := e.logs[id]
		if f == nil {
			f = &followed{}
			e.logs[id] = f
		}
		lines := f.read(filepath.Join(e.vmsDir, id, registry.LogFileName))
		if len(lines) == 0 {
			continue
		}
		sum, err := e.p.Ingest(ctx, id, lines...)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("localvm: events: lines could not be stored", "err", err)
		}
		if n := len(lines) - sum.Admitted; n > 0 && sum.Rejected != nil {
			attrs := make([]any, 0, len(sum.Rejected))
			for k, v := range sum.Rejected {
				attrs = append(attrs, slog.Int(k, v))
			}
			e.log.Info("localvm: events: lines refused", slog.Group("rejected", attrs...))
		}
	}
	for id := range e.logs {
		if !seen[id] {
			delete(e.logs, id)
		}
	}
}

// read returns the complete new lines of path that start with the event
// line prefix; a line still being written waits for the next read.
func (f *followed) read(path string) []string {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() < f.off { // truncated: start again
		f.off, f.partial, f.skip = 0, nil, false
	}
	if fi.Size() == f.off {
		return nil
	}
	if _, err := fh.Seek(f.off, io.SeekStart); err != nil {
		return nil
	}
	var out []string
	n, _ := scanLines(io.LimitReader(fh, fi.Size()-f.off), f, func(line []byte) {
		if strings.HasPrefix(string(line), events.LinePrefix) {
			out = append(out, string(line))
		}
	})
	f.off += n
	return out
}

// scanLines splits r into lines for emit, continuing f's partial line;
// lines longer than maxEventLine are dropped whole. It returns the bytes
// consumed.
func scanLines(r io.Reader, f *followed, emit func([]byte)) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var n int64
	for {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(chunk))
		complete := len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		if complete {
			chunk = chunk[:len(chunk)-1]
		}
		if !f.skip {
			if len(f.partial)+len(chunk) > maxEventLine {
				f.partial, f.skip = nil, true
			} else {
				f.partial = append(f.partial, chunk...)
			}
		}
		if complete {
			if !f.skip {
				emit(f.partial)
			}
			f.partial, f.skip = f.partial[:0], false
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
	}
}

// eventsRoute serves the events routes (after the owner check).
func (s *Server) eventsRoute(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.events == nil {
		eventsErr(w, http.StatusNotFound, localplatform.EventsUnavailable, "this platform runs no events pipeline")
		return
	}
	p := s.events.p
	ctx := r.Context()
	path := r.URL.Path
	switch {
	case path == localplatform.EventsPath:
		if !allow(w, r, http.MethodGet) {
			return
		}
		q := r.URL.Query()
		query := evlocal.Query{SandboxID: q.Get("sandbox"), Order: evlocal.Order(q.Get("order"))}
		if l := q.Get("limit"); l != "" {
			n, err := strconv.Atoi(l)
			if err != nil {
				eventsErr(w, http.StatusBadRequest, localplatform.EventsInvalid, "limit is 1 to 100")
				return
			}
			query.Limit = n
		}
		evs, err := p.Events(ctx, query)
		if err != nil {
			eventsFail(w, err)
			return
		}
		if evs == nil {
			evs = []events.Event{}
		}
		writeJSON(w, http.StatusOK, localplatform.EventList{Events: evs})
	case path == localplatform.EventsSandboxKeyPath:
		if !allow(w, r, http.MethodGet) {
			return
		}
		id := r.URL.Query().Get("sandbox")
		vm, err := s.reg.Get(id)
		if err != nil || vm.State == microvmsapi.StateTerminated {
			eventsErr(w, http.StatusNotFound, localplatform.EventsNotFound, "no running sandbox of this platform has that id")
			return
		}
		key, err := p.SandboxKey(id)
		if err != nil {
			eventsFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, localplatform.EventsSandboxKey{SandboxKey: key})
	case path == localplatform.EventsWebhooksPath:
		switch r.Method {
		case http.MethodGet:
			hooks, err := p.Webhooks(ctx)
			if err != nil {
				eventsFail(w, err)
				return
			}
			out := localplatform.WebhookList{Webhooks: []localplatform.Webhook{}}
			for _, h := range hooks {
				out.Webhooks = append(out.Webhooks, wireWebhook(h))
			}
			writeJSON(w, http.StatusOK, out)
		case http.MethodPost:
			var reg localplatform.WebhookRegistration
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&reg); err != nil {
				eventsErr(w, http.StatusBadRequest, localplatform.EventsInvalid, "the body is not a webhook registration")
				return
			}
			types := make([]events.Type, 0, len(reg.Types))
			for _, t := range reg.Types {
				types = append(types, events.Type(t))
			}
			h, secret, err := p.Register(ctx, evlocal.Registration{URL: reg.URL, Secret: reg.Secret, Types: types})
			if err != nil {
				eventsFail(w, err)
				return
			}
			writeJSON(w, http.StatusCreated, localplatform.WebhookCreated{Webhook: wireWebhook(h), Secret: secret})
		default:
			w.Header().Set("Allow", "GET, POST")
			eventsErr(w, http.StatusMethodNotAllowed, localplatform.EventsInvalid, "method not allowed")
		}
	case strings.HasPrefix(path, localplatform.EventsWebhooksPath+"/"):
		if !allow(w, r, http.MethodDelete) {
			return
		}
		if err := p.DeleteWebhook(ctx, strings.TrimPrefix(path, localplatform.EventsWebhooksPath+"/")); err != nil {
			eventsFail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		eventsErr(w, http.StatusNotFound, localplatform.EventsNotFound, "no such route")
	}
}

func wireWebhook(h evlocal.Webhook) localplatform.Webhook {
	out := localplatform.Webhook{ID: h.ID, URL: h.URL, CreatedAt: h.CreatedAt}
	for _, t := range h.Types {
		out.Types = append(out.Types, string(t))
	}
	return out
}

func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	eventsErr(w, http.StatusMethodNotAllowed, localplatform.EventsInvalid, "method not allowed")
	return false
}

// eventsFail answers a pipeline error: its message names no URL, key or
// secret (the pipeline's errors never quote them).
func eventsFail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, events.ErrBlockedURL):
		eventsErr(w, http.StatusBadRequest, localplatform.EventsBlockedURL, err.Error())
	case errors.Is(err, evlocal.ErrInvalid):
		eventsErr(w, http.StatusBadRequest, localplatform.EventsInvalid, err.Error())
	case errors.Is(err, evlocal.ErrNotFound):
		eventsErr(w, http.StatusNotFound, localplatform.EventsNotFound, err.Error())
	default:
		eventsErr(w, http.StatusInternalServerError, localplatform.EventsUnavailable, "the events store failed")
	}
}

func eventsErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, localplatform.EventsError{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
