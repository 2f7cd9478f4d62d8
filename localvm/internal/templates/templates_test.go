package templates

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/proto/localplatform"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

type entry struct {
	name, body string
	mode       fs.FileMode
}

func zipOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, e.body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func specJSON(t testing.TB, s *ptemplate.Spec) string {
	b, err := ptemplate.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var goodSpec = &ptemplate.Spec{V: 1, Base: "local", Steps: []ptemplate.Step{
	{Run: "echo hi"}, {Copy: &ptemplate.Copy{Src: "app", Dst: "/home/user/app", Owner: "user"}}, {Env: map[string]string{"A": "1"}},
}}

// fakeBuilder records what it was asked and writes a file into the layer.
type fakeBuilder struct {
	mu    sync.Mutex
	calls int
	err   error
	block chan struct{}
}

func (f *fakeBuilder) Build(ctx context.Context, layer string, spec *ptemplate.Spec, log io.Writer) error {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	io.WriteString(log, "building\n")
	if f.err != nil {
		return f.err
	}
	for _, d := range []string{"usr/local/bin", "opt", "home"} {
		if err := os.MkdirAll(filepath.Join(layer, d), 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(layer, "usr/local/bin/tool"), []byte("#!/bin/sh\n"), 0o4755)
}

func openStore(t *testing.T, b Builder) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(Options{StateDir: dir, Builder: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, dir
}

func waitState(t *testing.T, s *Store, name string) *localplatform.Template {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := s.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != localplatform.TemplateBuilding {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatal("still building")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPutBuildsAndResolves(t *testing.T) {
	b := &fakeBuilder{}
	s, _ := openStore(t, b)
	art := zipOf(t, entry{name: "Dockerfile", body: "FROM local\n"}, entry{name: "template.json", body: specJSON(t, goodSpec)},
		entry{name: "context/app/", mode: fs.ModeDir | 0o755}, entry{name: "context/app/main.py", body: "print(1)\n"})
	if _, err := s.Layer("web"); !errors.Is(err, registry.ErrNoTemplate) {
		t.Fatalf("layer before the build: %v", err)
	}
	st, err := s.Put(context.Background(), "web", bytes.NewReader(art), "", false)
	if err != nil || st.State != localplatform.TemplateBuilding {
		t.Fatalf("%v %v", st, err)
	}
	if got := waitState(t, s, "web"); got.State != localplatform.TemplateReady || got.Step != -1 {
		t.Fatalf("%+v", got)
	}
	layer, err := s.Layer("web")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(layer, "usr/local/bin/tool"))
	if err != nil || fi.Mode()&fs.ModeSetuid != 0 {
		t.Fatalf("the layer's file: %v %v (set-id bits must go)", fi, err)
	}
	for _, gone := range []string{"context", "work"} {
		if _, err := os.Stat(filepath.Join(layer, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left in the layer", gone)
		}
	}
	rt, err := os.ReadFile(filepath.Join(layer, "runtime.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := ptemplate.DecodeRuntime(rt); err != nil || r.Envs["A"] != "1" || r.Name != "web" {
		t.Fatalf("runtime %v %v", r, err)
	}
	// The same artifact again: unchanged, not built; forced: built.
	again, err := s.Put(context.Background(), "web", bytes.NewReader(art), "", false)
	if err != nil || !again.Unchanged || b.calls != 1 {
		t.Fatalf("again: %+v %v, %d builds", again, err, b.calls)
	}
	if _, err := s.Put(context.Background(), "web", bytes.NewReader(art), "", true); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "web")
	if b.calls != 2 {
		t.Fatalf("%d builds", b.calls)
	}
	var logs bytes.Buffer
	f, err := s.Logs("web")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(&logs, f)
	f.Close()
	if logs.String() != "building\n" {
		t.Fatalf("logs %q", logs.String())
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].Name != "web" {
		t.Fatalf("list %v %v", list, err)
	}
	if err := s.Delete("web"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Layer("web"); !errors.Is(err, registry.ErrNoTemplate) {
		t.Fatalf("layer after delete: %v", err)
	}
}

func TestFailedBuildKeepsTheReadyLayer(t *testing.T) {
	b := &fakeBuilder{}
	s, _ := openStore(t, b)
	art := zipOf(t, entry{name: "template.json", body: specJSON(t, &ptemplate.Spec{V: 1, Base: "local", Steps: []ptemplate.Step{{Run: "true"}}})})
	if _, err := s.Put(context.Background(), "t", bytes.NewReader(art), "", false); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "t")
	ready, _ := s.Layer("t")
	b.err = &BuildError{Reason: localplatform.TemplateReasonRunStepFailed, Step: 0, Message: "step 0 exited with code 2"}
	if _, err := s.Put(context.Background(), "t", bytes.NewReader(art), "", true); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, s, "t")
	if st.State != localplatform.TemplateFailed || st.Reason != localplatform.TemplateReasonRunStepFailed || st.Step != 0 {
		t.Fatalf("%+v", st)
	}
	// The state says FAILED, and sandboxes still start from the last
	// layer that was built (as AWS launches the last ACTIVE version).
	if got, err := s.Layer("t"); err != nil || got != ready {
		t.Fatalf("layer after a failed rebuild: %v %v", got, err)
	}
}

func TestPutRefuses(t *testing.T) {
	s, _ := openStore(t, &fakeBuilder{})
	spec := specJSON(t, goodSpec)
	ctx := context.Background()
	for name, c := range map[string]struct {
		name string
		zip  []byte
		sha  string
	}{
		"bad name":        {name: "Bad/Name", zip: zipOf(t, entry{name: "template.json", body: spec})},
		"local":           {name: "local", zip: zipOf(t, entry{name: "template.json", body: spec})},
		"local-root":      {name: "local-root", zip: zipOf(t, entry{name: "template.json", body: spec})},
		"not a zip":       {name: "a", zip: []byte("not a zip")},
		"no spec":         {name: "a", zip: zipOf(t, entry{name: "Dockerfile", body: "FROM local"})},
		"bad spec":        {name: "a", zip: zipOf(t, entry{name: "template.json", body: `{"v":2}`})},
		"other base":      {name: "a", zip: zipOf(t, entry{name: "template.json", body: specJSON(t, &ptemplate.Spec{V: 1, Base: "python:3.12"})})},
		"outside":         {name: "a", zip: zipOf(t, entry{name: "template.json", body: spec}, entry{name: "etc/passwd", body: "x"})},
		"dotdot":          {name: "a", zip: zipOf(t, entry{name: "template.json", body: spec}, entry{name: "context/../../x", body: "x"})},
		"absolute":        {name: "a", zip: zipOf(t, entry{name: "template.json", body: spec}, entry{name: "/context/x", body: "x"})},
		"duplicate":       {name: "a", zip: zipOf(t, entry{name: "template.json", body: spec}, entry{name: "template.json", body: spec})},
		"missing source":  {name: "a", zip: zipOf(t, entry{name: "template.json", body: spec})},
		"link escapes":    {name: "a", zip: zipOf(t, entry{name: "template.json", body: spec}, entry{name: "context/app/", mode: fs.ModeDir | 0o755}, entry{name: "context/app/l", body: "../../etc/passwd", mode: fs.ModeSymlink | 0o777})},
		"absolute link":   {name: "a", zip: zipOf(t, entry{name: "template.json", body: spec}, entry{name: "context/app/", mode: fs.ModeDir | 0o755}, entry{name: "context/app/l", body: "/etc/passwd", mode: fs.ModeSymlink | 0o777})},
		"device":          {name: "a", zip: zipOf(t, entry{name: "template.json", body: spec}, entry{name: "context/app/", mode: fs.ModeDir | 0o755}, entry{name: "context/app/d", mode: fs.ModeDevice | 0o644})},
		"sha256 mismatch": {name: "a", zip: zipOf(t, entry{name: "template.json", body: spec}, entry{name: "context/app/", mode: fs.ModeDir | 0o755}), sha: strings.Repeat("0", 64)},
	} {
		_, err := s.Put(ctx, c.name, bytes.NewReader(c.zip), c.sha, false)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Nothing of the refused artifacts stays.
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		layers, _ := os.ReadDir(filepath.Join(s.dir, e.Name(), "layers"))
		if len(layers) != 0 {
			t.Errorf("%s: %d layers left", e.Name(), len(layers))
		}
		if strings.HasPrefix(e.Name(), ".upload") {
			t.Errorf("upload left: %s", e.Name())
		}
	}
}

func TestBusyAndNoRoot(t *testing.T) {
	b := &fakeBuilder{block: make(chan struct{})}
	s, _ := openStore(t, b)
	art := zipOf(t, entry{name: "template.json", body: specJSON(t, &ptemplate.Spec{V: 1, Base: "local"})})
	if _, err := s.Put(context.Background(), "a", bytes.NewReader(art), "", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), "a", bytes.NewReader(art), "", true); !errors.Is(err, ErrBusy) {
		t.Fatalf("second build of one name: %v", err)
	}
	if err := s.Delete("a"); !errors.Is(err, ErrBusy) {
		t.Fatalf("delete while building: %v", err)
	}
	if _, err := s.Put(context.Background(), "b", bytes.NewReader(art), "", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(context.Background(), "c", bytes.NewReader(art), "", false); !errors.Is(err, ErrTooMany) {
		t.Fatalf("third build at once: %v", err)
	}
	close(b.block)
	waitState(t, s, "a")
	waitState(t, s, "b")

	norooted, _ := openStore(t, nil)
	if _, err := norooted.Put(context.Background(), "a", bytes.NewReader(art), "", false); !errors.Is(err, ErrNoRoot) {
		t.Fatalf("no builder: %v", err)
	}
}

// TestOpenRecovers: a build a stopped platform left is FAILED
// (interrupted), its scratch and unnamed layers removed.
func TestOpenRecovers(t *testing.T) {
	b := &fakeBuilder{block: make(chan struct{})}
	dir := t.TempDir()
	s, err := Open(Options{StateDir: dir, Builder: b})
	if err != nil {
		t.Fatal(err)
	}
	art := zipOf(t, entry{name: "template.json", body: specJSON(t, &ptemplate.Spec{V: 1, Base: "local"})})
	if _, err := s.Put(context.Background(), "a", bytes.NewReader(art), "", false); err != nil {
		t.Fatal(err)
	}
	// The platform "stops": the status stays BUILDING on disk.
	st, _ := s.status("a")
	s2, err := Open(Options{StateDir: dir, Builder: b})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Get("a")
	if err != nil || st.State != localplatform.TemplateBuilding || got.State != localplatform.TemplateFailed || got.Reason != localplatform.TemplateReasonInterrupted {
		t.Fatalf("%+v %v", got, err)
	}
	// Its layer goes at the sweep, unless a sandbox runs it.
	layers, _ := os.ReadDir(filepath.Join(dir, "templates", "a", "layers"))
	if len(layers) != 1 {
		t.Fatalf("%d layers before the sweep", len(layers))
	}
	used := filepath.Join(dir, "templates", "a", "layers", layers[0].Name())
	s2.SetInUse(func() map[string]bool { return map[string]bool{used: true} })
	s2.Sweep()
	if _, err := os.Stat(used); err != nil {
		t.Fatalf("a layer in use was swept: %v", err)
	}
	s2.SetInUse(nil)
	s2.Sweep()
	if layers, _ := os.ReadDir(filepath.Join(dir, "templates", "a", "layers")); len(layers) != 0 {
		t.Fatalf("%d layers left", len(layers))
	}
	close(b.block)
	s.Close()
	s2.Close()
}

func TestCapped(t *testing.T) {
	var buf bytes.Buffer
	c := &capped{w: &buf, left: 5}
	c.Write([]byte("abc"))
	c.Write([]byte("defgh"))
	c.Write([]byte("ij"))
	if !strings.HasPrefix(buf.String(), "abcde\n[build log cut") || strings.Count(buf.String(), "cut") != 1 {
		t.Fatalf("%q", buf.String())
	}
}

// FuzzArtifact: no artifact panics the reader, and nothing it extracts
// lands outside the context directory.
func FuzzArtifact(f *testing.F) {
	f.Add(zipOf(f, entry{name: "template.json", body: specJSON(f, goodSpec)}, entry{name: "context/app/", mode: fs.ModeDir | 0o755}, entry{name: "context/app/a", body: "x"}))
	f.Add(zipOf(f, entry{name: "template.json", body: specJSON(f, goodSpec)}, entry{name: "context/app/l", body: "../x", mode: fs.ModeSymlink | 0o777}))
	f.Fuzz(func(t *testing.T, b []byte) {
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if _, err := readSpec(zr); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		root := t.TempDir()
		dst := filepath.Join(root, "context")
		_ = extractContext(zr, dst)
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if p != root && !strings.HasPrefix(p, dst) {
				t.Fatalf("extracted outside the context: %s", p)
			}
			if d.Type()&fs.ModeSymlink != 0 {
				target, _ := os.Readlink(p)
				rel, _ := filepath.Rel(dst, filepath.Join(filepath.Dir(p), target))
				if strings.HasPrefix(rel, "..") || filepath.IsAbs(target) {
					t.Fatalf("a link leaves the context: %s -> %s", p, target)
				}
			}
			return nil
		})
	})
}

// TestNoEntryUnderALink: links that each stay inside the context, chained
// (x -> ., x/x2 -> ., x/x2/y -> ../../etc), would let an entry under them
// leave it: any entry under a link is refused, and a link is never
// followed while extracting.
func TestNoEntryUnderALink(t *testing.T) {
	s, _ := openStore(t, &fakeBuilder{})
	spec := specJSON(t, &ptemplate.Spec{V: 1, Base: "local", Steps: []ptemplate.Step{{Copy: &ptemplate.Copy{Src: "x", Dst: "/home/user/x"}}}})
	link := fs.ModeSymlink | 0o777
	art := zipOf(t, entry{name: "template.json", body: spec},
		entry{name: "context/x", body: ".", mode: link},
		entry{name: "context/x/x2", body: ".", mode: link},
		entry{name: "context/x/x2/y", body: "../../etc", mode: link},
		entry{name: "context/x/x2/y/passwd", body: "pwned"})
	if _, err := s.Put(context.Background(), "a", bytes.NewReader(art), "", false); !errors.Is(err, ErrInvalid) {
		t.Fatalf("chained links: %v", err)
	}
	// A directory and a link of one name are a duplicate.
	art = zipOf(t, entry{name: "template.json", body: spec},
		entry{name: "context/x/", mode: fs.ModeDir | 0o755},
		entry{name: "context/x", body: ".", mode: link})
	if _, err := s.Put(context.Background(), "a", bytes.NewReader(art), "", false); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a directory and a link of one name: %v", err)
	}
}
