// Package envdhttp serves E2B envd's plain HTTP endpoints on the envd port
// (the E2B shim), for the official e2b SDKs:
//
//	GET  /health                        204: rayd is up (no token needed)
//	GET  /files?path=&username=         the file's bytes (gzip when accepted)
//	POST /files[?path=][&username=]     multipart upload of one or more files,
//	                                    or one file as application/octet-stream
//	GET  /envs                          the sandbox's environment variables
//	GET  /metrics                       the sandbox's resource use now
//	POST /files/compose                 {destination, source_paths, username?}:
//	                                    the sources' concatenation written
//	                                    atomically to destination
//	POST /init                          204 when it asks nothing the platform's
//	                                    /run did not do already (init.go)
//
// Transfers go through rayd's own file endpoint code (package files:
// SendFile, ReceiveFile), so the safe file layer's path rules, identity
// switching, disk reserve and atomic writes (no partial file on error) are
// the same as on the API port. The access-token gate is apiserver's.
// Errors are JSON {"code": <HTTP status>, "message": "..."} (a missing
// file: 404 "path '<p>' does not exist").
package envdhttp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/envdpath"
	"github.com/rayito-dev/rayito/rayd/internal/envduser"
	"github.com/rayito-dev/rayito/rayd/internal/metrics"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
	"github.com/rayito-dev/rayito/rayd/internal/service/files"
)

// Paths of the endpoints.
const (
	HealthPath  = "/health"
	FilesPath   = "/files"
	EnvsPath    = "/envs"
	MetricsPath = "/metrics"
	ComposePath = "/files/compose"
	InitPath    = "/init"
)

// MaxFiles bounds the files of one multipart upload (as rayd's own Write).
const MaxFiles = files.MaxWriteFiles

// Handlers serves the endpoints.
type Handlers struct {
	state   *sandbox.State
	files   *files.Service
	metrics func(context.Context) (metrics.Sample, error)
}

// New returns the endpoints over rayd's file service and its metrics
// sampler (Sampler.Current).
func New(state *sandbox.State, f *files.Service, current func(context.Context) (metrics.Sample, error)) *Handlers {
	return &Handlers{state: state, files: f, metrics: current}
}

// Routes returns the handlers by path, for apiserver's Extra.
func (h *Handlers) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		HealthPath:  http.HandlerFunc(h.health),
		FilesPath:   http.HandlerFunc(h.serveFiles),
		EnvsPath:    http.HandlerFunc(h.envs),
		MetricsPath: http.HandlerFunc(h.serveMetrics),
		ComposePath: http.HandlerFunc(h.compose),
		InitPath:    http.HandlerFunc(h.init),
	}
}

func fail(w http.ResponseWriter, err error) { rpcerr.WriteEnvdHTTP(w, 0, err) }

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	rpcerr.WriteEnvdHTTP(w, http.StatusMethodNotAllowed, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, "method not allowed"))
}

