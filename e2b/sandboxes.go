package e2b

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Per-request bounds of the control plane.
const (
	createTimeout = 3 * time.Minute
	callTimeout   = 90 * time.Second
	// DefaultListLimit and MaxListLimit bound a page of GET /v2/sandboxes.
	DefaultListLimit = 100
	MaxListLimit     = 100
)

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	m.HandleFunc("POST /sandboxes", s.handleCreate)
	m.HandleFunc("POST /v2/sandboxes", s.handleCreate)
	m.HandleFunc("GET /sandboxes", s.handleList)
	m.HandleFunc("GET /v2/sandboxes", s.handleList)
	m.HandleFunc("GET /sandboxes/{id}", s.handleGet)
	m.HandleFunc("DELETE /sandboxes/{id}", s.handleKill)
	m.HandleFunc("POST /sandboxes/{id}/connect", s.handleConnect)
	m.HandleFunc("POST /v2/sandboxes/{id}/connect", s.handleConnect)
	m.HandleFunc("POST /sandboxes/{id}/resume", s.handleResume)
	m.HandleFunc("POST /sandboxes/{id}/timeout", s.handleTimeout)
	m.HandleFunc("POST /sandboxes/{id}/refreshes", s.handleRefresh)
	m.HandleFunc("POST /sandboxes/{id}/pause", s.handlePause)
	m.HandleFunc("GET /sandboxes/{id}/metrics", s.handleMetrics)
	m.HandleFunc("GET /sandboxes/{id}/logs", s.handleLogs)
	m.HandleFunc("GET /v2/sandboxes/{id}/logs", s.handleLogsV2)
	m.HandleFunc("PUT /sandboxes/{id}/network", s.handleNetwork)
	m.HandleFunc("POST /sandboxes/{id}/fork", s.handleFork)
	m.HandleFunc("POST /sandboxes/{id}/snapshots", s.handleSnapshotCreate)
	m.HandleFunc("GET /snapshots", s.handleSnapshotList)
	m.HandleFunc("DELETE /templates/{templateID}", s.handleTemplateDelete)
	s.templateRoutes()
	s.unsupportedRoutes()
}

// sandboxID reads {id}, mapping E2B's debug id.
func (s *Server) sandboxID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if id == DebugSandboxID && s.opts.DebugSandboxID != "" {
		id = s.opts.DebugSandboxID
	}
	if !validID(id) {
		writeError(w, http.StatusBadRequest, "invalid sandbox id")
		return "", false
	}
	if sw, ok := w.(*statusWriter); ok {
		sw.sandbox = id
	}
	return id, true
}

// template maps an E2B templateID onto a Rayito template.
func (s *Server) template(id string) (string, error) {
	if t, ok := s.opts.Templates[id]; ok {
		return t, nil
	}
	// A template built through the gateway (templates.go).
	if t, ok := s.builtTemplate(id); ok {
		return t, nil
	}
	if len(s.opts.Templates) == 0 {
		return "", nil
	}
	if t, ok := s.opts.Templates[""]; ok {
		return t, nil
	}
	return "", fmt.Errorf("template %q is not available on this gateway", id)
}

