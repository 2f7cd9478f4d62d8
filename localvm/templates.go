package localvm

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/rayito-dev/rayito/localvm/internal/templates"
	"github.com/rayito-dev/rayito/proto/localplatform"
)

// openTemplates opens the platform's templates (docs/templates.md). Only a
// root platform builds them; the others list none and refuse builds.
func openTemplates(opts Options, d deps) (*templates.Store, error) {
	o := templates.Options{StateDir: opts.StateDir, Logger: opts.Logger}
	if d.launcher != nil && d.launcher.Privileged() {
		o.Builder = &templates.SandboxBuilder{Launcher: d.launcher, Dial: d.dial}
	}
	return templates.Open(o)
}

// templatesRoute serves localplatform.TemplatesPath.
func (s *Server) templatesRoute(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.EscapedPath(), localplatform.TemplatesPath), "/")
	if rest == "" {
		if !allow(w, r, http.MethodGet) {
			return
		}
		list, err := s.templates.List()
		if err != nil {
			templatesFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, localplatform.TemplateList{Templates: list})
		return
	}
	name, sub, _ := strings.Cut(rest, "/")
	if n, err := url.PathUnescape(name); err == nil {
		name = n
	}
	switch {
	case sub == "logs":
		if !allow(w, r, http.MethodGet) {
			return
		}
		f, err := s.templates.Logs(name)
		if err != nil {
			templatesFail(w, err)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = io.Copy(w, f)
	case sub != "":
		eventsErr(w, http.StatusNotFound, localplatform.EventsNotFound, "no such route")
	case r.Method == http.MethodGet:
		t, err := s.templates.Get(name)
		if err != nil {
			templatesFail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, t)
	case r.Method == http.MethodDelete:
		if err := s.templates.Delete(name); err != nil {
			templatesFail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPut:
		if ct := r.Header.Get("Content-Type"); ct != "application/zip" {
			eventsErr(w, http.StatusUnsupportedMediaType, localplatform.EventsInvalid, "the artifact is sent as application/zip")
			return
		}
		body := http.MaxBytesReader(w, r.Body, localplatform.MaxTemplateArtifact)
		t, err := s.templates.Put(r.Context(), name, body, r.Header.Get(localplatform.TemplateSHA256Header), r.URL.Query().Get("force") == "1")
		if err != nil {
			templatesFail(w, err)
			return
		}
		status := http.StatusAccepted
		if t.Unchanged {
			status = http.StatusOK
		}
		writeJSON(w, status, t)
	default:
		w.Header().Set("Allow", "DELETE, GET, PUT")
		eventsErr(w, http.StatusMethodNotAllowed, localplatform.EventsInvalid, "method not allowed")
	}
}

// templatesFail answers a store error with its fixed text.
func templatesFail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, templates.ErrInvalid):
		eventsErr(w, http.StatusBadRequest, localplatform.EventsInvalid, err.Error())
	case errors.Is(err, templates.ErrNotFound):
		eventsErr(w, http.StatusNotFound, localplatform.EventsNotFound, "no such template")
	case errors.Is(err, templates.ErrBusy), errors.Is(err, templates.ErrTooMany):
		eventsErr(w, http.StatusConflict, localplatform.TemplatesConflict, err.Error())
	case errors.Is(err, templates.ErrNoRoot):
		eventsErr(w, http.StatusBadRequest, localplatform.TemplatesUnsupported, "templates need the root local platform (run `rayito local up` as root)")
	default:
		eventsErr(w, http.StatusInternalServerError, localplatform.EventsUnavailable, "the template store failed")
	}
}
