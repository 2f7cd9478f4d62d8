// Package api serves localvm's control plane: the REST-JSON API of AWS
// Lambda MicroVMs (lambda-microvms, 2025-09-09) for the microVM operations,
// on top of a [Backend] (the registry).
//
//	POST   /2025-09-09/microvms                  RunMicrovm
//	GET    /2025-09-09/microvms                  ListMicrovms
//	GET    /2025-09-09/microvms/{id}             GetMicrovm
//	DELETE /2025-09-09/microvms/{id}             TerminateMicrovm
//	POST   /2025-09-09/microvms/{id}/suspend     SuspendMicrovm
//	POST   /2025-09-09/microvms/{id}/resume      ResumeMicrovm
//	POST   /2025-09-09/microvms/{id}/auth-token  CreateMicrovmAuthToken
//
// Requests and answers are JSON. Request bodies are capped at 64 KiB and
// may not carry fields the operation does not know. Errors have the AWS
// rest-json shape: the status of the exception (microvmsapi.StatusOf), the
// header X-Amzn-ErrorType: <Name>, and the body
//
//	{"__type": "<Name>", "message": "..."}
//
// whose message never quotes what the caller sent. An unknown path answers
// 404 and a known path with the wrong method 405 (with Allow), both as
// UnknownOperationException. Each operation has a server-side token bucket
// at the service's published rate (Run 5/s, Resume 5/s, Suspend 2/s,
// Terminate 10/s, Get 100/s, AuthToken 50/s, List 100/s, burst = rate);
// beyond it the answer is 429 ThrottlingException.
//
// The API has no authentication: it is meant for loopback. To keep web
// pages from driving it, requests carrying an Origin header are refused
// (403 AccessDeniedException), and so are requests whose Host is not
// localhost or a loopback address (DNS rebinding), unless
// Options.AllowAnyHost.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// Backend runs the operations; *registry.Registry implements it. Errors
// that are *registry.Error reach the caller with their type and message;
// any other error answers InternalServerException.
type Backend interface {
	Run(ctx context.Context, in microvmsapi.RunMicrovmInput) (microvmsapi.Microvm, error)
	Get(id string) (microvmsapi.Microvm, error)
	List(in registry.ListInput) (microvmsapi.ListMicrovmsOutput, error)
	Terminate(id string) error
	Suspend(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	CreateAuthToken(id string, in microvmsapi.CreateMicrovmAuthTokenInput) (microvmsapi.CreateMicrovmAuthTokenOutput, error)
}

// Operation names, the keys of Options.Rates.
const (
	OpRunMicrovm             = "RunMicrovm"
	OpListMicrovms           = "ListMicrovms"
	OpGetMicrovm             = "GetMicrovm"
	OpTerminateMicrovm       = "TerminateMicrovm"
	OpSuspendMicrovm         = "SuspendMicrovm"
	OpResumeMicrovm          = "ResumeMicrovm"
	OpCreateMicrovmAuthToken = "CreateMicrovmAuthToken"
)

// UnknownOperationException answers a path or method that names no
// operation. (microvmsapi does not define it: AWS uses it for the same
// case.)
const UnknownOperationException = "UnknownOperationException"

// MaxBodyBytes caps a request body.
const MaxBodyBytes = 64 << 10

// DefaultRates returns the service's published rates per operation, in
// requests per second.
func DefaultRates() map[string]float64 {
	return map[string]float64{
		OpRunMicrovm:             5,
		OpResumeMicrovm:          5,
		OpSuspendMicrovm:         2,
		OpTerminateMicrovm:       10,
		OpGetMicrovm:             100,
		OpCreateMicrovmAuthToken: 50,
		OpListMicrovms:           100,
	}
}

// Options configure the handler.
type Options struct {
	// Backend is required.
	Backend Backend
	// Logger gets one debug line per request (operation, status,
	// duration) and internal errors; never bodies, payloads or tokens.
	Logger *slog.Logger
	// Rates overrides DefaultRates per operation (requests per second;
	// the burst is the rate rounded up, at least 1). A rate <= 0 turns
	// throttling off for that operation.
	Rates map[string]float64
	// AllowAnyHost accepts any Host header. Without it only localhost and
	// loopback addresses are accepted, which defeats DNS rebinding; set it
	// only when the server deliberately listens beyond loopback.
	AllowAnyHost bool
}

// Handler is the API's http.Handler.
type Handler struct {
	be           Backend
	log          *slog.Logger
	buckets      map[string]*bucket
	allowAnyHost bool
}

// New returns the handler.
func New(opts Options) (*Handler, error) {
	if opts.Backend == nil {
		return nil, errors.New("api: Backend is required")
	}
	h := &Handler{be: opts.Backend, log: opts.Logger, buckets: map[string]*bucket{}, allowAnyHost: opts.AllowAnyHost}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	rates := DefaultRates()
	for op, r := range opts.Rates {
		rates[op] = r
	}
	for op, r := range rates {
		h.buckets[op] = newBucket(r)
	}
	return h, nil
}

// route names the operation of a request. For a known path with another
// method it returns op "" and the allowed methods.
func route(r *http.Request) (op, id, allow string) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), microvmsapi.PathMicrovms)
	if !ok {
		return "", "", ""
	}
	pick := func(m map[string]string, allow string) (string, string, string) {
		if op, ok := m[r.Method]; ok {
			return op, id, ""
		}
		return "", "", allow
	}
	if rest == "" {
		return pick(map[string]string{http.MethodPost: OpRunMicrovm, http.MethodGet: OpListMicrovms}, "GET, POST")
	}
	segs := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	if rest[0] != '/' || len(segs) > 2 {
		return "", "", ""
	}
	var err error
	if id, err = url.PathUnescape(segs[0]); err != nil || id == "" {
		return "", "", ""
	}
	if len(segs) == 1 {
		return pick(map[string]string{http.MethodGet: OpGetMicrovm, http.MethodDelete: OpTerminateMicrovm}, "DELETE, GET")
	}
	switch segs[1] {
	case "suspend":
		return pick(map[string]string{http.MethodPost: OpSuspendMicrovm}, "POST")
	case "resume":
		return pick(map[string]string{http.MethodPost: OpResumeMicrovm}, "POST")
	case "auth-token":
		return pick(map[string]string{http.MethodPost: OpCreateMicrovmAuthToken}, "POST")
	}
	return "", "", ""
}

