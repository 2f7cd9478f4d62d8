package e2b

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func strp(s string) *string { return &s }

const testHash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestTranslateBuild: each E2B step kind -> the Rayito spec steps, or a
// refusal naming the step.
func TestTranslateBuild(t *testing.T) {
	okBase := func(kind, name string) error {
		if name == "local" {
			return nil
		}
		return errors.New("base refused")
	}
	prefix := []ptemplate.Step{{User: "user"}, {Workdir: "/home/user"}}
	for _, c := range []struct {
		name    string
		req     buildStartReq
		want    []ptemplate.Step // after the E2B defaults' two steps
		start   *ptemplate.Start
		refuse  string // the refusal's text, "" for none
		e2bStep []string
	}{
		{name: "run", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "RUN", Args: []string{"echo hi"}}}},
			want: []ptemplate.Step{{Run: "echo hi"}}, e2bStep: []string{"base", "base", "1"}},
		{name: "run as root (aptInstall, pipInstall)", req: buildStartReq{FromImage: strp("local"), Steps: []buildStepReq{{Type: "RUN", Args: []string{"pip install x", "root"}}}},
			want: []ptemplate.Step{{User: "root"}, {Run: "pip install x"}, {User: "user"}}, e2bStep: []string{"base", "base", "1", "1", "1"}},
		{name: "env workdir user", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{
			{Type: "ENV", Args: []string{"A", "1", "B", "two"}}, {Type: "WORKDIR", Args: []string{"app"}}, {Type: "USER", Args: []string{"root"}}}},
			want: []ptemplate.Step{{Env: map[string]string{"A": "1", "B": "two"}}, {Workdir: "/home/user/app"}, {User: "root"}}},
		{name: "copy dir", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "COPY", Args: []string{"./app", "/opt/app", "", ""}, FilesHash: strp(testHash)}}},
			want: []ptemplate.Step{{Copy: &ptemplate.Copy{Src: testHash + "/app", Dst: "/opt/app", Owner: "user"}}}},
		{name: "copy relative dst, owner root", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "COPY", Args: []string{"a.txt", "sub/", "root"}, FilesHash: strp(testHash)}}},
			want: []ptemplate.Step{{Copy: &ptemplate.Copy{Src: testHash + "/a.txt", Dst: "/home/user/sub/a.txt", Owner: "root"}}}},
		{name: "start waitForPort", req: buildStartReq{FromTemplate: strp("local"), StartCmd: strp("python3 -m http.server 8000"), ReadyCmd: strp(`[ -n "$(ss -Htuln sport = :8000)" ]`)},
			want: []ptemplate.Step{}, start: &ptemplate.Start{Cmd: "python3 -m http.server 8000", ReadyPort: 8000}},
		{name: "start without ready", req: buildStartReq{FromTemplate: strp("local"), StartCmd: strp("sleep infinity")},
			want: []ptemplate.Step{}, start: &ptemplate.Start{Cmd: "sleep infinity"}},

		{name: "e2b base image", req: buildStartReq{FromImage: strp("e2bdev/base")}, refuse: "template step base: base refused"},
		{name: "no base", req: buildStartReq{}, refuse: "exactly one of fromImage and fromTemplate"},
		{name: "two bases", req: buildStartReq{FromImage: strp("local"), FromTemplate: strp("local")}, refuse: "exactly one"},
		{name: "registry", req: buildStartReq{FromImage: strp("local"), FromImageRegistry: json.RawMessage(`{"type":"registry","username":"u","password":"p"}`)}, refuse: "fromImageRegistry"},
		{name: "unknown kind", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "RUN", Args: []string{"x"}}, {Type: "ADD", Args: []string{"a", "b"}}}}, refuse: "template step 2 (ADD): this step kind is not supported"},
		{name: "other user", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "USER", Args: []string{"guest"}}}}, refuse: "template step 1 (USER): user must be root or user"},
		{name: "run other user", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "RUN", Args: []string{"x", "guest"}}}}, refuse: "step 1 (RUN)"},
		{name: "copy mode", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "COPY", Args: []string{"a", "/b", "", "0755"}, FilesHash: strp(testHash)}}}, refuse: "step 1 (COPY): a copy's mode"},
		{name: "copy glob", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "COPY", Args: []string{"*.py", "/b"}, FilesHash: strp(testHash)}}}, refuse: "without glob"},
		{name: "copy escape", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "COPY", Args: []string{"../x", "/b"}, FilesHash: strp(testHash)}}}, refuse: "inside the context"},
		{name: "copy no hash", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "COPY", Args: []string{"a", "/b"}}}}, refuse: "needs a filesHash"},
		{name: "env odd", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "ENV", Args: []string{"A"}}}}, refuse: "step 1 (ENV)"},
		{name: "env bad name", req: buildStartReq{FromTemplate: strp("local"), Steps: []buildStepReq{{Type: "ENV", Args: []string{"A-B", "1"}}}}, refuse: "template step 1: env has a name"},
		{name: "ready other", req: buildStartReq{FromTemplate: strp("local"), StartCmd: strp("x"), ReadyCmd: strp("sleep 20")}, refuse: "template step finalize: only waitForPort"},
		{name: "ready alone", req: buildStartReq{FromTemplate: strp("local"), ReadyCmd: strp(`[ -n "$(ss -Htuln sport = :80)" ]`)}, refuse: "without a start command"},
		{name: "ready port 0", req: buildStartReq{FromTemplate: strp("local"), StartCmd: strp("x"), ReadyCmd: strp(`[ -n "$(ss -Htuln sport = :0)" ]`)}, refuse: "between 1 and 65535"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := translateBuild(&c.req, okBase)
			if c.refuse != "" {
				var se *TemplateStepError
				if !errors.As(err, &se) || !errors.Is(err, ErrTemplateStep) || !strings.Contains(err.Error(), c.refuse) {
					t.Fatalf("err %v, want a refusal with %q", err, c.refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, testHash, "app"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, testHash, "a.txt"), []byte("a"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, testHash, "app", "x"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			spec := compileSpec(t, p, dir)
			want := append(slices.Clone(prefix), c.want...)
			if got, _ := json.Marshal(spec.Steps); string(got) != string(mustJSON(want)) {
				t.Fatalf("steps %s, want %s", got, mustJSON(want))
			}
			if spec.Base != "local" {
				t.Fatalf("base %q", spec.Base)
			}
			if (spec.Start == nil) != (c.start == nil) || spec.Start != nil && *spec.Start != *c.start {
				t.Fatalf("start %+v, want %+v", spec.Start, c.start)
			}
			if c.e2bStep != nil && !slices.Equal(p.e2b, c.e2bStep) {
				t.Fatalf("e2b steps %v, want %v", p.e2b, c.e2bStep)
			}
		})
	}
}

func filesHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func compileSpec(t *testing.T, p *buildPlan, dir string) *ptemplate.Spec {
	t.Helper()
	a, err := compileFor(p, dir)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func compileFor(p *buildPlan, dir string) (*ptemplate.Spec, error) {
	if err := p.tmpl.Err(); err != nil {
		return nil, err
	}
	a, err := templateCompile(context.Background(), p, dir)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	return a.Spec, nil
}

// tarOf makes a tar (gzipped when gz) of entries: name -> contents, a name
// ending in "/" a directory, "->target" a symbolic link.
func tarOf(t testing.TB, gz bool, entries ...string) []byte {
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for i := 0; i+1 < len(entries); i += 2 {
		name, body := entries[i], entries[i+1]
		h := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(body))}
		switch {
		case strings.HasSuffix(name, "/"):
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		case strings.HasPrefix(body, "->"):
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, body[2:]
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(body))
		}
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

func TestTemplateFiles(t *testing.T) {
	good := tarOf(t, true, "app/", "", "app/main.py", "print(1)\n", "./app/sub/", "", "app/sub/x", "x")
	dir := t.TempDir()
	if n, err := extractTemplateFiles(bytes.NewReader(good), dir, MaxTemplateFilesBytes); err != nil || n != 10 {
		t.Fatal(n, err)
	}
	if _, err := extractTemplateFiles(bytes.NewReader(good), t.TempDir(), 9); !errors.Is(err, ErrTemplateFiles) {
		t.Fatalf("over the budget: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "app", "main.py")); err != nil || string(b) != "print(1)\n" {
		t.Fatalf("%q %v", b, err)
	}
	if err := checkTemplateFiles(bytes.NewReader(tarOf(t, false, "a.txt", "a"))); err != nil {
		t.Fatalf("plain tar: %v", err)
	}
	for name, bad := range map[string][]byte{
		"symlink":  tarOf(t, true, "a", "->/etc/passwd"),
		"escape":   tarOf(t, true, "../x", "x"),
		"absolute": tarOf(t, true, "/etc/x", "x"),
		"dotdot":   tarOf(t, true, "a/../../x", "x"),
		"twice":    tarOf(t, true, "a", "1", "a", "2"),
		"empty":    tarOf(t, true),
		"garbage":  []byte("not a tar at all, no"),
		"gzip bad": {0x1f, 0x8b, 0, 1, 2},
	} {
		_, err := extractTemplateFiles(bytes.NewReader(bad), t.TempDir(), MaxTemplateFilesBytes)
		if !errors.Is(err, ErrTemplateFiles) {
			t.Errorf("%s: err %v, want ErrTemplateFiles", name, err)
		}
	}
	// A hard link is refused too.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644})
	tw.WriteHeader(&tar.Header{Name: "b", Typeflag: tar.TypeLink, Linkname: "a"})
	tw.Close()
	if err := checkTemplateFiles(&buf); !errors.Is(err, ErrTemplateFiles) {
		t.Fatalf("hard link: %v", err)
	}
}

// FuzzE2BTemplateFiles: any upload is refused or unpacked inside its
// directory, never a panic, never a file outside.
func FuzzE2BTemplateFiles(f *testing.F) {
	f.Add(tarOf(f, true, "app/", "", "app/x", "x"))
	f.Add(tarOf(f, false, "a", "->../b"))
	f.Add(tarOf(f, false, "../a", "b"))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "in")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := extractTemplateFiles(bytes.NewReader(b), dir, 1<<20)
		if err != nil && !errors.Is(err, ErrTemplateFiles) {
			t.Fatalf("untyped error %v", err)
		}
		ents, _ := os.ReadDir(parent)
		if len(ents) != 1 {
			t.Fatalf("something outside the directory: %v", ents)
		}
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type()&os.ModeSymlink != 0 {
				t.Fatalf("a link was made: %s", p)
			}
			return nil
		})
	})
}