func (h *Handlers) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handlers) envs(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	envs := map[string]string{}
	if b := h.state.Boot(); b != nil {
		for k, v := range b.Envs {
			envs[k] = v
		}
	}
	writeJSON(w, envs)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail(w, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "cannot encode the answer"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func (h *Handlers) serveFiles(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		h.download(w, r)
	case http.MethodPost:
		h.upload(w, r)
	default:
		methodNotAllowed(w, "GET, POST")
	}
}

// resolve resolves a path of a request for the user u as envd does
// (envdpath.Resolve: "" is the default working directory, "~" the home,
// relative paths from the home, ".." cleaned).
func (h *Handlers) resolve(u safefs.User, p string) (string, error) {
	wd := ""
	if b := h.state.Boot(); b != nil && b.WorkdirSet {
		wd = b.Workdir
	}
	r, err := envdpath.Resolve(p, u.Home, wd)
	if err != nil {
		return "", rpcerr.Invalid("cannot expand another user's home directory (~name)")
	}
	return r, nil
}

// user resolves the username query parameter ("" = the default user).
func (h *Handlers) user(r *http.Request) (safefs.User, error) {
	name := r.URL.Query().Get("username")
	if !envduser.Valid(name) {
		return safefs.User{}, rpcerr.Invalid("invalid username")
	}
	return h.files.User(name)
}

func (h *Handlers) download(w http.ResponseWriter, r *http.Request) {
	u, err := h.user(r)
	if err != nil {
		fail(w, err)
		return
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		fail(w, rpcerr.Invalid("path is required"))
		return
	}
	rp, err := h.resolve(u, p)
	if err != nil {
		fail(w, err)
		return
	}
	h.files.SendFile(w, r, u, rp, func(w http.ResponseWriter, err error) {
		fail(w, rpcerr.EnvdPath(err, rp))
	})
}

// WrittenEntry is one element of POST /files's answer.
type WrittenEntry struct {
	Name     string            `json:"name"`
	Path     string            `json:"path"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func written(e safefs.Entry) WrittenEntry {
	t := "file"
	if e.Type == safefs.TypeDir {
		t = "dir"
	}
	return WrittenEntry{Name: e.Name, Path: e.Path, Type: t, Metadata: e.Metadata}
}

func (h *Handlers) upload(w http.ResponseWriter, r *http.Request) {
	u, err := h.user(r)
	if err != nil {
		fail(w, err)
		return
	}
	md := files.MetadataHeaders(r.Header)
	qpath := r.URL.Query().Get("path")
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		// One file as the raw body (envd >= 0.5.7: octet-stream, gzip or
		// a streamed body).
		if qpath == "" {
			fail(w, rpcerr.Invalid("path is required for a non-multipart upload"))
			return
		}
		rp, err := h.resolve(u, qpath)
		if err != nil {
			fail(w, err)
			return
		}
		e, err := h.files.ReceiveFile(r.Context(), u, rp, r.Body, r.Header.Get("Content-Encoding"), 0, md)
		if err != nil {
			fail(w, rpcerr.EnvdPath(err, rp))
			return
		}
		writeJSON(w, []WrittenEntry{written(e)})
		return
	}
	if enc := strings.TrimSpace(r.Header.Get("Content-Encoding")); enc != "" && !strings.EqualFold(enc, "identity") {
		fail(w, rpcerr.Invalid("a multipart upload cannot have a Content-Encoding"))
		return
	}
	boundary := params["boundary"]
	if boundary == "" {
		fail(w, rpcerr.Invalid("multipart body without a boundary"))
		return
	}
	mr := multipart.NewReader(r.Body, boundary)
	var out []WrittenEntry
	for {
		// NextRawPart: the part's body as sent; its file name comes from
		// the raw header (Part.FileName drops the directories).
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail(w, rpcerr.Invalid("malformed multipart body"))
			return
		}
		name, filename, ok := FormFile(part.Header.Get("Content-Disposition"))
		if !ok || name != "file" {
			part.Close()
			continue
		}
		target := filename
		if qpath != "" {
			if len(out) > 0 {
				fail(w, rpcerr.Invalid("a path query parameter allows one file only"))
				return
			}
			target = qpath
		}
		if target == "" {
			fail(w, rpcerr.Invalid("a file part needs its target path as its filename"))
			return
		}
		if len(out) >= MaxFiles {
			fail(w, rpcerr.Invalid("too many files in one upload (at most 1000)"))
			return
		}
		rp, err := h.resolve(u, target)
		if err != nil {
			part.Close()
			fail(w, err)
			return
		}
		e, err := h.files.ReceiveFile(r.Context(), u, rp, part, "", 0, md)
		part.Close()
		if err != nil {
			fail(w, rpcerr.EnvdPath(err, rp))
			return
		}
		out = append(out, written(e))
	}
	if len(out) == 0 {
		fail(w, rpcerr.Invalid("no file part in the multipart body (a part named \"file\" with the target path as its filename)"))
		return
	}
	writeJSON(w, out)
}
