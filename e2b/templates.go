package e2b

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/template"
)

// E2B's template build API (the e2b SDK's Template.build: request a
// build, upload each COPY step's files, start the build with its steps,
// poll its status and logs) mapped onto templates of Rayito's local
// platform. A template named NAME through E2B is the Rayito template
// TemplatePrefix+NAME; Sandbox.create(NAME) starts a sandbox of it.

// TemplatePrefix starts the Rayito name of every template built through
// the gateway: E2B's name "web" is Rayito's "e2b-web", so that an E2B
// build never replaces a template made with `rayito template build`.
const TemplatePrefix = "e2b-"

// TemplateUploadPath is where the gateway receives a COPY step's files:
// TemplateUploadPath + a single-use, unguessable token (the upload URL
// E2B's files endpoint hands out instead of a presigned S3 URL). It needs
// no API key: the token is the credential.
const TemplateUploadPath = "/_rayito/e2b/template-files/"

// Template build limits.
const (
	// templateUploadTTL is how long an upload URL is good for.
	templateUploadTTL = time.Hour
	// maxTemplateCacheBytes caps the uploaded files the gateway keeps (by
	// hash, for later builds); the oldest unused go first.
	maxTemplateCacheBytes = 4 << 30
	// maxPendingUploads caps the upload URLs handed out and not used.
	maxPendingUploads = 1024
	// maxTemplateBuilds caps the builds the gateway remembers (the oldest
	// finished go first).
	maxTemplateBuilds = 256
	// maxBuildLogEntries caps the log entries kept per build.
	maxBuildLogEntries = 20_000
	// maxLogEntriesPerStatus is what one status call returns at most (as
	// E2B's API).
	maxLogEntriesPerStatus = 100
	// templateBuildTimeout bounds a build (the platform's own is 30 min).
	templateBuildTimeout = 40 * time.Minute
)

// E2B's template build states.
const (
	buildWaiting  = "waiting"
	buildBuilding = "building"
	buildReady    = "ready"
	buildError    = "error"
)

// templateStore is the gateway's state of E2B template builds: builds in
// memory, uploaded files in a private temporary directory.
type templateStore struct {
	mu      sync.Mutex
	dir     string // "" until the first upload
	files   map[string]*storedFiles
	uploads map[string]pendingUpload // token -> upload
	builds  map[string]*e2bBuild     // buildID -> build
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  bool
}

type storedFiles struct {
	path string
	size int64
	used time.Time
	refs int // builds about to read it
}

type pendingUpload struct {
	hash    string
	expires time.Time
}

// e2bBuild is one build of an E2B template.
type e2bBuild struct {
	id, alias  string
	status     string
	reason     *buildReasonOut
	logs       []buildLogOut
	createdAt  time.Time
	updatedAt  time.Time
	finishedAt time.Time
}

// Wire shapes.

type templateRequestReq struct {
	Name          *string         `json:"name"`
	Alias         *string         `json:"alias"`
	Tags          []string        `json:"tags"`
	CPUCount      *int            `json:"cpuCount"`
	MemoryMB      *int            `json:"memoryMB"`
	MinFreeDiskMB *int            `json:"minFreeDiskMb"`
	TeamID        *string         `json:"teamID"`
	Dockerfile    json.RawMessage `json:"dockerfile"`
	StartCmd      json.RawMessage `json:"startCmd"`
	ReadyCmd      json.RawMessage `json:"readyCmd"`
}

type templateRequestOut struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Names      []string `json:"names"`
	Aliases    []string `json:"aliases"`
	Tags       []string `json:"tags"`
	Public     bool     `json:"public"`
}

