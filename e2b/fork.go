package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// MaxForks is the most forks one request may ask for.
const MaxForks = 8

type forkReq struct {
	Timeout *int64 `json:"timeout"`
	Count   *int   `json:"count"`
}

// forkResult is one entry of a fork's answer: exactly one of the two.
type forkResult struct {
	Sandbox *sandboxOut `json:"sandbox,omitempty"`
	Error   *errorBody  `json:"error,omitempty"`
}

// pausedCopyMsg answers a fork or snapshot of a paused sandbox.
const pausedCopyMsg = "sandbox %q is paused: connect to it to resume it first (a fork or snapshot copies the files of a running sandbox)"

// handleFork makes count new sandboxes like the source (its template,
// secure, allowPublicTraffic, lifecycle, network policy, metadata, and
// the envVars of its create when this gateway process made it), then
// copies the source's HomeDir into them: files only, never memory or
// processes. Each fork succeeds or fails on its own; a failed one is
// killed.
func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return
	}
	var req forkReq
	if code, msg := decode(r, &req); code != 0 {
		writeError(w, code, msg)
		return
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
		if count < 1 || count > MaxForks {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("count must be 1 to %d, got %d", MaxForks, count))
			return
		}
	}
	timeout, err := seconds(req.Timeout, DefaultTimeout, "timeout")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), createTimeout+copyTimeout)
	defer cancel()
	info, c, ok := s.running(ctx, w, id, pausedCopyMsg)
	if !ok {
		return
	}
	src := s.learn(ctx, info)
	spec, err := s.forkSpec(ctx, info, src, c.sbx, timeout)
	if err != nil {
		code, msg := errorStatus(id, err)
		writeError(w, code, msg)
		return
	}

	forks := s.createForks(ctx, src, spec, count, timeout)
	s.copyIntoForks(ctx, c.sbx, forks)
	out := s.forkResults(ctx, id, src, forks)
	writeJSON(w, http.StatusCreated, out)
}

// fork is one fork in the making: its record, its sandbox once created,
// where the source's archive goes, and its failure.
type fork struct {
	rec *record
	sbx sandbox
	dst *forkDst
	err error
}

// createForks creates count forks of src with spec in parallel, each with
// its own record and label and the given timeout.
func (s *Server) createForks(ctx context.Context, src *record, spec createSpec, count int, timeout time.Duration) []*fork {
	forks := make([]*fork, count)
	var wg sync.WaitGroup
	for i := range forks {
		f := &fork{}
		forks[i] = f
		wg.Go(func() {
			f.rec = forkRecord(src)
			sp := spec
			md := maps.Clone(src.metadata)
			if md == nil {
				md = map[string]string{}
			}
			md[labelKey] = f.rec.label()
			sp.Metadata = md
			cctx, ccancel := context.WithTimeout(ctx, createTimeout)
			defer ccancel()
			f.sbx, f.err = s.plat.create(cctx, sp)
			f.rec.endAt = time.Now().Add(timeout)
		})
	}
	wg.Wait()
	return forks
}

// copyIntoForks copies source's HomeDir into every fork that started: one
// archive feeds them all; a fork's failure is its err.
func (s *Server) copyIntoForks(ctx context.Context, source sandbox, forks []*fork) {
	cctx, ccancel := context.WithTimeout(ctx, copyTimeout)
	defer ccancel()
	fan := &fanout{}
	for _, f := range forks {
		if f.err != nil {
			continue
		}
		uw, err := f.sbx.UntarHome(cctx)
		if err != nil {
			f.err = err
			continue
		}
		f.dst = &forkDst{w: uw}
		fan.dsts = append(fan.dsts, f.dst)
	}
	if len(fan.dsts) == 0 {
		return
	}
	lw := &limitWriter{w: fan, max: s.maxCopy}
	terr := source.TarHome(cctx, lw, false)
	for _, f := range forks {
		switch {
		case f.dst == nil:
		case f.dst.err != nil:
			// This fork's own failure (when every fork failed, the
			// archive stopped for that reason).
			f.err = f.dst.err
		case terr != nil:
			f.err = terr
		default:
			f.err = f.dst.w.Close()
		}
	}
}