func seconds(v *int64, def time.Duration, what string) (time.Duration, error) {
	if v == nil {
		return def, nil
	}
	if *v < 1 || *v > int64(MaxTimeout/time.Second) {
		return 0, fmt.Errorf("%s must be 1 to %d seconds, got %d", what, int64(MaxTimeout/time.Second), *v)
	}
	return time.Duration(*v) * time.Second, nil
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req createReq
	if code, msg := decode(r, &req); code != 0 {
		writeError(w, code, msg)
		return
	}
	if msg := createUnsupported(&req); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	templateID := DefaultTemplateID
	if req.TemplateID != nil && *req.TemplateID != "" {
		templateID = *req.TemplateID
	}
	// A snapshot's id as templateID: a sandbox of the snapshot's source
	// template, its files restored before the answer.
	var snap *snapshotMeta
	var snapArch *snapArchive
	if s.snaps != nil && strings.HasPrefix(templateID, SnapshotIDPrefix) {
		var ok bool
		if snap, snapArch, ok = s.createSnapshot(w, templateID); !ok {
			return
		}
		defer snapArch.Close()
		templateID = snap.TemplateID
		if templateID == "" {
			// A checkpoint of rayd's, copied in: the default template.
			templateID = DefaultTemplateID
		}
	}
	var tmpl string
	if snap != nil && snap.Template != "" {
		tmpl = snap.Template
	} else {
		t, err := s.template(templateID)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		tmpl = t
	}
	timeout, err := seconds(req.Timeout, DefaultTimeout, "timeout")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rec, err := createRecord(&req, templateID)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	spec := createSpec{Template: tmpl, Timeout: timeout, OnTimeout: rec.onTimeout, AutoResume: rec.autoResume, Envs: req.EnvVars}
	if err := createNetwork(&req, rec, &spec); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	md := maps.Clone(req.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	md[labelKey] = rec.label()
	spec.Metadata = md

	ctx, cancel := context.WithTimeout(r.Context(), createTimeout)
	defer cancel()
	sbx, err := s.plat.create(ctx, spec)
	if err != nil {
		code, msg := createErrorStatus(err, templateID)
		s.log.Warn("e2b create failed", "status", code)
		writeError(w, code, msg)
		return
	}
	rec.id = sbx.ID()
	rec.endAt = time.Now().Add(timeout)
	if sw, ok := w.(*statusWriter); ok {
		sw.sandbox = rec.id
	}
	if snap != nil {
		if err := s.restoreSnapshot(r.Context(), sbx, snapArch); err != nil {
			s.killQuietly(r.Context(), rec.id)
			code, msg := errorStatus(rec.id, err)
			s.log.Warn("e2b restore of a snapshot failed", "status", code)
			writeError(w, code, "restoring the snapshot: "+msg)
			return
		}
	}
	s.fillSizes(ctx, rec, sbx)
	s.remember(rec)
	s.addConn(rec.id, sbx)
	writeJSON(w, http.StatusCreated, s.sandboxOut(rec, sbx))
}

// createUnsupported is the refusal of what E2B has and the gateway does
// not ("" when req asks for none): a clear refusal, never a silent no-op.
func createUnsupported(req *createReq) string {
	switch {
	case present(req.IAM):
		return unsupportedMsg("iam (AWS IAM roles for sandboxes)")
	case present(req.MCP):
		return unsupportedMsg("mcp (the MCP gateway)")
	case present(req.VolumeMounts):
		return unsupportedMsg("volumeMounts (volumes)")
	case req.AutoPauseMemory != nil && !*req.AutoPauseMemory:
		return unsupportedMsg("autoPauseMemory:false (a pause that drops memory)")
	}
	return ""
}

// createSnapshot loads the snapshot id and its archive, checked whole
// (size, sha256, every entry) before any sandbox is made. When it cannot,
// it answers w and is false; else the caller closes the archive.
func (s *Server) createSnapshot(w http.ResponseWriter, id string) (*snapshotMeta, *snapArchive, bool) {
	m, err := s.snaps.load(id)
	if err != nil {
		code, msg := errorStatus("", err)
		if code == http.StatusNotFound {
			code = http.StatusBadRequest
		}
		writeError(w, code, msg)
		return nil, nil, false
	}
	a, err := s.snaps.verify(m.SnapshotID, s.maxCopy)
	if err != nil {
		code, msg := errorStatus("", err)
		s.log.Warn("e2b: a snapshot was refused", "status", code)
		writeError(w, code, msg)
		return nil, nil, false
	}
	return m, a, true
}

// createRecord is the record of a create of templateID: its security,
// traffic, timeout action, autoResume, metadata and envs. Its error is a
// bad request's message.
func createRecord(req *createReq, templateID string) (*record, error) {
	rec := &record{templateID: templateID, secure: true, public: true, onTimeout: rayito.TimeoutKill, complete: true,
		metadata: maps.Clone(req.Metadata), allowInternet: req.AllowInternetAccess, envs: maps.Clone(req.EnvVars)}
	if req.Secure != nil {
		rec.secure = *req.Secure
	}
	if req.AutoPause != nil && *req.AutoPause {
		rec.onTimeout = rayito.TimeoutPause
	}
	if req.AutoResume != nil && req.AutoResume.Enabled {
		if rec.onTimeout != rayito.TimeoutPause {
			return nil, errors.New("autoResume needs autoPause")
		}
		rec.autoResume = true
	}
	if _, ok := req.Metadata[labelKey]; ok {
		return nil, fmt.Errorf("metadata key %q is reserved by Rayito's E2B gateway", labelKey)
	}
	return rec, nil
}

// createNetwork applies req's network and allowInternetAccess to spec
// and rec (public traffic, header rules, the network as reported). Its
// error is a bad request's message.
func createNetwork(req *createReq, rec *record, spec *createSpec) error {
	allowOut, denyOut, proxy := []string(nil), []string(nil), (*rayito.EgressProxy)(nil)
	if n := req.Network; n != nil {
		switch {
		case n.MaskRequestHost != nil:
			return errors.New(unsupportedMsg("network.maskRequestHost"))
		case present(n.HTTPSPorts):
			return errors.New(unsupportedMsg("network.httpsPorts"))
		}
		if n.AllowPublicTraffic != nil {
			rec.public = *n.AllowPublicTraffic
		}
		rules, err := parseRules(n.Rules)
		if err != nil {
			return err
		}
		spec.HeaderRules, rec.headerRules = rules, rules
		allowOut, denyOut = n.AllowOut, n.DenyOut
		if n.EgressProxy != nil {
			if n.EgressProxy.Address == "" {
				return errors.New("network.egressProxy.address is required")
			}
			proxy = &rayito.EgressProxy{Address: n.EgressProxy.Address, Username: n.EgressProxy.Username, Password: n.EgressProxy.Password}
		}
		out := &networkOut{AllowOut: allowOut, DenyOut: denyOut}
		if n.AllowPublicTraffic != nil {
			out.AllowPublicTraffic = n.AllowPublicTraffic
		}
		if proxy != nil {
			out.EgressProxy = &egressProxyOut{Address: proxy.Address, Username: proxy.Username}
		}
		rec.network = out
	}
	deny := req.AllowInternetAccess != nil && !*req.AllowInternetAccess
	switch {
	case deny && len(allowOut) == 0 && len(denyOut) == 0 && proxy == nil:
		spec.DenyInternet = true
	case deny:
		spec.Network = &rayito.NetworkPolicy{AllowOut: allowOut, DenyOut: append(slices.Clone(denyOut), "0.0.0.0/0", "::/0"), EgressProxy: proxy}
	case len(allowOut) > 0 || len(denyOut) > 0 || proxy != nil:
		spec.Network = &rayito.NetworkPolicy{AllowOut: allowOut, DenyOut: denyOut, EgressProxy: proxy}
	}
	return nil
}

func (s *Server) sandboxOut(rec *record, sbx sandbox) sandboxOut {
	out := sandboxOut{SandboxID: rec.id, TemplateID: rec.templateID, ClientID: ClientID, EnvdVersion: EnvdVersion,
		TrafficAccessToken: trafficToken(rec.id, sbx.AccessToken()), Domain: s.opts.Domain}
	if rec.secure {
		out.EnvdAccessToken = sbx.AccessToken()
	}
	return out
}

// state is the platform's view of id: 404 (written) when it is unknown or
// ended.
func (s *Server) state(ctx context.Context, w http.ResponseWriter, id string) (*rayito.Info, bool) {
	info, err := s.plat.getInfo(ctx, id)
	if err == nil && isEnded(info.State) {
		s.forget(id)
		err = errNotRunning
	}
	if err != nil {
		writeStatus(w, id, err)
		return nil, false
	}
	return info, true
}

// writeStatus answers err about sandbox id in E2B's error shape.
func writeStatus(w http.ResponseWriter, id string, err error) {
	code, msg := statusOf(id, err)
	writeError(w, code, msg)
}

// running is state for a call that needs the sandbox running: a paused
// one is answered 409 with pausedMsg (a format with the id's %q), and the
// connection to a running one is returned.
func (s *Server) running(ctx context.Context, w http.ResponseWriter, id, pausedMsg string) (*rayito.Info, *conn, bool) {
	info, ok := s.state(ctx, w, id)
	if !ok {
		return nil, nil, false
	}
	if isPaused(info.State) {
		writeError(w, http.StatusConflict, fmt.Sprintf(pausedMsg, id))
		return nil, nil, false
	}
	c, err := s.connFor(ctx, id)
	if err != nil {
		writeStatus(w, id, err)
		return nil, nil, false
	}
	return info, c, true
}

func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	s.connectOrResume(w, r, false)
}

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	s.connectOrResume(w, r, true)
}

