package e2b

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func (e *env) fork(id string, body any) []forkResult {
	e.t.Helper()
	r := e.do("POST", "/sandboxes/"+id+"/fork", body)
	if r.code != http.StatusCreated {
		e.t.Fatalf("fork: %d %s", r.code, r.body)
	}
	var out []forkResult
	r.json(e.t, &out)
	return out
}

func TestFork(t *testing.T) {
	e := newEnv(t)
	src := e.create(map[string]any{
		"templateID": "base", "metadata": map[string]string{"a": "b"}, "envVars": map[string]string{"K": "v"},
		"secure": false, "autoPause": true, "autoResume": map[string]bool{"enabled": true},
		"network": map[string]any{"allowPublicTraffic": false, "allowOut": []string{"10.0.0.1"}, "denyOut": []string{"0.0.0.0/0"}},
	})
	e.f.writeFile(src.SandboxID, "a.txt", "alpha")
	e.f.writeFile(src.SandboxID, "dir/b.txt", strings.Repeat("b", 5000))
	out := e.fork(src.SandboxID, map[string]any{"count": 2, "timeout": 60})
	if len(out) != 2 {
		t.Fatalf("fork: %d entries, want 2", len(out))
	}
	want := e.f.filesOf(src.SandboxID)
	srcSpec := e.f.specs[0]
	for i, f := range out {
		if f.Error != nil || f.Sandbox == nil {
			t.Fatalf("fork %d: %+v", i, f)
		}
		sb := f.Sandbox
		if sb.SandboxID == src.SandboxID || sb.TemplateID != "base" || sb.EnvdAccessToken != "" || sb.TrafficAccessToken == "" || sb.EnvdVersion != EnvdVersion {
			t.Fatalf("fork %d: %+v", i, sb)
		}
		if got := e.f.filesOf(sb.SandboxID); !maps.Equal(got, want) {
			t.Fatalf("fork %d files %v, want %v", i, got, want)
		}
		spec := e.f.specs[i+1]
		if spec.Template != "rayito-default" || spec.OnTimeout != rayito.TimeoutPause || !spec.AutoResume || spec.Envs["K"] != "v" || spec.Timeout.Seconds() != 60 {
			t.Fatalf("fork %d spec %+v", i, spec)
		}
		if spec.Network == nil || !slices.Equal(spec.Network.AllowOut, srcSpec.Network.AllowOut) || !slices.Equal(spec.Network.DenyOut, srcSpec.Network.DenyOut) {
			t.Fatalf("fork %d network %+v", i, spec.Network)
		}
		if spec.Metadata["a"] != "b" || spec.Metadata[labelKey] != srcSpec.Metadata[labelKey] {
			t.Fatalf("fork %d metadata %v, source's %v", i, spec.Metadata, srcSpec.Metadata)
		}
		// Private like its source: a user port needs the traffic token.
		e.routed("GET", "/", sb.SandboxID, "8000").errBody(t, 403, "traffic access token")
		var info detailOut
		e.do("GET", "/sandboxes/"+sb.SandboxID, nil).json(t, &info)
		if info.Metadata["a"] != "b" || info.Lifecycle.OnTimeout != "pause" || !info.Lifecycle.AutoResume {
			t.Fatalf("fork %d getInfo %+v", i, info)
		}
	}
	// A write in a fork stays there.
	e.f.writeFile(out[0].Sandbox.SandboxID, "only-fork.txt", "x")
	if _, ok := e.f.filesOf(src.SandboxID)["only-fork.txt"]; ok {
		t.Fatal("a fork's write reached the source")
	}
	// count defaults to 1; the timeout to DefaultTimeout.
	if out := e.fork(src.SandboxID, nil); len(out) != 1 || out[0].Sandbox == nil {
		t.Fatalf("fork without a body: %+v", out)
	}
	if d := e.f.specs[len(e.f.specs)-1].Timeout; d != DefaultTimeout {
		t.Fatalf("default fork timeout %v", d)
	}
}