// forkResults records the forks that succeeded and kills the ones that
// failed: the answer's entries, in order.
func (s *Server) forkResults(ctx context.Context, id string, src *record, forks []*fork) []forkResult {
	out := make([]forkResult, len(forks))
	for i, f := range forks {
		if f.err != nil {
			if f.sbx != nil {
				// Never leave a half-made fork behind.
				s.killQuietly(ctx, f.sbx.ID())
			}
			code, msg := errorStatus("", f.err)
			var he *httpError
			switch {
			case f.sbx == nil:
				code, msg = createErrorStatus(f.err, src.templateID)
			case !errors.As(f.err, &he):
				msg = "copying " + HomeDir + " into the fork: " + msg
			}
			s.log.Warn("e2b fork failed", "sandbox", id, "status", code)
			out[i] = forkResult{Error: &errorBody{Code: code, Message: msg}}
			continue
		}
		f.rec.id = f.sbx.ID()
		s.fillSizes(ctx, f.rec, f.sbx)
		s.remember(f.rec)
		s.addConn(f.rec.id, f.sbx)
		so := s.sandboxOut(f.rec, f.sbx)
		out[i] = forkResult{Sandbox: &so}
	}
	return out
}

// forkSpec is the create of a fork of the running sandbox info (record
// rec, connected as sbx).
func (s *Server) forkSpec(ctx context.Context, info *rayito.Info, rec *record, sbx sandbox, timeout time.Duration) (createSpec, error) {
	spec := createSpec{Template: info.Template, Timeout: timeout, OnTimeout: rec.onTimeout, AutoResume: rec.autoResume,
		Envs: maps.Clone(rec.envs), HeaderRules: rec.headerRules}
	if spec.Template == "" {
		t, err := s.template(rec.templateID)
		if err != nil {
			return spec, &httpError{http.StatusBadRequest, err.Error()}
		}
		spec.Template = t
	}
	// The policy the source enforces now (updates included).
	ns, err := sbx.Network(ctx)
	if err != nil {
		return spec, err
	}
	if ns.EgressProxyConfigured {
		return spec, &httpError{http.StatusConflict, fmt.Sprintf("sandbox %q chains an egress proxy, whose credentials the gateway does not keep: it cannot be forked", rec.id)}
	}
	switch {
	case rec.allowInternet != nil && !*rec.allowInternet && len(ns.AllowOut) == 0:
		// As its create did: the platform's route out goes too.
		spec.DenyInternet = true
	case len(ns.AllowOut) > 0 || len(ns.DenyOut) > 0:
		spec.Network = &rayito.NetworkPolicy{AllowOut: slices.Clone(ns.AllowOut), DenyOut: slices.Clone(ns.DenyOut)}
	}
	return spec, nil
}

// forkRecord is the record of a new fork of src (its id still unset).
func forkRecord(src *record) *record {
	r := &record{templateID: src.templateID, secure: src.secure, public: src.public, onTimeout: src.onTimeout,
		autoResume: src.autoResume, complete: true, metadata: maps.Clone(src.metadata), envs: src.envs, headerRules: src.headerRules}
	if src.allowInternet != nil {
		v := *src.allowInternet
		r.allowInternet = &v
	}
	if src.network != nil {
		n := *src.network
		n.AllowOut, n.DenyOut = slices.Clone(n.AllowOut), slices.Clone(n.DenyOut)
		r.network = &n
	}
	return r
}

// createErrorStatus is the status of a failed create of a sandbox of the
// E2B template templateID.
func createErrorStatus(err error, templateID string) (int, string) {
	code, msg := statusOf("", err)
	var ended *rayito.SandboxEndedError
	switch {
	case errors.As(err, &ended):
		code, msg = http.StatusInternalServerError, "the sandbox ended while it started"
	case code == http.StatusNotFound:
		// Nothing but the template can be missing at a create.
		code, msg = http.StatusBadRequest, fmt.Sprintf("template %q: %v", templateID, err)
	}
	return code, msg
}

// fillSizes reads, best effort, the sizes E2B's listing shows.
func (s *Server) fillSizes(ctx context.Context, rec *record, sbx sandbox) {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if info, err := sbx.Info(ictx); err == nil {
		rec.cpuCount, rec.memoryMB = info.CPUCount, memMB(info)
	}
	if m, err := sbx.Metrics(ictx); err == nil {
		rec.diskSizeMB = int(m.DiskTotal >> 20)
	}
}

// killQuietly kills a sandbox the gateway made and could not finish,
// whatever ctx says.
func (s *Server) killQuietly(ctx context.Context, id string) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	if err := s.plat.kill(kctx, id); err != nil {
		s.log.Warn("e2b: killing an unfinished sandbox failed", "sandbox", id)
	}
	s.forget(id)
}

// copyInto extracts the archive r into sbx's HomeDir.
func copyInto(ctx context.Context, sbx sandbox, r io.Reader) error {
	uw, err := sbx.UntarHome(ctx)
	if err != nil {
		return err
	}
	buf := make([]byte, stdinChunk)
	// The wrappers keep io.CopyBuffer from taking another path (a file's
	// WriteTo) with other chunk sizes.
	if _, err := io.CopyBuffer(struct{ io.Writer }{uw}, struct{ io.Reader }{r}, buf); err != nil {
		return err
	}
	return uw.Close()
}