type fileUploadOut struct {
	Present bool              `json:"present"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

type buildLogOut struct {
	Timestamp string `json:"timestamp"`
	Level     string `json:"level"`
	Message   string `json:"message"`
	Step      string `json:"step,omitempty"`
}

type buildReasonOut struct {
	Message    string        `json:"message"`
	Step       string        `json:"step,omitempty"`
	LogEntries []buildLogOut `json:"logEntries"`
}

type buildInfoOut struct {
	BuildID    string          `json:"buildID"`
	TemplateID string          `json:"templateID"`
	Status     string          `json:"status"`
	LogEntries []buildLogOut   `json:"logEntries"`
	Logs       []string        `json:"logs"`
	Reason     *buildReasonOut `json:"reason,omitempty"`
}

type templateOut struct {
	TemplateID    string   `json:"templateID"`
	BuildID       string   `json:"buildID"`
	BuildStatus   string   `json:"buildStatus"`
	BuildCount    int      `json:"buildCount"`
	Names         []string `json:"names"`
	Aliases       []string `json:"aliases"`
	Public        bool     `json:"public"`
	CPUCount      int      `json:"cpuCount"`
	MemoryMB      int      `json:"memoryMB"`
	DiskSizeMB    int      `json:"diskSizeMB"`
	EnvdVersion   string   `json:"envdVersion"`
	CreatedAt     string   `json:"createdAt"`
	UpdatedAt     string   `json:"updatedAt"`
	CreatedBy     *string  `json:"createdBy"`
	LastSpawnedAt *string  `json:"lastSpawnedAt"`
	SpawnCount    int      `json:"spawnCount"`
}

type templateBuildOut struct {
	BuildID    string `json:"buildID"`
	Status     string `json:"status"`
	CPUCount   int    `json:"cpuCount"`
	MemoryMB   int    `json:"memoryMB"`
	CreatedAt  string `json:"createdAt"`
	UpdatedAt  string `json:"updatedAt"`
	FinishedAt string `json:"finishedAt,omitempty"`
}

type templateWithBuildsOut struct {
	TemplateID    string             `json:"templateID"`
	Names         []string           `json:"names"`
	Aliases       []string           `json:"aliases"`
	Public        bool               `json:"public"`
	Builds        []templateBuildOut `json:"builds"`
	CreatedAt     string             `json:"createdAt"`
	UpdatedAt     string             `json:"updatedAt"`
	LastSpawnedAt *string            `json:"lastSpawnedAt"`
	SpawnCount    int                `json:"spawnCount"`
}

func newTemplateStore() *templateStore {
	ctx, cancel := context.WithCancel(context.Background())
	return &templateStore{files: map[string]*storedFiles{}, uploads: map[string]pendingUpload{}, builds: map[string]*e2bBuild{}, ctx: ctx, cancel: cancel}
}

// templateRoutes registers the template build API.
func (s *Server) templateRoutes() {
	s.tmpl = newTemplateStore()
	m := s.mux
	m.HandleFunc("POST /v3/templates", s.handleTemplateRequest)
	m.HandleFunc("POST /v2/templates", s.handleTemplateRequest)
	m.HandleFunc("GET /templates/{templateID}/files/{hash}", s.handleTemplateFiles)
	m.HandleFunc("POST /v2/templates/{templateID}/builds/{buildID}", s.handleTemplateBuildStart)
	m.HandleFunc("GET /templates/{templateID}/builds/{buildID}/status", s.handleTemplateBuildStatus)
	m.HandleFunc("GET /templates/aliases/{alias}", s.handleTemplateAlias)
	m.HandleFunc("GET /templates", s.handleTemplateList)
	m.HandleFunc("GET /templates/{templateID}", s.handleTemplateGet)
	for _, p := range []string{"POST /templates/tags", "DELETE /templates/tags"} {
		m.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusNotImplemented, unsupportedMsg("template tags"))
		})
	}
}

// closeTemplates stops the builds' watchers and removes the uploaded
// files (builds on the platform go on).
func (s *Server) closeTemplates() {
	st := s.tmpl
	if st == nil {
		return
	}
	st.mu.Lock()
	st.closed = true
	dir := st.dir
	st.mu.Unlock()
	st.cancel()
	st.wg.Wait()
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// templates is the platform's template API, or nil (501).
func (s *Server) templates(w http.ResponseWriter) templatePlatform {
	tp, ok := s.plat.(templatePlatform)
	if !ok {
		writeError(w, http.StatusNotImplemented, unsupportedMsg("templates"))
		return nil
	}
	return tp
}

// templateAlias checks an E2B template name as the gateway takes it.
func templateAlias(name string) (string, error) {
	switch {
	case name == "":
		return "", errors.New("a template name is required")
	case strings.Contains(name, ":"):
		return "", errors.New(unsupportedMsg("template tags (name:tag)"))
	case strings.Contains(name, "/"):
		return "", errors.New(unsupportedMsg("template namespaces (namespace/name)"))
	case name == DefaultTemplateID || name == localBase || strings.HasPrefix(name, SnapshotIDPrefix):
		return "", fmt.Errorf("the template name %q is reserved by Rayito's E2B gateway", name)
	case !ptemplate.ValidName(TemplatePrefix + name):
		return "", fmt.Errorf("a template name is 1 to %d of a-z, 0-9, '-' and '_', starting with a letter or digit", ptemplate.MaxNameLen-len(TemplatePrefix))
	}
	return name, nil
}

func (s *Server) handleTemplateRequest(w http.ResponseWriter, r *http.Request) {
	tp := s.templates(w)
	if tp == nil {
		return
	}
	var req templateRequestReq
	if code, msg := decode(r, &req); code != 0 {
		writeError(w, code, msg)
		return
	}
	switch {
	case len(req.Tags) > 0:
		writeError(w, http.StatusBadRequest, unsupportedMsg("template tags"))
		return
	case req.CPUCount != nil:
		writeError(w, http.StatusBadRequest, unsupportedMsg("cpuCount of a template (sandboxes share the platform's CPUs)"))
		return
	case req.MemoryMB != nil:
		writeError(w, http.StatusBadRequest, unsupportedMsg("memoryMB of a template"))
		return
	case req.MinFreeDiskMB != nil:
		writeError(w, http.StatusBadRequest, unsupportedMsg("minFreeDiskMb of a template"))
		return
	case req.TeamID != nil:
		writeError(w, http.StatusBadRequest, unsupportedMsg("teamID (teams)"))
		return
	case present(req.Dockerfile), present(req.StartCmd), present(req.ReadyCmd):
		writeError(w, http.StatusBadRequest, unsupportedMsg("the v1 template build (use the SDK's Template.build)"))
		return
	}
	name := ""
	switch {
	case req.Name != nil && *req.Name != "":
		name = *req.Name
	case req.Alias != nil:
		name = *req.Alias
	}
	alias, err := templateAlias(name)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// The platform says now whether it builds templates (the local
	// platform does; on AWS the SDK refuses: 501), not after the uploads.
	if _, err := tp.getTemplate(r.Context(), TemplatePrefix+alias); err != nil && !errors.Is(err, rayito.ErrNotFound) {
		code, msg := templateStatusOf(alias, err)
		writeError(w, code, msg)
		return
	}
	id, err := newBuildID()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	st := s.tmpl
	st.mu.Lock()
	for _, b := range st.builds {
		if b.alias == alias && (b.status == buildBuilding) {
			st.mu.Unlock()
			writeError(w, http.StatusConflict, fmt.Sprintf("template %q is being built: wait for that build to end", alias))
			return
		}
	}
	now := time.Now()
	st.builds[id] = &e2bBuild{id: id, alias: alias, status: buildWaiting, createdAt: now, updatedAt: now}
	st.pruneBuildsLocked()
	st.mu.Unlock()
	writeJSON(w, http.StatusAccepted, templateRequestOut{TemplateID: alias, BuildID: id, Names: []string{alias}, Aliases: []string{alias}, Tags: []string{}})
}

// pruneBuildsLocked forgets the oldest finished builds past the cap.
func (st *templateStore) pruneBuildsLocked() {
	if len(st.builds) <= maxTemplateBuilds {
		return
	}
	var done []*e2bBuild
	for _, b := range st.builds {
		if b.status != buildBuilding {
			done = append(done, b)
		}
	}
	slices.SortFunc(done, func(a, b *e2bBuild) int { return a.updatedAt.Compare(b.updatedAt) })
	for _, b := range done {
		if len(st.builds) <= maxTemplateBuilds {
			return
		}
		delete(st.builds, b.id)
	}
}

// knownAlias says whether the gateway has a build of the template (a
// files request must follow a build request).
func (st *templateStore) knownAlias(alias string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, b := range st.builds {
		if b.alias == alias {
			return true
		}
	}
	return false
}

func (s *Server) handleTemplateFiles(w http.ResponseWriter, r *http.Request) {
	if s.templates(w) == nil {
		return
	}
	alias, hash := r.PathValue("templateID"), r.PathValue("hash")
	if !hashRe.MatchString(hash) {
		writeError(w, http.StatusBadRequest, "a files hash is 64 lower-case hex digits")
		return
	}
	if !s.tmpl.knownAlias(alias) {
		writeError(w, http.StatusNotFound, "no build of this template was requested")
		return
	}
	st := s.tmpl
	st.mu.Lock()
	defer st.mu.Unlock()
	if f, ok := st.files[hash]; ok {
		f.used = time.Now()
		writeJSON(w, http.StatusCreated, fileUploadOut{Present: true})
		return
	}
	now := time.Now()
	for t, u := range st.uploads {
		if now.After(u.expires) {
			delete(st.uploads, t)
		}
	}
	if len(st.uploads) >= maxPendingUploads {
		writeError(w, http.StatusTooManyRequests, "too many uploads are pending; retry later")
		return
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	token := hex.EncodeToString(b[:])
	st.uploads[token] = pendingUpload{hash: hash, expires: now.Add(templateUploadTTL)}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	writeJSON(w, http.StatusCreated, fileUploadOut{URL: scheme + "://" + r.Host + TemplateUploadPath + token})
}

// serveTemplateUpload serves PUT TemplateUploadPath+token (before the
// API key check: the token is the credential) and says whether r was
// one.
func (s *Server) serveTemplateUpload(sw *statusWriter, r *http.Request) bool {
	token, ok := strings.CutPrefix(r.URL.Path, TemplateUploadPath)
	if !ok || s.tmpl == nil {
		return false
	}
	sw.route = "PUT " + TemplateUploadPath + "{token}"
	if r.Method != http.MethodPut {
		writeError(sw, http.StatusMethodNotAllowed, "uploads are PUT")
		return true
	}
	st := s.tmpl
	st.mu.Lock()
	u, found := st.uploads[token]
	delete(st.uploads, token) // single use, whatever happens next
	closed := st.closed
	st.mu.Unlock()
	if !found || closed || time.Now().After(u.expires) {
		writeError(sw, http.StatusForbidden, "this upload URL is not valid (unknown, used or expired)")
		return true
	}
	if r.ContentLength > MaxTemplateUploadBytes {
		writeError(sw, http.StatusRequestEntityTooLarge, fmt.Sprintf("an upload is at most %d bytes", MaxTemplateUploadBytes))
		return true
	}
	code, msg := st.receive(u.hash, http.MaxBytesReader(sw, r.Body, MaxTemplateUploadBytes))
	if code != 0 {
		writeError(sw, code, msg)
		return true
	}
	sw.WriteHeader(http.StatusOK)
	return true
}

// ensureDirLocked makes the private directory of uploaded files.
func (st *templateStore) ensureDirLocked() error {
	if st.dir != "" {
		return nil
	}
	d, err := os.MkdirTemp("", "rayito-e2b-templates-")
	if err != nil {
		return err
	}
	if err := os.Chmod(d, 0o700); err != nil {
		os.RemoveAll(d)
		return err
	}
	st.dir = d
	return nil
}

// receive stores an upload under hash once the archive passed every
// check.
func (st *templateStore) receive(hash string, body io.Reader) (int, string) {
	st.mu.Lock()
	err := st.ensureDirLocked()
	dir := st.dir
	st.mu.Unlock()
	if err != nil {
		return http.StatusInternalServerError, "the gateway cannot store uploads"
	}
	f, err := os.CreateTemp(dir, "upload-*")
	if err != nil {
		return http.StatusInternalServerError, "the gateway cannot store uploads"
	}
	tmp := f.Name()
	n, err := io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return http.StatusRequestEntityTooLarge, fmt.Sprintf("an upload is at most %d bytes", MaxTemplateUploadBytes)
		}
		return http.StatusBadRequest, "the upload was cut short"
	}
	rf, err := os.Open(tmp)
	if err != nil {
		os.Remove(tmp)
		return http.StatusInternalServerError, "the gateway cannot store uploads"
	}
	err = checkTemplateFiles(rf)
	rf.Close()
	if err != nil {
		os.Remove(tmp)
		return http.StatusBadRequest, err.Error()
	}
	final := filepath.Join(dir, "files-"+hash+".tar")
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		os.Remove(tmp)
		return http.StatusServiceUnavailable, "the gateway is closing"
	}
	if old, ok := st.files[hash]; ok && old.refs > 0 {
		// A build is about to read the one stored: keep it.
		os.Remove(tmp)
		return 0, ""
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return http.StatusInternalServerError, "the gateway cannot store uploads"
	}
	st.files[hash] = &storedFiles{path: final, size: n, used: time.Now()}
	st.evictLocked()
	return 0, ""
}

// evictLocked removes the least recently used files no build holds while
// the cache is over its cap.
func (st *templateStore) evictLocked() {
	var total int64
	var free []string
	for h, f := range st.files {
		total += f.size
		if f.refs == 0 {
			free = append(free, h)
		}
	}
	slices.SortFunc(free, func(a, b string) int { return st.files[a].used.Compare(st.files[b].used) })
	for _, h := range free {
		if total <= maxTemplateCacheBytes {
			return
		}
		total -= st.files[h].size
		os.Remove(st.files[h].path)
		delete(st.files, h)
	}
}

func (s *Server) handleTemplateBuildStart(w http.ResponseWriter, r *http.Request) {
	tp := s.templates(w)
	if tp == nil {
		return
	}
	alias, id := r.PathValue("templateID"), r.PathValue("buildID")
	var req buildStartReq
	if code, msg := decode(r, &req); code != 0 {
		writeError(w, code, msg)
		return
	}
	st := s.tmpl
	st.mu.Lock()
	b, ok := st.builds[id]
	if !ok || b.alias != alias {
		st.mu.Unlock()
		writeError(w, http.StatusNotFound, "no such build of this template")
		return
	}
	if b.status != buildWaiting {
		st.mu.Unlock()
		writeError(w, http.StatusConflict, "this build was already started")
		return
	}
	st.mu.Unlock()
	plan, err := translateBuild(&req, s.templateBase)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		writeError(w, http.StatusServiceUnavailable, "the gateway is closing")
		return
	}
	if b.status != buildWaiting {
		writeError(w, http.StatusConflict, "this build was already started")
		return
	}
	for _, h := range plan.hashes {
		if _, ok := st.files[h]; !ok {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("template step %s (COPY): its files were not uploaded (files hash unknown to the gateway)", copyStepOf(&req, h)))
			return
		}
	}
	for _, b2 := range st.builds {
		if b2 != b && b2.alias == alias && b2.status == buildBuilding {
			writeError(w, http.StatusConflict, fmt.Sprintf("template %q is being built: wait for that build to end", alias))
			return
		}
	}
	paths := map[string]string{}
	for _, h := range plan.hashes {
		f := st.files[h]
		f.refs++
		f.used = time.Now()
		paths[h] = f.path
	}
	b.status, b.updatedAt = buildBuilding, time.Now()
	b.logs = append(b.logs, logEntry("info", "", "Building Rayito template "+TemplatePrefix+alias+" on the local platform"))
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		s.runTemplateBuild(tp, b, plan, paths)
	}()
	w.WriteHeader(http.StatusAccepted)
}

// copyStepOf names the first COPY step with hash h.
func copyStepOf(req *buildStartReq, h string) string {
	for i, st := range req.Steps {
		if st.FilesHash != nil && *st.FilesHash == h {
			return strconv.Itoa(i + 1)
		}
	}
	return "?"
}

// templateBase says whether the gateway builds on an E2B base: the local
// platform's "local" (fromTemplate('local'), fromImage('local'), FROM
// local), and E2B's default template "base" when the gateway sends it to
// the platform's default.
func (s *Server) templateBase(kind, name string) error {
	if name == localBase {
		return nil
	}
	if kind == "template" && name == DefaultTemplateID {
		if t, err := s.template(DefaultTemplateID); err == nil && (t == "" || t == localBase) {
			return nil
		}
	}
	shown := name
	if len(shown) > 200 {
		shown = shown[:200] + "..."
	}
	return fmt.Errorf("the base %s %q is not supported by Rayito's E2B gateway: templates build on the local platform's %q base (fromTemplate('local'), or FROM local in a Dockerfile)", kind, shown, localBase)
}

func logEntry(level, step, msg string) buildLogOut {
	return buildLogOut{Timestamp: rfc3339(time.Now()), Level: level, Message: msg, Step: step}
}

// addLogs appends entries to a build's log (capped).
func (st *templateStore) addLogs(b *e2bBuild, entries ...buildLogOut) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, e := range entries {
		if len(b.logs) >= maxBuildLogEntries {
			return
		}
		b.logs = append(b.logs, e)
	}
}

// finish ends a build.
func (st *templateStore) finish(b *e2bBuild, status string, reason *buildReasonOut) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	b.status, b.reason, b.updatedAt, b.finishedAt = status, reason, now, now
	if reason != nil {
		level := logEntry("error", reason.Step, reason.Message)
		if len(b.logs) < maxBuildLogEntries {
			b.logs = append(b.logs, level)
		}
	}
}

// runTemplateBuild unpacks the files, compiles the artifact with
// sdk/template (the one way Rayito makes one), sends it to the platform
// and follows the build to its end, copying the platform's build log.
func (s *Server) runTemplateBuild(tp templatePlatform, b *e2bBuild, plan *buildPlan, paths map[string]string) {
	st := s.tmpl
	ctx, cancel := context.WithTimeout(st.ctx, templateBuildTimeout)
	defer cancel()
	fail := func(step, msg string) {
		st.finish(b, buildError, &buildReasonOut{Message: msg, Step: step, LogEntries: []buildLogOut{}})
	}
	name := TemplatePrefix + b.alias
	ctxDir, err := s.unpackTemplateFiles(paths)
	if err != nil {
		fail(stepBase, err.Error())
		return
	}
	defer os.RemoveAll(ctxDir)
	a, err := templateCompile(ctx, plan, ctxDir)
	if err != nil {
		var te *template.Error
		if errors.As(err, &te) {
			step := stepBase
			if te.Step >= 0 {
				step = plan.e2bStepOf(te.Step)
			}
			fail(step, "the template cannot be packaged: "+te.Reason)
			return
		}
		fail(stepBase, "the template cannot be packaged")
		return
	}
	defer a.Close()
	var art io.Reader
	if a.Zip != nil {
		art = bytes.NewReader(a.Zip)
	} else {
		f, err := os.Open(a.Path)
		if err != nil {
			fail(stepBase, "the template cannot be packaged")
			return
		}
		defer f.Close()
		art = f
	}
	info, err := tp.buildTemplate(ctx, name, art, a.SHA256, plan.force)
	if err != nil {
		_, msg := templateStatusOf(name, err)
		fail(stepBase, msg)
		return
	}
	if info.Unchanged {
		st.addLogs(b, logEntry("info", "", "The same template is already built: nothing to do"))
		st.finish(b, buildReady, nil)
		return
	}
	logs := &buildLogCopier{tp: tp, st: st, b: b, name: name}
	copyLogs := func(final bool) { logs.copy(ctx, final) }
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			fail(stepBase, "the build was interrupted (the gateway closed or the build took too long)")
			return
		case <-tick.C:
		}
		info, err := tp.getTemplate(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			_, msg := templateStatusOf(name, err)
			fail(stepBase, msg)
			return
		}
		switch info.State {
		case rayito.TemplateReady:
			copyLogs(true)
			st.finish(b, buildReady, nil)
			return
		case rayito.TemplateFailed:
			copyLogs(true)
			step := stepBase
			if info.Step >= 0 {
				step = plan.e2bStepOf(info.Step)
			}
			msg := fmt.Sprintf("the build failed at step %s (%s)", step, info.Reason)
			if info.Message != "" {
				msg += ": " + info.Message
			}
			fail(step, msg)
			return
		}
		if n%2 == 1 {
			copyLogs(false)
		}
	}
}

// buildLogCopier copies the platform's build log of template name into
// build b's log, as it grows.
type buildLogCopier struct {
	tp     templatePlatform
	st     *templateStore
	b      *e2bBuild
	name   string
	logged int // bytes of the platform's log already copied
}

// copy copies the log's new complete lines (all of it when final).
func (c *buildLogCopier) copy(ctx context.Context, final bool) {
	var buf bytes.Buffer
	if err := c.tp.templateLogs(ctx, c.name, &limitedBuffer{b: &buf, max: 16 << 20}); err != nil && buf.Len() == 0 {
		return
	}
	data := buf.Bytes()
	if c.logged > len(data) {
		c.logged = 0
	}
	data = data[c.logged:]
	end := bytes.LastIndexByte(data, '\n') + 1
	if final {
		end = len(data)
	}
	var entries []buildLogOut
	for _, line := range strings.Split(string(data[:end]), "\n") {
		if line = strings.TrimRight(line, "\r"); line != "" {
			if len(line) > 4096 {
				line = line[:4096]
			}
			entries = append(entries, logEntry("info", "", line))
		}
	}
	c.logged += end
	c.st.addLogs(c.b, entries...)
}

// unpackTemplateFiles extracts each COPY step's files under <hash>/ of a
// new build context, then lets go of them.
func (s *Server) unpackTemplateFiles(paths map[string]string) (string, error) {
	st := s.tmpl
	defer func() {
		st.mu.Lock()
		for h := range paths {
			if f, ok := st.files[h]; ok {
				f.refs--
			}
		}
		st.evictLocked()
		st.mu.Unlock()
	}()
	st.mu.Lock()
	err := st.ensureDirLocked()
	dir := st.dir
	st.mu.Unlock()
	if err != nil {
		return "", errors.New("the gateway cannot unpack the files")
	}
	ctxDir, err := os.MkdirTemp(dir, "context-")
	if err != nil {
		return "", errors.New("the gateway cannot unpack the files")
	}
	budget := int64(MaxTemplateFilesBytes) // all of a build's files together
	for h, p := range paths {
		if err := os.Mkdir(filepath.Join(ctxDir, h), 0o755); err != nil {
			os.RemoveAll(ctxDir)
			return "", errors.New("the gateway cannot unpack the files")
		}
		f, err := os.Open(p)
		if err != nil {
			os.RemoveAll(ctxDir)
			return "", errors.New("the gateway cannot unpack the files")
		}
		n, err := extractTemplateFiles(f, filepath.Join(ctxDir, h), budget)
		f.Close()
		if err != nil {
			os.RemoveAll(ctxDir)
			return "", err
		}
		budget -= n
	}
	return ctxDir, nil
}

// limitedBuffer keeps at most max bytes.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room < len(p) {
		if room > 0 {
			l.b.Write(p[:room])
		}
		return len(p), nil
	}
	return l.b.Write(p)
}

func (s *Server) handleTemplateBuildStatus(w http.ResponseWriter, r *http.Request) {
	if s.templates(w) == nil {
		return
	}
	alias, id := r.PathValue("templateID"), r.PathValue("buildID")
	offset, limit := 0, maxLogEntriesPerStatus
	q := r.URL.Query()
	if v := q.Get("logsOffset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "logsOffset must be a non-negative integer")
			return
		}
		offset = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxLogEntriesPerStatus {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit must be between 0 and %d", maxLogEntriesPerStatus))
			return
		}
		limit = n
	}
	st := s.tmpl
	st.mu.Lock()
	defer st.mu.Unlock()
	b, ok := st.builds[id]
	if !ok || b.alias != alias {
		writeError(w, http.StatusNotFound, "no such build of this template")
		return
	}
	out := buildInfoOut{BuildID: b.id, TemplateID: b.alias, Status: b.status, LogEntries: []buildLogOut{}, Logs: []string{}}
	if offset < len(b.logs) {
		end := min(len(b.logs), offset+limit)
		out.LogEntries = slices.Clone(b.logs[offset:end])
	}
	if b.reason != nil {
		rc := *b.reason
		out.Reason = &rc
	}
	writeJSON(w, http.StatusOK, out)
}

// builtTemplate is the Rayito template of an E2B template built through
// the gateway (for Sandbox.create(name)): one the gateway built, or one
// the platform has under TemplatePrefix+name.
func (s *Server) builtTemplate(id string) (string, bool) {
	if s.tmpl == nil {
		return "", false
	}
	if _, err := templateAlias(id); err != nil {
		return "", false
	}
	name := TemplatePrefix + id
	st := s.tmpl
	st.mu.Lock()
	for _, b := range st.builds {
		if b.alias == id && b.status == buildReady {
			st.mu.Unlock()
			return name, true
		}
	}
	st.mu.Unlock()
	tp, ok := s.plat.(templatePlatform)
	if !ok {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tp.getTemplate(ctx, name); err != nil {
		return "", false
	}
	return name, true
}

func (s *Server) handleTemplateAlias(w http.ResponseWriter, r *http.Request) {
	tp := s.templates(w)
	if tp == nil {
		return
	}
	alias, err := templateAlias(r.PathValue("alias"))
	if err != nil {
		writeError(w, http.StatusNotFound, "no template has this name")
		return
	}
	if _, err := tp.getTemplate(r.Context(), TemplatePrefix+alias); err != nil {
		code, msg := templateStatusOf(alias, err)
		writeError(w, code, msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": alias, "public": false})
}

func (s *Server) handleTemplateList(w http.ResponseWriter, r *http.Request) {
	tp := s.templates(w)
	if tp == nil {
		return
	}
	list, err := tp.listTemplates(r.Context())
	if err != nil {
		code, msg := templateStatusOf("", err)
		writeError(w, code, msg)
		return
	}
	out := []templateOut{}
	for _, t := range list {
		alias, ok := strings.CutPrefix(t.Name, TemplatePrefix)
		if !ok {
			continue
		}
		out = append(out, s.templateOf(alias, &t))
	}
	writeJSON(w, http.StatusOK, out)
}

// buildsOf lists the gateway's builds of alias, oldest first.
func (s *Server) buildsOf(alias string) []*e2bBuild {
	st := s.tmpl
	st.mu.Lock()
	defer st.mu.Unlock()
	var bs []*e2bBuild
	for _, b := range st.builds {
		if b.alias == alias {
			c := *b
			bs = append(bs, &c)
		}
	}
	slices.SortFunc(bs, func(a, b *e2bBuild) int { return a.createdAt.Compare(b.createdAt) })
	return bs
}

func e2bTemplateState(state string) string {
	switch state {
	case rayito.TemplateReady:
		return buildReady
	case rayito.TemplateFailed:
		return buildError
	}
	return buildBuilding
}

func (s *Server) templateOf(alias string, t *rayito.TemplateInfo) templateOut {
	o := templateOut{TemplateID: alias, Names: []string{alias}, Aliases: []string{alias}, BuildStatus: e2bTemplateState(t.State),
		EnvdVersion: EnvdVersion, CreatedAt: rfc3339(t.CreatedAt), UpdatedAt: rfc3339(t.UpdatedAt)}
	bs := s.buildsOf(alias)
	o.BuildCount = len(bs)
	for i := len(bs) - 1; i >= 0; i-- {
		if bs[i].status == buildReady {
			o.BuildID = bs[i].id
			break
		}
	}
	return o
}

func (s *Server) handleTemplateGet(w http.ResponseWriter, r *http.Request) {
	tp := s.templates(w)
	if tp == nil {
		return
	}
	alias, err := templateAlias(r.PathValue("templateID"))
	if err != nil {
		writeError(w, http.StatusNotFound, "no template has this name")
		return
	}
	t, err := tp.getTemplate(r.Context(), TemplatePrefix+alias)
	if err != nil {
		code, msg := templateStatusOf(alias, err)
		writeError(w, code, msg)
		return
	}
	out := templateWithBuildsOut{TemplateID: alias, Names: []string{alias}, Aliases: []string{alias}, Builds: []templateBuildOut{},
		CreatedAt: rfc3339(t.CreatedAt), UpdatedAt: rfc3339(t.UpdatedAt)}
	for _, b := range s.buildsOf(alias) {
		out.Builds = append(out.Builds, templateBuildOut{BuildID: b.id, Status: b.status, CreatedAt: rfc3339(b.createdAt), UpdatedAt: rfc3339(b.updatedAt), FinishedAt: rfc3339(b.finishedAt)})
	}
	writeJSON(w, http.StatusOK, out)
}

// handleTemplateDelete deletes a snapshot (its id starts with
// SnapshotIDPrefix: E2B's SDK deletes snapshots through this route) or a
// template built through the gateway.
func (s *Server) handleTemplateDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("templateID")
	if strings.HasPrefix(id, SnapshotIDPrefix) {
		s.handleSnapshotDelete(w, r)
		return
	}
	tp, ok := s.plat.(templatePlatform)
	if !ok {
		s.handleSnapshotDelete(w, r)
		return
	}
	alias, err := templateAlias(id)
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("template %q not found", id))
		return
	}
	if err := tp.deleteTemplate(r.Context(), TemplatePrefix+alias); err != nil {
		code, msg := templateStatusOf(alias, err)
		writeError(w, code, msg)
		return
	}
	noContent(w)
}

// templateStatusOf maps an error of the SDK's template calls.
func templateStatusOf(name string, err error) (int, string) {
	var be *rayito.TemplateBuildError
	switch {
	case errors.As(err, &be):
		return http.StatusBadRequest, fmt.Sprintf("the build failed (%s)", be.Reason)
	case errors.Is(err, rayito.ErrNotFound):
		return http.StatusNotFound, fmt.Sprintf("template %q not found", name)
	case errors.Is(err, rayito.ErrUnimplemented):
		return http.StatusNotImplemented, unsupportedMsg("templates on this backend (E2B template builds need the local platform)")
	case errors.Is(err, rayito.ErrInvalidArgument), errors.Is(err, rayito.ErrAlreadyExists):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, rayito.ErrResourceExhausted):
		return http.StatusTooManyRequests, "rate limit or quota reached; retry later"
	case errors.Is(err, rayito.ErrPlatformUnavailable):
		return http.StatusServiceUnavailable, "the Rayito platform is unavailable"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "the platform did not answer in time"
	}
	return http.StatusInternalServerError, "platform error"
}

// newBuildID is a random UUID (version 4), as E2B's build ids.
func newBuildID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// templateCompile packages a plan with its unpacked files (ctxDir) into
// an artifact with sdk/template's Compile: the one way Rayito makes an
// artifact. Its warnings (files that may hold secrets) are dropped: they
// would name the client's files in the gateway's log.
func templateCompile(ctx context.Context, plan *buildPlan, ctxDir string) (*template.Artifact, error) {
	return template.Compile(ctx, plan.tmpl, ctxDir, template.WithWarn(func(string) {}), template.WithTempDir(filepath.Dir(ctxDir)))
}