func (s *Server) connectOrResume(w http.ResponseWriter, r *http.Request, resumeOnly bool) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return
	}
	var req connectReq
	if code, msg := decode(r, &req); code != 0 {
		writeError(w, code, msg)
		return
	}
	if req.Memory != nil && !*req.Memory {
		writeError(w, http.StatusBadRequest, unsupportedMsg("memory:false (a resume that reboots the sandbox)"))
		return
	}
	var timeout time.Duration
	if req.Timeout != nil {
		d, err := seconds(req.Timeout, 0, "timeout")
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), createTimeout)
	defer cancel()
	info, ok := s.state(ctx, w, id)
	if !ok {
		return
	}
	resumed := false
	if isPaused(info.State) {
		if err := s.plat.resume(ctx, id); err != nil {
			writeStatus(w, id, err)
			return
		}
		resumed = true
		s.dropConn(id)
	} else if resumeOnly {
		writeError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is already running", id))
		return
	}
	c, err := s.connFor(ctx, id)
	if err != nil {
		writeStatus(w, id, err)
		return
	}
	rec := s.learn(ctx, &rayito.Info{ID: id, State: "RUNNING", Template: info.Template})
	if timeout == 0 && resumed {
		timeout = DefaultTimeout
	}
	if timeout > 0 {
		l, err := c.sbx.SetTimeout(ctx, timeout, true)
		if err != nil {
			writeStatus(w, id, err)
			return
		}
		s.setEnd(id, l)
	}
	code := http.StatusOK
	if resumed || resumeOnly {
		code = http.StatusCreated
	}
	writeJSON(w, code, s.sandboxOut(rec, c.sbx))
}