func TestForkRefusals(t *testing.T) {
	e := newEnv(t)
	src := e.create(nil)
	path := "/sandboxes/" + src.SandboxID + "/fork"
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]int{"count": 0}, "count must be 1 to 8, got 0"},
		{map[string]int{"count": 9}, "count must be 1 to 8, got 9"},
		{map[string]int{"count": -1}, "count must be"},
		{`{"count":"2"}`, `"count"`},
		{map[string]int{"timeout": 0}, "timeout must be"},
		{map[string]int{"memory": 1}, `"memory"`},
	} {
		e.do("POST", path, c.body).errBody(t, 400, c.want)
	}
	e.do("POST", "/sandboxes/no-such/fork", nil).errBody(t, 404, "not found")
	e.do("POST", "/sandboxes/..%2Fx/fork", nil).errBody(t, 400, "invalid sandbox id")
	e.do("POST", "/sandboxes/"+src.SandboxID+"/pause", nil)
	e.do("POST", path, nil).errBody(t, 409, "is paused")
	if len(e.f.specs) != 1 {
		t.Fatalf("refused forks created %d sandboxes", len(e.f.specs)-1)
	}
	// A source with an egress proxy: the gateway does not keep its
	// password, so it cannot make the fork like it.
	px := e.create(map[string]any{"network": map[string]any{"egressProxy": map[string]string{"address": "10.0.0.9:1080", "password": "pw"}}})
	r := e.do("POST", "/sandboxes/"+px.SandboxID+"/fork", nil)
	r.errBody(t, 409, "egress proxy")
	if strings.Contains(string(r.body), "pw") {
		t.Fatal("the proxy password came back")
	}
}

func TestForkFailuresKillTheFork(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxCopyBytes = 4096 })
	src := e.create(nil) // sbx-001
	e.f.writeFile(src.SandboxID, "a.txt", "alpha")
	// One fork's extraction fails: it alone fails, and is killed.
	e.f.failUntar["sbx-003"] = true
	out := e.fork(src.SandboxID, map[string]int{"count": 2})
	// The forks are made in parallel: either may be sbx-003.
	if out[0].Sandbox == nil {
		out[0], out[1] = out[1], out[0]
	}
	if out[0].Sandbox == nil || out[0].Sandbox.SandboxID != "sbx-002" || out[0].Error != nil || out[1].Error == nil || out[1].Sandbox != nil {
		t.Fatalf("fork with one failed copy: %+v", out)
	}
	if out[1].Error.Code != 500 || !strings.Contains(out[1].Error.Message, "tar in the new sandbox") {
		t.Fatalf("the failed fork's error: %+v", out[1].Error)
	}
	if !slices.Equal(e.f.killed, []string{"sbx-003"}) {
		t.Fatalf("killed %v, want the failed fork", e.f.killed)
	}
	e.do("GET", "/sandboxes/sbx-003", nil).errBody(t, 404, "not found")
	// Past the cap every fork fails, and none is left.
	e.f.writeFile(src.SandboxID, "big", strings.Repeat("x", 8192))
	out = e.fork(src.SandboxID, map[string]int{"count": 2})
	for i, f := range out {
		if f.Error == nil || f.Error.Code != 413 || !strings.Contains(f.Error.Message, "larger than the 4096 bytes") {
			t.Fatalf("fork %d past the cap: %+v", i, f)
		}
	}
	if !slices.Equal(e.f.killed, []string{"sbx-003", "sbx-004", "sbx-005"}) && !slices.Equal(e.f.killed, []string{"sbx-003", "sbx-005", "sbx-004"}) {
		t.Fatalf("killed %v", e.f.killed)
	}
}

var snapIDRE = regexp.MustCompile(`^snap-[0-9a-f]{24}$`)