// ServeHTTP serves one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	op := ""
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok && errors.Is(e, http.ErrAbortHandler) {
				panic(p)
			}
			// The panic value may hold request data: log only where.
			h.log.Error("api: panic in handler", "op", op)
			if !rec.wrote {
				writeError(rec, http.StatusInternalServerError, microvmsapi.InternalServerException, "An internal error occurred.")
			}
		}
		h.log.Debug("api: request", "op", op, "method", r.Method, "status", rec.status, "duration", time.Since(start))
	}()
	if r.Header.Get("Origin") != "" {
		writeError(rec, http.StatusForbidden, microvmsapi.AccessDeniedException, "Requests from web pages are not accepted.")
		return
	}
	if !h.allowAnyHost && !loopbackHost(r.Host) {
		writeError(rec, http.StatusForbidden, microvmsapi.AccessDeniedException, "The Host header must name localhost or a loopback address.")
		return
	}
	op, id, allow := route(r)
	if op == "" {
		if allow != "" {
			rec.Header().Set("Allow", allow)
			writeError(rec, http.StatusMethodNotAllowed, UnknownOperationException, "The method is not allowed for this path.")
			return
		}
		writeError(rec, http.StatusNotFound, UnknownOperationException, "No operation matches the request.")
		return
	}
	if !h.buckets[op].allow(time.Now()) {
		rec.Header().Set("Retry-After", "1")
		writeError(rec, http.StatusTooManyRequests, microvmsapi.ThrottlingException, "Rate exceeded.")
		return
	}
	var out any
	var err error
	switch op {
	case OpRunMicrovm:
		out, err = h.run(rec, r)
	case OpListMicrovms:
		out, err = h.list(r)
	case OpGetMicrovm:
		out, err = h.be.Get(id)
	case OpTerminateMicrovm:
		out, err = struct{}{}, h.be.Terminate(id)
	case OpSuspendMicrovm, OpResumeMicrovm:
		if err = readJSON(rec, r, &struct{}{}); err == nil {
			f := h.be.Suspend
			if op == OpResumeMicrovm {
				f = h.be.Resume
			}
			out, err = struct{}{}, f(r.Context(), id)
		}
	case OpCreateMicrovmAuthToken:
		var in microvmsapi.CreateMicrovmAuthTokenInput
		if err = readJSON(rec, r, &in); err == nil {
			if err = excludeHooksPort(&in); err == nil {
				out, err = h.be.CreateAuthToken(id, in)
			}
		}
	}
	if err != nil {
		h.fail(rec, op, err)
		return
	}
	writeJSON(rec, http.StatusOK, out)
}