func (s *Server) setEnd(id string, l *rayito.Lifecycle) {
	if l == nil || l.Deadline.IsZero() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.known[id]; r != nil {
		r.endAt = l.Deadline
	}
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	if _, ok := s.state(ctx, w, id); !ok {
		return
	}
	if err := s.plat.kill(ctx, id); err != nil {
		writeStatus(w, id, err)
		return
	}
	s.forget(id)
	noContent(w)
}

func (s *Server) handleTimeout(w http.ResponseWriter, r *http.Request) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return
	}
	var req timeoutReq
	if code, msg := decode(r, &req); code != 0 {
		writeError(w, code, msg)
		return
	}
	if req.Timeout == nil {
		writeError(w, http.StatusBadRequest, "timeout is required")
		return
	}
	s.moveDeadline(w, r, id, req.Timeout, "timeout", false)
}

func (s *Server) handleRefresh(w http.ResponseWriter, r *http.Request) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return
	}
	var req refreshReq
	if code, msg := decode(r, &req); code != 0 {
		writeError(w, code, msg)
		return
	}
	if req.Duration == nil {
		d := int64(DefaultTimeout / time.Second)
		req.Duration = &d
	}
	s.moveDeadline(w, r, id, req.Duration, "duration", true)
}

func (s *Server) moveDeadline(w http.ResponseWriter, r *http.Request, id string, v *int64, what string, atLeast bool) {
	d, err := seconds(v, 0, what)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	info, c, ok := s.running(ctx, w, id, "sandbox %q is paused: connect to it to resume it first")
	if !ok {
		return
	}
	l, err := c.sbx.SetTimeout(ctx, d, atLeast)
	if err != nil {
		writeStatus(w, id, err)
		return
	}
	s.learn(ctx, info)
	s.setEnd(id, l)
	noContent(w)
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return
	}
	var req pauseReq
	if code, msg := decode(r, &req); code != 0 {
		writeError(w, code, msg)
		return
	}
	if req.Memory != nil && !*req.Memory {
		writeError(w, http.StatusBadRequest, unsupportedMsg("memory:false (a pause that drops memory)"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), createTimeout)
	defer cancel()
	info, ok := s.state(ctx, w, id)
	if !ok {
		return
	}
	if isPaused(info.State) {
		writeError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is already paused", id))
		return
	}
	// Read the labels while it still runs: a paused sandbox cannot say.
	s.learn(ctx, info)
	if err := s.plat.pause(ctx, id); err != nil {
		writeStatus(w, id, err)
		return
	}
	s.dropConn(id)
	noContent(w)
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	info, ok := s.state(ctx, w, id)
	if !ok {
		return
	}
	rec := s.learn(ctx, info)
	out := detailOut{listedOut: listed(rec, info), AllowInternetAccess: rec.allowInternet, Network: rec.network,
		Lifecycle: lifecycleOut{OnTimeout: string(rec.onTimeout), AutoResume: rec.autoResume}, Domain: s.opts.Domain}
	if info.State == "RUNNING" {
		if c, err := s.connFor(ctx, id); err == nil {
			if rec.secure {
				out.EnvdAccessToken = c.sbx.AccessToken()
			}
			if full, err := c.sbx.Info(ctx); err == nil && full.Lifecycle != nil && !full.Lifecycle.Deadline.IsZero() {
				out.EndAt = rfc3339(full.Lifecycle.Deadline)
				s.setEnd(id, full.Lifecycle)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func listed(rec *record, info *rayito.Info) listedOut {
	end := rec.endAt
	if end.IsZero() {
		end = info.ExpiresAt
	}
	if end.IsZero() {
		end = info.StartedAt
	}
	md := rec.metadata
	if md == nil {
		md = map[string]string{}
	}
	return listedOut{SandboxID: info.ID, TemplateID: rec.templateID, ClientID: ClientID, Metadata: md,
		StartedAt: rfc3339(info.StartedAt), EndAt: rfc3339(end), State: e2bState(info.State),
		CPUCount: rec.cpuCount, MemoryMB: rec.memoryMB, DiskSizeMB: rec.diskSizeMB, EnvdVersion: EnvdVersion}
}

// parseMetadataFilter reads E2B's list filter: the query parameter is a
// form-encoded "k=v&..." whose keys and values are URL-encoded once more.
func parseMetadataFilter(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	form, err := url.ParseQuery(raw)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, vs := range form {
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			val, err := url.QueryUnescape(v)
			if err != nil {
				return nil, err
			}
			out[key] = val
		}
	}
	return out, nil
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	states := map[string]bool{"running": true, "paused": true}
	if vs := q["state"]; len(vs) > 0 && strings.Join(vs, "") != "" {
		states = map[string]bool{}
		for _, st := range strings.Split(strings.Join(vs, ","), ",") {
			st = strings.TrimSpace(st)
			if st != "running" && st != "paused" {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid state %q (running, paused)", st))
				return
			}
			states[st] = true
		}
	}
	filter, err := parseMetadataFilter(q.Get("metadata"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid metadata filter")
		return
	}
	limit, cursor, err := pageParams(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var after time.Time
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "startedAfter must be an RFC 3339 time")
			return
		}
		after = t
	}
	asc := false
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		asc = true
	default:
		writeError(w, http.StatusBadRequest, "order must be asc or desc")
		return
	}
	template := q.Get("template")
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	infos, err := s.plat.list(ctx)
	if err != nil {
		code, msg := statusOf("", err)
		writeError(w, code, msg)
		return
	}
	slices.SortFunc(infos, func(a, b rayito.Info) int {
		c := a.StartedAt.Compare(b.StartedAt)
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if !asc {
			c = -c
		}
		return c
	})
	out := []listedOut{}
	var last *pageKey
	more := false
	for i := range infos {
		info := &infos[i]
		st := e2bState(info.State)
		if st == "" || !states[st] || (!after.IsZero() && !info.StartedAt.After(after)) {
			continue
		}
		k := pageKey{info.StartedAt.UnixNano(), info.ID}
		if cursor != nil && !k.after(*cursor, asc) {
			continue
		}
		rec := s.learn(ctx, info)
		if template != "" && rec.templateID != template {
			continue
		}
		if !matchesAll(rec.metadata, filter) {
			continue
		}
		if len(out) == limit {
			more = true
			break
		}
		out = append(out, listed(rec, info))
		last = &k
	}
	if more && last != nil {
		w.Header().Set("X-Next-Token", last.String())
	}
	writeJSON(w, http.StatusOK, out)
}

func matchesAll(md, want map[string]string) bool {
	for k, v := range want {
		if got, ok := md[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// pageKey is a position in the listing's order.
type pageKey struct {
	started int64
	id      string
}

// pageParams reads a listing's limit (DefaultListLimit when absent; a
// larger one is cut to MaxListLimit, X-Next-Token pages on) and
// nextToken (nil when absent).
func pageParams(q url.Values) (int, *pageKey, error) {
	limit := DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, nil, errors.New("limit must be a positive integer")
		}
		limit = min(n, MaxListLimit)
	}
	if v := q.Get("nextToken"); v != "" {
		k, err := parsePageKey(v)
		if err != nil {
			return 0, nil, errors.New("invalid nextToken")
		}
		return limit, &k, nil
	}
	return limit, nil, nil
}

func (k pageKey) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.started, 10) + ":" + k.id))
}