func (e *env) snapshot(id string, body any) snapshotOut {
	e.t.Helper()
	r := e.do("POST", "/sandboxes/"+id+"/snapshots", body)
	if r.code != http.StatusCreated {
		e.t.Fatalf("snapshot: %d %s", r.code, r.body)
	}
	var out snapshotOut
	r.json(e.t, &out)
	if !snapIDRE.MatchString(out.SnapshotID) {
		e.t.Fatalf("snapshot id %q", out.SnapshotID)
	}
	return out
}

func TestSnapshotsOff(t *testing.T) {
	e := newEnv(t)
	sb := e.create(nil)
	e.do("POST", "/sandboxes/"+sb.SandboxID+"/snapshots", nil).errBody(t, 501, "snapshots is not supported by Rayito's E2B gateway")
	e.do("GET", "/snapshots", nil).errBody(t, 501, "snapshots is not supported by Rayito's E2B gateway")
	e.do("DELETE", "/templates/snap-abc", nil).errBody(t, 501, "templates is not supported by Rayito's E2B gateway")
	// A templateID that looks like a snapshot is only a templateID then.
	e.create(map[string]string{"templateID": "snap-abc"})
}

func TestSnapshots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snaps")
	e := newEnv(t, func(o *Options) { o.SnapshotDir = dir; o.Templates = map[string]string{"base": "img-base"} })
	src := e.create(map[string]string{"templateID": "base"})
	e.f.writeFile(src.SandboxID, "a.txt", "alpha")
	e.f.writeFile(src.SandboxID, "d/b.txt", "beta")
	snap := e.snapshot(src.SandboxID, map[string]string{"name": "my-snap"})
	if !slices.Equal(snap.Names, []string{"my-snap"}) {
		t.Fatalf("names %v", snap.Names)
	}
	anon := e.snapshot(src.SandboxID, nil)
	if r := e.do("POST", "/sandboxes/"+src.SandboxID+"/snapshots", nil); !strings.Contains(string(r.body), `"names":[]`) {
		t.Fatalf("a snapshot without a name: %s", r.body)
	}
	// The directory: private, whole files only.
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("snapshot dir: %v %v", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		t.Fatalf("%d entries in the snapshot dir, want 3", len(ents))
	}
	for _, en := range ents {
		if !en.IsDir() || !validSnapshotID(en.Name()) {
			t.Fatalf("%s in the snapshot dir", en.Name())
		}
	}
	// Each in the open checkpoint format, laid out as rayd's.
	man, hs := checkSnapshotDir(t, dir, snap.SnapshotID)
	if man.Files != 2 || man.Directories != 0 || man.ContentBytes != 9 || man.Producer != snapshotProducer {
		t.Fatalf("manifest %+v", man)
	}
	if len(hs) != 2 || hs[0].Name != "a.txt" || hs[1].Name != "d/b.txt" {
		t.Fatalf("entries %+v", hs)
	}
	var m snapshotMeta
	b, _ := os.ReadFile(filepath.Join(dir, snap.SnapshotID, metaName))
	if err := json.Unmarshal(b, &m); err != nil || m.SandboxID != src.SandboxID || m.TemplateID != "base" || m.Template != "img-base" || m.CreatedAt.IsZero() || m.SizeBytes != man.Size {
		t.Fatalf("metadata %s: %v", b, err)
	}

	// A create from the snapshot: the source's template, the files back.
	r := e.do("POST", "/v2/sandboxes", map[string]any{"templateID": snap.SnapshotID, "metadata": map[string]string{"k": "v"}})
	if r.code != 201 {
		t.Fatalf("create from a snapshot: %d %s", r.code, r.body)
	}
	var made sandboxOut
	r.json(t, &made)
	if made.TemplateID != "base" || e.f.specs[len(e.f.specs)-1].Template != "img-base" {
		t.Fatalf("create from a snapshot: %+v, spec %+v", made, e.f.specs[len(e.f.specs)-1])
	}
	if got := e.f.filesOf(made.SandboxID); !maps.Equal(got, map[string]string{"a.txt": "alpha", "d/b.txt": "beta"}) {
		t.Fatalf("restored files %v", got)
	}
	// Once the source is gone too.
	e.do("DELETE", "/sandboxes/"+src.SandboxID, nil)
	made2 := e.create(map[string]string{"templateID": anon.SnapshotID})
	if len(e.f.filesOf(made2.SandboxID)) != 2 {
		t.Fatal("restore after the source's end")
	}

	// Ids are checked strictly: nothing outside the directory is named.
	for _, id := range []string{"snap-../x", "snap-", "snap-A", "snap-a/b", "snap-a.b", "../x", "snap-" + strings.Repeat("a", 60)} {
		if validSnapshotID(id) {
			t.Errorf("validSnapshotID(%q)", id)
		}
	}
	if !validSnapshotID(snap.SnapshotID) || !validSnapshotID("snap-a-1") {
		t.Error("a good snapshot id refused")
	}
	e.do("POST", "/v2/sandboxes", map[string]string{"templateID": "snap-../x"}).errBody(t, 400, "not found")
	e.do("POST", "/v2/sandboxes", map[string]string{"templateID": "snap-0123"}).errBody(t, 400, `snapshot "snap-0123" not found`)
	e.do("DELETE", "/templates/"+url.PathEscape("../x"), nil).errBody(t, 404, "not found")
	e.do("DELETE", "/templates/snap-..%2F..%2Fx", nil).errBody(t, 404, "not found")
	e.do("DELETE", "/templates/base", nil).errBody(t, 404, "not found")
	e.do("PATCH", "/templates/base", nil).errBody(t, 501, "templates is not supported")
	e.do("POST", "/sandboxes/"+made.SandboxID+"/snapshots", map[string]string{"name": "a\nb"}).errBody(t, 400, "name must be")
	e.do("POST", "/sandboxes/no-such/snapshots", nil).errBody(t, 404, "not found")
	e.do("POST", "/sandboxes/"+made.SandboxID+"/pause", nil)
	e.do("POST", "/sandboxes/"+made.SandboxID+"/snapshots", nil).errBody(t, 409, "is paused")

	// Delete: 204, then the body code 404 (the SDK's false).
	if r := e.do("DELETE", "/templates/"+anon.SnapshotID, nil); r.code != 204 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	e.do("DELETE", "/templates/"+anon.SnapshotID, nil).errBody(t, 404, "not found")
	e.do("POST", "/v2/sandboxes", map[string]string{"templateID": anon.SnapshotID}).errBody(t, 400, "not found")
	if _, err := os.Lstat(filepath.Join(dir, anon.SnapshotID)); !os.IsNotExist(err) {
		t.Fatalf("the deleted snapshot's directory: %v", err)
	}
}