// excludeHooksPort keeps the lifecycle hooks' port (9000) out of every
// token, before anything is minted: a port 9000 or a range covering it is
// a ValidationException, and allPorts becomes the two ranges around it
// (what allPorts means on the endpoint anyway: the proxy never forwards to
// 9000). Input the registry refuses for other reasons is left to it.
func excludeHooksPort(in *microvmsapi.CreateMicrovmAuthTokenInput) error {
	const hooks = microvmsapi.HooksPort
	ok := func(p int) bool { return p >= 1 && p <= 65535 }
	all, wellFormed := false, len(in.AllowedPorts) <= registry.MaxAllowedPorts
	for i, p := range in.AllowedPorts {
		set := 0
		for _, b := range []bool{p.Port != nil, p.Range != nil, p.AllPorts != nil} {
			if b {
				set++
			}
		}
		switch {
		case set != 1:
			wellFormed = false
		case p.Port != nil:
			if *p.Port == hooks {
				return validation(fmt.Sprintf("allowedPorts[%d].port must not be %d, the lifecycle hooks' port.", i, hooks))
			}
			wellFormed = wellFormed && ok(*p.Port)
		case p.Range != nil:
			if !ok(p.Range.StartPort) || !ok(p.Range.EndPort) || p.Range.StartPort > p.Range.EndPort {
				wellFormed = false
			} else if p.Range.StartPort <= hooks && hooks <= p.Range.EndPort {
				return validation(fmt.Sprintf("allowedPorts[%d].range must not cover port %d, the lifecycle hooks' port.", i, hooks))
			}
		default:
			all = true
		}
	}
	if all && wellFormed {
		in.AllowedPorts = []microvmsapi.AllowedPort{
			{Range: &microvmsapi.PortRange{StartPort: 1, EndPort: hooks - 1}},
			{Range: &microvmsapi.PortRange{StartPort: hooks + 1, EndPort: 65535}},
		}
	}
	return nil
}

// fail answers err.
func (h *Handler) fail(w http.ResponseWriter, op string, err error) {
	var e *registry.Error
	if errors.As(err, &e) {
		writeError(w, microvmsapi.StatusOf(e.Type), e.Type, e.Message)
		return
	}
	h.log.Error("api: internal error", "op", op, "err", err)
	writeError(w, http.StatusInternalServerError, microvmsapi.InternalServerException, "An internal error occurred.")
}