// FuzzE2BTemplateSteps: any trigger body is refused with a typed error
// or gives a template whose spec validates.
func FuzzE2BTemplateSteps(f *testing.F) {
	for _, s := range []string{
		`{"fromTemplate":"local","steps":[{"type":"RUN","args":["echo hi","root"]},{"type":"ENV","args":["A","1"]}]}`,
		`{"fromImage":"local","steps":[{"type":"COPY","args":["app","/opt/app","user",""],"filesHash":"` + testHash + `"}],"startCmd":"x","readyCmd":"[ -n \"$(ss -Htuln sport = :80)\" ]"}`,
		`{"fromImage":"e2bdev/base","steps":[{"type":"USER","args":["root"]},{"type":"WORKDIR","args":["/app"]}]}`,
		`{"fromTemplate":"local","steps":[{"type":"COPY","args":["../a","b"],"filesHash":"x"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req buildStartReq
		if json.Unmarshal(b, &req) != nil {
			return
		}
		p, err := translateBuild(&req, func(_, name string) error {
			if name == "local" {
				return nil
			}
			return errors.New("no")
		})
		if err != nil {
			if !errors.Is(err, ErrTemplateStep) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if err := p.tmpl.Err(); err != nil {
			t.Fatalf("accepted a template with mistakes: %v", err)
		}
		for _, h := range p.hashes {
			if !hashRe.MatchString(h) {
				t.Fatalf("hash %q", h)
			}
		}
	})
}

// fakeTemplates is a platform with a template store: a build of a spec
// with a step "run: false" fails at that step; others are READY on the
// next look.
type fakeTemplates struct {
	*fakePlatform
	tmu    sync.Mutex
	tmpls  map[string]*rayito.TemplateInfo
	specs  map[string]*ptemplate.Spec
	files  map[string]map[string]string // name -> context file -> contents
	builds int
	// unimplemented: a backend without template builds (AWS).
	unimplemented bool
}

func (f *fakeTemplates) buildTemplate(_ context.Context, name string, art io.Reader, sha string, force bool) (*rayito.TemplateInfo, error) {
	b, err := io.ReadAll(art)
	if err != nil {
		return nil, err
	}
	if filesHex(b) != sha {
		return nil, fmt.Errorf("sha256 mismatch")
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	var spec *ptemplate.Spec
	for _, zf := range zr.File {
		rc, _ := zf.Open()
		data, _ := io.ReadAll(rc)
		rc.Close()
		switch {
		case zf.Name == ptemplate.SpecName:
			if spec, err = ptemplate.Decode(data); err != nil {
				return nil, err
			}
		case strings.HasPrefix(zf.Name, ptemplate.ContextDir) && !zf.FileInfo().IsDir():
			files[strings.TrimPrefix(zf.Name, ptemplate.ContextDir)] = string(data)
		}
	}
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if old, ok := f.tmpls[name]; ok && old.SHA256 == sha && !force && old.State == rayito.TemplateReady {
		c := *old
		c.Unchanged = true
		return &c, nil
	}
	f.builds++
	info := &rayito.TemplateInfo{Name: name, State: rayito.TemplateBuilding, SHA256: sha, Step: -1, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	f.tmpls[name], f.specs[name], f.files[name] = info, spec, files
	c := *info
	return &c, nil
}

func (f *fakeTemplates) getTemplate(_ context.Context, name string) (*rayito.TemplateInfo, error) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if f.unimplemented {
		return nil, rayito.ErrUnimplemented
	}
	t, ok := f.tmpls[name]
	if !ok {
		return nil, rayito.ErrNotFound
	}
	if t.State == rayito.TemplateBuilding {
		t.State = rayito.TemplateReady
		for i, st := range f.specs[name].Steps {
			if st.Run == "false" {
				t.State, t.Reason, t.Step, t.Message = rayito.TemplateFailed, "run_step_failed", i, "exit status 1"
				break
			}
		}
	}
	c := *t
	return &c, nil
}

func (f *fakeTemplates) templateLogs(_ context.Context, name string, w io.Writer) error {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if _, ok := f.tmpls[name]; !ok {
		return rayito.ErrNotFound
	}
	for i := range f.specs[name].Steps {
		fmt.Fprintf(w, "step %d\n", i)
	}
	return nil
}

func (f *fakeTemplates) deleteTemplate(_ context.Context, name string) error {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if _, ok := f.tmpls[name]; !ok {
		return rayito.ErrNotFound
	}
	delete(f.tmpls, name)
	return nil
}

func (f *fakeTemplates) listTemplates(context.Context) ([]rayito.TemplateInfo, error) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	var out []rayito.TemplateInfo
	for _, t := range f.tmpls {
		out = append(out, *t)
	}
	return out, nil
}

func newTemplateEnv(t *testing.T) (*env, *fakeTemplates) {
	t.Helper()
	ft := &fakeTemplates{fakePlatform: newFake(t), tmpls: map[string]*rayito.TemplateInfo{}, specs: map[string]*ptemplate.Spec{}, files: map[string]map[string]string{}}
	srv, err := newServer(context.Background(), Options{APIKeyHashes: [][32]byte{HashAPIKey(testKey)}}, ft)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &env{t: t, f: ft.fakePlatform, srv: srv, http: hs}, ft
}

// build runs Template.build's calls: request, files (upload when asked),
// trigger; it returns the build id and the trigger's answer.
func (e *env) build(alias string, files map[string][]byte, trigger string) (string, resp) {
	e.t.Helper()
	r := e.do("POST", "/v3/templates", map[string]any{"name": alias})
	if r.code != http.StatusAccepted {
		e.t.Fatalf("request build: %d %s", r.code, r.body)
	}
	var out templateRequestOut
	r.json(e.t, &out)
	if out.TemplateID != alias || out.BuildID == "" {
		e.t.Fatalf("%+v", out)
	}
	for h, tarb := range files {
		r := e.do("GET", "/templates/"+alias+"/files/"+h, nil)
		if r.code != http.StatusCreated {
			e.t.Fatalf("files: %d %s", r.code, r.body)
		}
		var fo fileUploadOut
		r.json(e.t, &fo)
		if fo.Present {
			continue
		}
		req, _ := http.NewRequest("PUT", fo.URL, bytes.NewReader(tarb))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			e.t.Fatalf("upload: %d %s", res.StatusCode, body)
		}
		// Single use.
		req, _ = http.NewRequest("PUT", fo.URL, bytes.NewReader(tarb))
		res, err = http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			e.t.Fatalf("a second upload to one URL: %d", res.StatusCode)
		}
	}
	return out.BuildID, e.do("POST", "/v2/templates/"+alias+"/builds/"+out.BuildID, trigger)
}

// wait polls the status as the SDK does and returns the final status
// and every log entry.
func (e *env) wait(alias, id string) (buildInfoOut, []buildLogOut) {
	e.t.Helper()
	var logs []buildLogOut
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := e.do("GET", fmt.Sprintf("/templates/%s/builds/%s/status?logsOffset=%d", alias, id, len(logs)), nil)
		if r.code != http.StatusOK {
			e.t.Fatalf("status: %d %s", r.code, r.body)
		}
		var out buildInfoOut
		r.json(e.t, &out)
		logs = append(logs, out.LogEntries...)
		if (out.Status == buildReady || out.Status == buildError) && len(out.LogEntries) == 0 {
			return out, logs
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatal("the build did not end")
	return buildInfoOut{}, nil
}

func TestTemplateBuildFlow(t *testing.T) {
	e, ft := newTemplateEnv(t)
	files := tarOf(t, true, "app/", "", "app/main.py", "print(1)\n")
	trigger := `{"fromTemplate":"local","force":false,"steps":[
		{"type":"RUN","args":["echo hi > /home/user/hi"],"force":false},
		{"type":"COPY","args":["app","/home/user/app","",""],"filesHash":"` + testHash + `","force":false},
		{"type":"ENV","args":["GREETING","hello"],"force":false}],
		"startCmd":"python3 -m http.server 8000","readyCmd":"[ -n \"$(ss -Htuln sport = :8000)\" ]"}`
	id, r := e.build("web", map[string][]byte{testHash: files}, trigger)
	if r.code != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", r.code, r.body)
	}
	st, logs := e.wait("web", id)
	if st.Status != buildReady || st.Reason != nil {
		t.Fatalf("%+v", st)
	}
	if len(logs) < 2 {
		t.Fatalf("logs %+v", logs)
	}
	spec := ft.specs["e2b-web"]
	if spec == nil || spec.Start == nil || spec.Start.ReadyPort != 8000 {
		t.Fatalf("spec %+v", spec)
	}
	if got := ft.files["e2b-web"][testHash+"/app/main.py"]; got != "print(1)\n" {
		t.Fatalf("context files %v", ft.files["e2b-web"])
	}
	// The same again: present files, unchanged template.
	id2, r := e.build("web", map[string][]byte{testHash: files}, trigger)
	if r.code != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", r.code, r.body)
	}
	if st, _ := e.wait("web", id2); st.Status != buildReady {
		t.Fatalf("%+v", st)
	}
	if ft.builds != 1 {
		t.Fatalf("%d platform builds, want 1 (unchanged)", ft.builds)
	}
	// Sandbox.create("web") starts a sandbox of e2b-web.
	e.create(map[string]any{"templateID": "web"})
	if got := e.f.specs[len(e.f.specs)-1].Template; got != "e2b-web" {
		t.Fatalf("create's template %q", got)
	}
	// Exists, get, list, delete.
	if r := e.do("GET", "/templates/aliases/web", nil); r.code != http.StatusOK {
		t.Fatalf("alias: %d %s", r.code, r.body)
	}
	e.do("GET", "/templates/aliases/nope", nil).errBody(t, 404, "not found")
	if r := e.do("GET", "/templates", nil); r.code != http.StatusOK || !strings.Contains(string(r.body), `"templateID":"web"`) {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	if r := e.do("GET", "/templates/web", nil); r.code != http.StatusOK || !strings.Contains(string(r.body), id2) {
		t.Fatalf("get: %d %s", r.code, r.body)
	}
	if r := e.do("DELETE", "/templates/web", nil); r.code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	e.do("DELETE", "/templates/web", nil).errBody(t, 404, "not found")
}

func TestTemplateBuildFailsAtStep(t *testing.T) {
	e, _ := newTemplateEnv(t)
	id, r := e.build("bad", nil, `{"fromTemplate":"local","steps":[{"type":"RUN","args":["true"]},{"type":"RUN","args":["false"]}]}`)
	if r.code != http.StatusAccepted {
		t.Fatalf("trigger: %d %s", r.code, r.body)
	}
	st, _ := e.wait("bad", id)
	if st.Status != buildError || st.Reason == nil || st.Reason.Step != "2" || !strings.Contains(st.Reason.Message, "run_step_failed") {
		t.Fatalf("%+v %+v", st, st.Reason)
	}
}

func TestTemplateBuildRefusals(t *testing.T) {
	e, _ := newTemplateEnv(t)
	e.do("POST", "/v3/templates", map[string]any{"name": "web:v1"}).errBody(t, 400, "template tags")
	e.do("POST", "/v3/templates", map[string]any{"name": "team/web"}).errBody(t, 400, "namespaces")
	e.do("POST", "/v3/templates", map[string]any{"name": "Web"}).errBody(t, 400, "a template name is")
	e.do("POST", "/v3/templates", map[string]any{"name": "base"}).errBody(t, 400, "reserved")
	e.do("POST", "/v3/templates", map[string]any{"name": "web", "cpuCount": 2}).errBody(t, 400, "cpuCount")
	e.do("POST", "/v3/templates", map[string]any{"name": "web", "memoryMB": 1024}).errBody(t, 400, "memoryMB")
	e.do("POST", "/v3/templates", map[string]any{"name": "web", "bogus": 1}).errBody(t, 400, "bogus")
	_, r := e.build("img", nil, `{"fromImage":"e2bdev/base","steps":[]}`)
	r.errBody(t, 400, `template step base: the base image "e2bdev/base" is not supported`)
	_, r = e.build("miss", nil, `{"fromTemplate":"local","steps":[{"type":"COPY","args":["a","/b"],"filesHash":"`+testHash+`"}]}`)
	r.errBody(t, 400, "template step 1 (COPY): its files were not uploaded")
	_, r = e.build("unk", nil, `{"fromTemplate":"local","steps":[{"type":"RUN","args":["x"],"bogus":1}]}`)
	r.errBody(t, 400, "bogus")
	e.do("GET", "/templates/nope/files/"+testHash, nil).errBody(t, 404, "no build")
	e.do("GET", "/templates/img/files/xyz", nil).errBody(t, 400, "hex")
	e.do("POST", "/v2/templates/img/builds/nope", "{}").errBody(t, 404, "no such build")
	e.do("POST", "/templates/tags", "{}").errBody(t, 501, "template tags")
	// An upload URL needs no key, but a token the gateway made.
	res, err := http.DefaultClient.Do(mustReq(t, "PUT", e.http.URL+TemplateUploadPath+strings.Repeat("ab", 32), "x"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a made-up upload token: %d", res.StatusCode)
	}
	// A bad archive is refused at upload, nothing stored.
	e.do("POST", "/v3/templates", map[string]any{"name": "up"})
	r = e.do("GET", "/templates/up/files/"+testHash, nil)
	var fo fileUploadOut
	r.json(t, &fo)
	res, err = http.DefaultClient.Do(mustReq(t, "PUT", fo.URL, string(tarOf(t, true, "a", "->/etc/shadow"))))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "links") {
		t.Fatalf("link upload: %d %s", res.StatusCode, body)
	}
	r = e.do("GET", "/templates/up/files/"+testHash, nil)
	r.json(t, &fo)
	if fo.Present {
		t.Fatal("a refused upload is present")
	}
}

// TestTemplatesOnAWS: a backend without template builds refuses the
// build request, before any upload.
func TestTemplatesOnAWS(t *testing.T) {
	e, ft := newTemplateEnv(t)
	ft.unimplemented = true
	e.do("POST", "/v3/templates", map[string]any{"name": "web"}).errBody(t, 501, "E2B template builds need the local platform")
}

// TestTemplatesWithoutPlatform: a platform without templates answers 501.
func TestTemplatesWithoutPlatform(t *testing.T) {
	e := newEnv(t)
	e.do("POST", "/v3/templates", map[string]any{"name": "web"}).errBody(t, 501, "templates")
	e.do("GET", "/templates", nil).errBody(t, 501, "templates")
}

func mustReq(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}