func parsePageKey(s string) (pageKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return pageKey{}, err
	}
	ts, id, ok := strings.Cut(string(b), ":")
	if !ok || !validID(id) {
		return pageKey{}, fmt.Errorf("bad token")
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return pageKey{}, err
	}
	return pageKey{n, id}, nil
}

// after says k comes after c in the listing's order.
func (k pageKey) after(c pageKey, asc bool) bool {
	cmp := 0
	switch {
	case k.started < c.started:
		cmp = -1
	case k.started > c.started:
		cmp = 1
	default:
		cmp = strings.Compare(k.id, c.id)
	}
	if asc {
		return cmp > 0
	}
	return cmp < 0
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var from, to time.Time
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"start", &from}, {"end", &to}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				writeError(w, http.StatusBadRequest, p.name+" must be unix seconds")
				return
			}
			*p.t = time.Unix(n, 0)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	_, c, ok := s.running(ctx, w, id, "sandbox %q is paused: its metrics are read from it while it runs")
	if !ok {
		return
	}
	ms, err := c.sbx.MetricsHistory(ctx, from, to)
	if err != nil {
		writeStatus(w, id, err)
		return
	}
	out := make([]metricOut, 0, len(ms))
	for _, m := range ms {
		out = append(out, metricOut{Timestamp: rfc3339(m.Time), TimestampUnix: m.Time.Unix(), CPUCount: m.CPUCount,
			CPUUsedPct: m.CPUPercent, MemUsed: m.MemUsed, MemTotal: m.MemTotal, MemCache: m.MemCache,
			DiskUsed: m.DiskUsed, DiskTotal: m.DiskTotal})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleNetwork(w http.ResponseWriter, r *http.Request) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return
	}
	var req updateNetworkReq
	if code, msg := decode(r, &req); code != 0 {
		writeError(w, code, msg)
		return
	}
	rules, err := parseRules(req.Rules)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	p := rayito.NetworkPolicy{AllowOut: req.AllowOut, DenyOut: req.DenyOut}
	if req.EgressProxy != nil {
		if req.EgressProxy.Address == "" {
			writeError(w, http.StatusBadRequest, "egressProxy.address is required")
			return
		}
		p.EgressProxy = &rayito.EgressProxy{Address: req.EgressProxy.Address, Username: req.EgressProxy.Username, Password: req.EgressProxy.Password}
	}
	if req.AllowInternetAccess != nil && !*req.AllowInternetAccess {
		p.DenyOut = append(slices.Clone(p.DenyOut), "0.0.0.0/0", "::/0")
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	info, c, ok := s.running(ctx, w, id, "sandbox %q is paused: connect to it to resume it first")
	if !ok {
		return
	}
	if _, err := c.sbx.UpdateNetwork(ctx, p); err != nil {
		writeStatus(w, id, err)
		return
	}
	// As on E2B, the body replaces the rules: absent, they go (a sandbox
	// this gateway knows none of is left alone).
	if known := s.recordOf(id); len(rules) > 0 || known != nil && len(known.headerRules) > 0 {
		if err := s.plat.setHeaderRules(ctx, id, rules); err != nil {
			code, msg := errorStatus(id, err)
			writeError(w, code, msg)
			return
		}
	}
	s.learn(ctx, info)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.known[id]
	if rec == nil {
		noContent(w)
		return
	}
	out := &networkOut{AllowOut: req.AllowOut, DenyOut: req.DenyOut}
	if rec.network != nil {
		out.AllowPublicTraffic = rec.network.AllowPublicTraffic
	}
	if p.EgressProxy != nil {
		out.EgressProxy = &egressProxyOut{Address: p.EgressProxy.Address, Username: p.EgressProxy.Username}
	}
	rec.network = out
	rec.headerRules = rules
	if req.AllowInternetAccess != nil {
		v := *req.AllowInternetAccess
		rec.allowInternet = &v
	}
	noContent(w)
}