func TestSnapshotListPaging(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.SnapshotDir = t.TempDir() })
	a := e.create(nil)
	b := e.create(nil)
	var ids []string
	for i, src := range []string{a.SandboxID, a.SandboxID, b.SandboxID} {
		ids = append(ids, e.snapshot(src, map[string]string{"name": []string{"one", "two", "one"}[i]}).SnapshotID)
	}
	list := func(q string) ([]snapshotOut, string) {
		r := e.do("GET", "/snapshots"+q, nil)
		if r.code != 200 {
			t.Fatalf("list %s: %d %s", q, r.code, r.body)
		}
		var out []snapshotOut
		r.json(t, &out)
		return out, r.header.Get("X-Next-Token")
	}
	idsOf := func(s []snapshotOut) []string {
		var out []string
		for _, x := range s {
			out = append(out, x.SnapshotID)
		}
		return out
	}
	all, next := list("")
	if next != "" || len(all) != 3 {
		t.Fatalf("list: %v next %q", all, next)
	}
	p1, next := list("?limit=2")
	if len(p1) != 2 || next == "" {
		t.Fatalf("page 1: %v next %q", p1, next)
	}
	p2, next2 := list("?limit=2&nextToken=" + url.QueryEscape(next))
	if len(p2) != 1 || next2 != "" {
		t.Fatalf("page 2: %v next %q", p2, next2)
	}
	if got := append(idsOf(p1), idsOf(p2)...); !slices.Equal(got, idsOf(all)) {
		t.Fatalf("pages %v, want %v", got, idsOf(all))
	}
	slices.Sort(ids)
	if got := slices.Sorted(slices.Values(idsOf(all))); !slices.Equal(got, ids) {
		t.Fatalf("listed %v, made %v", got, ids)
	}
	if s, _ := list("?sandboxID=" + a.SandboxID); len(s) != 2 {
		t.Fatalf("by sandbox: %v", s)
	}
	if s, _ := list("?name=one"); len(s) != 2 {
		t.Fatalf("by name: %v", s)
	}
	if s, _ := list("?name=" + ids[0]); len(s) != 1 {
		t.Fatalf("by id: %v", s)
	}
	if s, _ := list("?sandboxID=no-such"); len(s) != 0 || s == nil {
		t.Fatalf("none: %v", s)
	}
	e.do("GET", "/snapshots?limit=0", nil).errBody(t, 400, "limit")
	e.do("GET", "/snapshots?nextToken=!!", nil).errBody(t, 400, "nextToken")
}

