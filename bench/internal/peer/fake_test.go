package peer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeEnvd answers like envd does on the wire (spec/e2b-protocol.md §5–§6)
// and records what it was sent, so tests can assert exact requests.
type fakeEnvd struct {
	t *testing.T // nil in the child process of TestLaunch

	mu       sync.Mutex
	starts   []string          // raw JSON of each Start message
	unaries  []string          // "Method raw-json"
	files    map[string][]byte // path → contents
	ptys     map[uint32]chan []byte
	nextPid  uint32
	problems []string
}

func newFake(t *testing.T) *fakeEnvd {
	return &fakeEnvd{t: t, files: map[string][]byte{}, ptys: map[uint32]chan []byte{}, nextPid: 100}
}

func (f *fakeEnvd) problem(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

func (f *fakeEnvd) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.problems {
		t.Error("fake envd: " + p)
	}
}

const wantAuth = "Basic cm9vdDo=" // base64("root:")

func (f *fakeEnvd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/health" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/process.Process/Start" && r.Method == http.MethodPost:
		f.start(w, r)
	case strings.HasPrefix(r.URL.Path, "/process.Process/") && r.Method == http.MethodPost:
		f.unary(w, r, strings.TrimPrefix(r.URL.Path, "/process.Process/"))
	case r.URL.Path == "/files" && r.Method == http.MethodPost:
		f.upload(w, r)
	case r.URL.Path == "/files" && r.Method == http.MethodGet:
		f.download(w, r)
	default:
		f.problem("unexpected %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	}
}

func writeEnv(w http.ResponseWriter, flags byte, v any) {
	b, _ := json.Marshal(v)
	_, _ = w.Write(appendEnvelope(nil, flags, b))
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

func event(ev string) json.RawMessage { return json.RawMessage(`{"event":` + ev + `}`) }

func (f *fakeEnvd) start(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "application/connect+json" {
		f.problem("Start Content-Type %q", ct)
	}
	if a := r.Header.Get("Authorization"); a != wantAuth {
		f.problem("Start Authorization %q", a)
	}
	flags, msg, err := readEnvelope(r.Body, nil)
	if err != nil || flags != 0 {
		f.problem("Start envelope: flags %d, %v", flags, err)
		return
	}
	if rest, _ := io.ReadAll(r.Body); len(rest) != 0 {
		f.problem("Start: %d bytes after the envelope", len(rest))
	}
	f.mu.Lock()
	f.starts = append(f.starts, string(msg))
	f.nextPid++
	pid := f.nextPid
	f.mu.Unlock()
	var req struct {
		Process struct {
			Cmd  string   `json:"cmd"`
			Args []string `json:"args"`
		} `json:"process"`
		Pty *struct{} `json:"pty"`
	}
	_ = json.Unmarshal(msg, &req)

	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	if req.Process.Cmd == "/nonexistent" {
		writeEnv(w, flagEndStream, json.RawMessage(`{"error":{"code":"invalid_argument","message":"no such file"}}`))
		return
	}
	// A terminal's process exists before its start event is sent: the
	// client may send input as soon as it has the pid.
	var in chan []byte
	if req.Pty != nil {
		in = make(chan []byte, 16)
		f.mu.Lock()
		f.ptys[pid] = in
		f.mu.Unlock()
	}
	writeEnv(w, flagMessage, event(fmt.Sprintf(`{"start":{"pid":%d}}`, pid)))
	writeEnv(w, flagMessage, event(`{"keepalive":{}}`))
	exit := 0
	switch {
	case req.Pty != nil:
		for { // the tty echoes what it is sent, until killed or abandoned
			select {
			case b, ok := <-in:
				if !ok { // killed
					writeEnv(w, flagMessage, event(`{"end":{"exitCode":-1,"status":"signal: killed","error":"signal: killed"}}`))
					writeEnv(w, flagEndStream, json.RawMessage(`{}`))
					return
				}
				writeEnv(w, flagMessage, event(`{"data":{"pty":"`+base64.StdEncoding.EncodeToString(b)+`"}}`))
			case <-r.Context().Done():
				// The client went away (a failed test): end, so that
				// httptest's Close does not wait forever.
				return
			}
		}
	case req.Process.Cmd == "/bin/echo":
		out := strings.Join(req.Process.Args, " ") + "\n"
		writeEnv(w, flagMessage, event(`{"data":{"stdout":"`+base64.StdEncoding.EncodeToString([]byte(out))+`"}}`))
	case req.Process.Cmd == "head" && len(req.Process.Args) == 3:
		n, _ := strconv.Atoi(req.Process.Args[1])
		chunk := make([]byte, 32<<10)
		for n > 0 {
			k := min(n, len(chunk))
			writeEnv(w, flagMessage, event(`{"data":{"stdout":"`+base64.StdEncoding.EncodeToString(chunk[:k])+`"}}`))
			n -= k
		}
	case req.Process.Cmd == "/bin/false":
		exit = 1
	}
	if exit == 0 {
		// exitCode 0 is omitted, as protojson does.
		writeEnv(w, flagMessage, event(`{"end":{"exited":true,"status":"exit status 0"}}`))
	} else {
		writeEnv(w, flagMessage, event(fmt.Sprintf(`{"end":{"exitCode":%d,"exited":true,"status":"exit status %d"}}`, exit, exit)))
	}
	writeEnv(w, flagEndStream, json.RawMessage(`{}`))
}

func (f *fakeEnvd) unary(w http.ResponseWriter, r *http.Request, method string) {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		f.problem("%s Content-Type %q", method, ct)
	}
	if v := r.Header.Get("Connect-Protocol-Version"); v != "1" {
		f.problem("%s Connect-Protocol-Version %q", method, v)
	}
	if a := r.Header.Get("Authorization"); a != wantAuth {
		f.problem("%s Authorization %q", method, a)
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.unaries = append(f.unaries, method+" "+string(body))
	f.mu.Unlock()
	var req struct {
		Process struct {
			Pid uint32 `json:"pid"`
		} `json:"process"`
		Input struct {
			Pty []byte `json:"pty"`
		} `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	f.mu.Lock()
	in, ok := f.ptys[req.Process.Pid]
	if ok && method == "SendSignal" {
		delete(f.ptys, req.Process.Pid)
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"code":"not_found","message":"process not found"}`)
		return
	}
	switch method {
	case "SendInput":
		in <- req.Input.Pty
	case "SendSignal":
		close(in)
	}
	_, _ = io.WriteString(w, `{}`)
}

func (f *fakeEnvd) upload(w http.ResponseWriter, r *http.Request) {
	path, user := r.URL.Query().Get("path"), r.URL.Query().Get("username")
	if user != "root" {
		f.problem("upload username %q", user)
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		f.problem("upload Content-Type %q", r.Header.Get("Content-Type"))
		http.Error(w, "bad content type", http.StatusBadRequest)
		return
	}
	if r.ContentLength <= 0 {
		f.problem("upload without Content-Length")
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	part, err := mr.NextPart()
	if err != nil {
		f.problem("upload: %v", err)
		http.Error(w, "no part", http.StatusBadRequest)
		return
	}
	// The filename is the full path (FileName() would strip directories).
	_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if part.FormName() != "file" || cd["filename"] != path {
		f.problem("upload part name %q filename %q, path %q", part.FormName(), cd["filename"], path)
	}
	data, _ := io.ReadAll(part)
	if _, err := mr.NextPart(); err != io.EOF {
		f.problem("upload: more than one part")
	}
	f.mu.Lock()
	f.files[path] = data
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode([]map[string]string{{"name": path[strings.LastIndex(path, "/")+1:], "path": path, "type": "file"}})
}

func (f *fakeEnvd) download(w http.ResponseWriter, r *http.Request) {
	path, user := r.URL.Query().Get("path"), r.URL.Query().Get("username")
	if user != "root" {
		f.problem("download username %q", user)
	}
	f.mu.Lock()
	data, ok := f.files[path]
	f.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"code":404,"message":"not found"}`)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = io.Copy(w, bytes.NewReader(data))
}