func (h *Handler) run(w http.ResponseWriter, r *http.Request) (any, error) {
	var in microvmsapi.RunMicrovmInput
	var raw json.RawMessage
	if err := readJSONRaw(w, r, &in, &raw); err != nil {
		return nil, err
	}
	// Presence rules the typed struct cannot see.
	var seen struct {
		MaximumDurationInSeconds json.RawMessage            `json:"maximumDurationInSeconds"`
		IdlePolicy               map[string]json.RawMessage `json:"idlePolicy"`
	}
	_ = json.Unmarshal(raw, &seen)
	if d := seen.MaximumDurationInSeconds; d != nil && string(d) != "null" && in.MaximumDurationInSeconds == 0 {
		return nil, validation(fmt.Sprintf("maximumDurationInSeconds must be between %d and %d.",
			microvmsapi.MinDurationSeconds, microvmsapi.MaxDurationSeconds))
	}
	if p := seen.IdlePolicy; p != nil {
		for _, k := range []string{"maxIdleDurationSeconds", "suspendedDurationSeconds", "autoResumeEnabled"} {
			if v, ok := p[k]; !ok || string(v) == "null" {
				return nil, validation("idlePolicy must set maxIdleDurationSeconds, suspendedDurationSeconds and autoResumeEnabled.")
			}
		}
	}
	return h.be.Run(r.Context(), in)
}

func (h *Handler) list(r *http.Request) (any, error) {
	q := r.URL.Query()
	in := registry.ListInput{
		NextToken:       q.Get(microvmsapi.QueryNextToken),
		ImageIdentifier: q.Get(microvmsapi.QueryImageIdentifier),
		ImageVersion:    q.Get(microvmsapi.QueryImageVersion),
	}
	if q.Has(microvmsapi.QueryMaxResults) {
		n, err := strconv.Atoi(q.Get(microvmsapi.QueryMaxResults))
		if err != nil || n < 1 || n > microvmsapi.MaxListResults {
			return nil, validation(fmt.Sprintf("maxResults must be between 1 and %d.", microvmsapi.MaxListResults))
		}
		in.MaxResults = n
	}
	if q.Has(microvmsapi.QueryNextToken) && in.NextToken == "" {
		return nil, validation("nextToken is not valid.")
	}
	return h.be.List(in)
}

func validation(msg string) error {
	return &registry.Error{Type: microvmsapi.ValidationException, Message: msg}
}

// readJSON decodes the request body, which must be one JSON object with
// only fields v knows (an empty body counts as {}), into v.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return readJSONRaw(w, r, v, nil)
}

// readJSONRaw is readJSON that also returns the body when raw is not nil.
func readJSONRaw(w http.ResponseWriter, r *http.Request, v any, raw *json.RawMessage) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return validation(fmt.Sprintf("The request body exceeds %d bytes.", MaxBodyBytes))
		}
		return validation("The request body could not be read.")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if raw != nil {
		*raw = body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
			return validation("The request body is not valid JSON.")
		case errors.As(err, &te) && te.Field != "":
			// Field is a path of the operation's own field names.
			return validation(fmt.Sprintf("The field %s has the wrong type.", te.Field))
		case errors.As(err, &te):
			return validation("The request body must be a JSON object.")
		default: // an unknown field; its name is the caller's text
			return validation("The request body has a field this operation does not accept.")
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return validation("The request body must hold exactly one JSON object.")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, microvmsapi.InternalServerException, "An internal error occurred.")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(microvmsapi.Error{Type: typ, Message: msg})
	h := w.Header()
	h.Set(microvmsapi.ErrorTypeHeader, typ)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// loopbackHost reports whether a Host header names localhost or a
// loopback address (with or without a port). An empty Host (HTTP/1.0)
// passes: browsers always send one.
func loopbackHost(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// recorder remembers the status for the request log.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// bucket is a token bucket; a nil bucket allows everything.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate float64) *bucket {
	if rate <= 0 {
		return nil
	}
	burst := math.Max(1, math.Ceil(rate))
	return &bucket{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

func (b *bucket) allow(now time.Time) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(b.burst, b.tokens+el*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