func TestSnapshotCaps(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(o *Options) {
		o.SnapshotDir = dir
		o.MaxSnapshots = 2
		o.MaxCopyBytes = 16384
		o.MaxSnapshotBytes = 6000
	})
	src := e.create(nil)
	// Random bytes: the archives are compressed.
	e.f.writeFile(src.SandboxID, "a", randomString(t, 2000))
	e.snapshot(src.SandboxID, nil)
	// The second would pass the total: refused, nothing left behind.
	e.f.writeFile(src.SandboxID, "b", randomString(t, 5000))
	e.do("POST", "/sandboxes/"+src.SandboxID+"/snapshots", nil).errBody(t, 409, "does not fit")
	e.f.writeFile(src.SandboxID, "b", randomString(t, 4000))
	e.do("POST", "/sandboxes/"+src.SandboxID+"/snapshots", nil).errBody(t, 409, "does not fit")
	e.f.writeFile(src.SandboxID, "b", "b")
	e.snapshot(src.SandboxID, nil)
	e.do("POST", "/sandboxes/"+src.SandboxID+"/snapshots", nil).errBody(t, 409, "maximum of 2 snapshots")
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("%d entries in the snapshot dir, want 2", len(ents))
	}
	// The per-copy cap (of the files' tar, before compression) when the
	// total has room.
	e2 := newEnv(t, func(o *Options) { o.SnapshotDir = t.TempDir(); o.MaxCopyBytes = 4096 })
	s2 := e2.create(nil)
	e2.f.writeFile(s2.SandboxID, "big", strings.Repeat("x", 8192))
	e2.do("POST", "/sandboxes/"+s2.SandboxID+"/snapshots", nil).errBody(t, 413, "larger than the 4096 bytes")
}

func TestSnapshotDirChecks(t *testing.T) {
	open := func(dir string) error {
		_, err := newServer(context.Background(), Options{APIKeyHashes: [][32]byte{HashAPIKey(testKey)}, SnapshotDir: dir}, newFake(t))
		return err
	}
	d := t.TempDir()
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := open(d); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("an open dir is not made private: %v %v", fi.Mode(), err)
	}
	if err := os.WriteFile(filepath.Join(d, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := open(filepath.Join(d, "f")); err == nil {
		t.Fatal("a file as the snapshot dir")
	}
	link := filepath.Join(t.TempDir(), "link")
	priv := t.TempDir()
	if err := os.Symlink(priv, link); err != nil {
		t.Fatal(err)
	}
	if err := open(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a symlink: %v", err)
	}
	// What an interrupted write left is removed.
	stale := filepath.Join(priv, tmpPrefix+"123")
	if err := os.WriteFile(stale, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := open(priv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temp file: %v", err)
	}
}
