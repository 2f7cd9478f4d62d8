package envdfs_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/auth"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/service/envdhttp"
)

// envdDo sends a plain HTTP request to the envd port with the token.
func envdDo(h *daemontest.Harness, t *testing.T, method, path string, q url.Values, body io.Reader, hdr http.Header) *http.Response {
	t.Helper()
	u := h.EnvdURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if req.Header.Get(auth.Header) == "" && hdr.Get("X-No-Token") == "" {
		req.Header.Set(auth.Header, h.Token)
	}
	resp, err := raydtest.HTTP1.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestE2BFilesystemRPCs(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	ctx := context.Background()
	c := h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token})

	mk, err := c.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: dir + "/a/b"}))
	if err != nil {
		t.Fatal(err)
	}
	if e := mk.Msg.GetEntry(); e.GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY || e.GetPath() != dir+"/a/b" || e.GetName() != "b" {
		t.Fatalf("MakeDir entry %v", e)
	}
	if _, err := c.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: dir + "/a/b"})); raydtest.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("MakeDir again: %v", err)
	}
	if err := os.WriteFile(dir+"/a/f.txt", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: dir + "/a/f.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	e := st.Msg.GetEntry()
	if e.GetType() != filesystem.FileType_FILE_TYPE_FILE || e.GetSize() != 5 || e.GetPermissions() != "-rw-r--r--" || e.GetModifiedTime().AsTime().IsZero() {
		t.Fatalf("Stat %v", e)
	}
	_, err = c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: dir + "/missing"}))
	if raydtest.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Stat missing: %v", err)
	}

	ls, err := c.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: dir + "/a", Depth: 1}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ls.Msg.GetEntries() {
		names = append(names, e.GetName())
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "b,f.txt" {
		t.Fatalf("ListDir depth 1: %v", names)
	}
	if err := os.WriteFile(dir+"/a/b/deep.txt", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ls, err = c.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: dir, Depth: 3}))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range ls.Msg.GetEntries() {
		paths = append(paths, strings.TrimPrefix(e.GetPath(), dir+"/"))
	}
	if !slices.Contains(paths, "a/b/deep.txt") {
		t.Fatalf("ListDir depth 3: %v", paths)
	}

	mv, err := c.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: dir + "/a/f.txt", Destination: dir + "/g.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	if mv.Msg.GetEntry().GetPath() != dir+"/g.txt" {
		t.Fatalf("Move entry %v", mv.Msg.GetEntry())
	}
	if _, err := c.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: dir + "/a/f.txt", Destination: dir + "/h.txt"})); raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Move of a missing source: %v", err)
	}
	// Remove takes a directory with its contents.
	if _, err := c.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: dir + "/a"})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/a"); !os.IsNotExist(err) {
		t.Fatalf("after Remove: %v", err)
	}
	// As on envd, a missing path is removed already.
	if _, err := c.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: dir + "/a"})); err != nil {
		t.Fatalf("Remove missing: %v", err)
	}

	// The polling watchers are not implemented, with a message.
	_, err = c.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: dir}))
	if raydtest.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), "WatchDir") {
		t.Fatalf("CreateWatcher: %v", err)
	}

	// A user the identity rules refuse.
	_, err = h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token, User: "root"}).Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: dir}))
	if raydtest.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("root without RAYITO_ALLOW_ROOT: %v", err)
	}
}

// Traversal and symbolic-link escapes are refused with the code rayd's
// own API answers, on the RPCs and on GET /files. The E2B surface cleans
// ".." as envd does, so its paths are compared with their clean form.
func TestE2BFilesystemEscapesLikeOurAPI(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	ctx := context.Background()
	for link, target := range map[string]string{"etc-link": "/etc", "proc-link": "/proc", "state-link": h.StateDir} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	ours := h.Files()
	envd := h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token})
	for _, p := range []string{
		"/etc/shadow", "/proc/1/environ", "/proc/self/root/etc/shadow",
		dir + "/etc-link/shadow", dir + "/proc-link/self/environ", dir + "/state-link/x",
		dir + "/../../etc/shadow", "/tmp/../proc/1/environ", dir + "/a/../state-link/x",
		"../../../../../../proc/self/environ", // relative to the home
	} {
		clean := filepath.Clean(p)
		if !filepath.IsAbs(p) {
			clean = "/proc/self/environ"
		}
		_, ourErr := ours.Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: clean}))
		_, envdErr := envd.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: p}))
		if raydtest.CodeOf(ourErr) != raydtest.CodeOf(envdErr) {
			t.Errorf("stat %s: envd %v, our API %v", p, envdErr, ourErr)
		}
		_, _, ourRead := raydtest.ReadFile(ctx, ours, clean)
		if ourRead == nil {
			t.Errorf("our API reads %s", p)
			continue
		}
		resp := envdDo(h, t, http.MethodGet, "/files", url.Values{"path": {p}}, nil, nil)
		body := readAll(t, resp)
		if want := rpcerr.HTTPStatus(raydtest.CodeOf(ourRead)); resp.StatusCode != want || resp.StatusCode < 400 {
			t.Errorf("GET /files %s: %d %s, our API's code %v (%d)", p, resp.StatusCode, body, raydtest.CodeOf(ourRead), want)
		}
	}
	// A write through a link to /etc is refused as on our API.
	_, ourErr := raydtest.WriteFiles(ctx, ours, raydtest.UpFile{Path: dir + "/etc-link/evil", Data: []byte("x")})
	resp := envdDo(h, t, http.MethodPost, "/files", url.Values{"path": {dir + "/etc-link/evil"}}, strings.NewReader("x"), http.Header{"Content-Type": {"application/octet-stream"}})
	body := readAll(t, resp)
	if want := rpcerr.HTTPStatus(raydtest.CodeOf(ourErr)); ourErr == nil || resp.StatusCode != want {
		t.Errorf("POST through a link: %d %s; our API %v", resp.StatusCode, body, ourErr)
	}
	if _, err := os.Stat("/etc/evil"); err == nil {
		t.Error("/etc/evil was written")
	}
}

func TestE2BWatchDir(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	if err := os.Mkdir(dir+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir+"/sub", 1000, 1000); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token})
	s, err := c.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: dir, Recursive: true, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() || s.Msg().GetStart() == nil {
		t.Fatalf("first message %v (%v)", s.Msg(), s.Err())
	}
	if err := os.WriteFile(dir+"/sub/h.txt", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for s.Receive() {
		fe := s.Msg().GetFilesystem()
		if fe == nil {
			continue
		}
		if fe.GetName() == "sub/h.txt" && fe.GetType() == filesystem.EventType_EVENT_TYPE_CREATE {
			if fe.GetEntry().GetName() != "h.txt" || fe.GetEntry().GetPath() != dir+"/sub/h.txt" {
				t.Fatalf("entry %v", fe.GetEntry())
			}
			break
		}
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	// A missing directory is not_found.
	ms, err := c.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: dir + "/missing"}))
	if err == nil {
		for ms.Receive() {
		}
		err = ms.Err()
	}
	if raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("missing dir: %v", err)
	}
}

// multipartBody builds the SDK's multi-file upload: one part named "file"
// per file with the full target path as its filename (written raw, since
// mime/multipart's CreateFormFile would escape it like a browser).
func multipartBody(t *testing.T, files map[string]string) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		hdr := textproto.MIMEHeader{}
		hdr.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, p))
		hdr.Set("Content-Type", "application/octet-stream")
		pw, err := w.CreatePart(hdr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = pw.Write([]byte(files[p]))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf, w.FormDataContentType()
}

func TestE2BFilesHTTP(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(func(p *runpayload.Payload) { p.Envs = map[string]string{"TEAM": "a"} })
	dir := raydtest.UserDir(t)

	// /health needs no token.
	resp := envdDo(h, t, http.MethodGet, "/health", nil, nil, http.Header{"X-No-Token": {"1"}, auth.Header: {"wrong"}})
	readAll(t, resp)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("/health: %d", resp.StatusCode)
	}

	// Several files in one multipart request, full paths from the raw
	// Content-Disposition filename, missing directories created.
	files := map[string]string{dir + "/up/one.txt": "1", dir + "/up/deeper/two.txt": "22", dir + "/three.txt": ""}
	body, ct := multipartBody(t, files)
	resp = envdDo(h, t, http.MethodPost, "/files", nil, body, http.Header{"Content-Type": {ct}})
	raw := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("multipart: %d %s", resp.StatusCode, raw)
	}
	var got []envdhttp.WrittenEntry
	if err := json.Unmarshal(raw, &got); err != nil || len(got) != 3 {
		t.Fatalf("answer %s: %v", raw, err)
	}
	for _, e := range got {
		if _, ok := files[e.Path]; !ok || e.Type != "file" || e.Name != filepath.Base(e.Path) {
			t.Fatalf("entry %+v", e)
		}
	}
	for p, data := range files {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != data {
			t.Fatalf("%s: %q %v", p, b, err)
		}
		st, _ := os.Stat(p)
		if st.Mode().Perm() != 0o644 || st.Sys().(*syscall.Stat_t).Uid != 1000 {
			t.Fatalf("%s mode %v owner %d: want 0644 and the default user's", p, st.Mode(), st.Sys().(*syscall.Stat_t).Uid)
		}
	}

	// Read back, plain and gzipped; an empty file has Content-Length 0.
	resp = envdDo(h, t, http.MethodGet, "/files", url.Values{"path": {dir + "/up/deeper/two.txt"}}, nil, nil)
	if b := readAll(t, resp); resp.StatusCode != 200 || string(b) != "22" || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("GET: %d %q %v", resp.StatusCode, b, resp.Header)
	}
	resp = envdDo(h, t, http.MethodGet, "/files", url.Values{"path": {dir + "/three.txt"}}, nil, nil)
	if b := readAll(t, resp); resp.StatusCode != 200 || len(b) != 0 || resp.Header.Get("Content-Length") != "0" {
		t.Fatalf("GET empty: %d %q %v", resp.StatusCode, b, resp.Header)
	}

	// An octet-stream upload with Content-Encoding: gzip and metadata.
	big := bytes.Repeat([]byte("rayito e2b "), 100000)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(big)
	_ = zw.Close()
	resp = envdDo(h, t, http.MethodPost, "/files", url.Values{"path": {"big.bin"}, "username": {""}}, &gz, http.Header{
		"Content-Type": {"application/octet-stream"}, "Content-Encoding": {"gzip"}, "X-Metadata-Owner": {"team-a"},
	})
	raw = readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("gzip upload: %d %s", resp.StatusCode, raw)
	}
	got = nil
	if err := json.Unmarshal(raw, &got); err != nil || len(got) != 1 || got[0].Metadata["owner"] != "team-a" {
		t.Fatalf("gzip upload answer %s: %v", raw, err)
	}
	home := filepath.Dir(got[0].Path)
	t.Cleanup(func() { os.Remove(got[0].Path) })
	resp = envdDo(h, t, http.MethodGet, "/files", url.Values{"path": {"big.bin"}}, nil, http.Header{"Accept-Encoding": {"gzip"}})
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("not gzipped: %v", resp.Header)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(zr)
	resp.Body.Close()
	if err != nil || !bytes.Equal(back, big) {
		t.Fatalf("gzip download: %d bytes, %v", len(back), err)
	}
	if home == "" || !filepath.IsAbs(got[0].Path) {
		t.Fatalf("relative path not resolved against HOME: %v", got[0].Path)
	}

	// 10 MiB as multipart (path in the query, as for a single write) and
	// as a chunked octet-stream body.
	tenMiB := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16)
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("file", dir+"/ten-multipart.bin")
	_, _ = fw.Write(tenMiB)
	_ = mw.Close()
	resp = envdDo(h, t, http.MethodPost, "/files", url.Values{"path": {dir + "/ten-multipart.bin"}}, &mp, http.Header{"Content-Type": {mw.FormDataContentType()}})
	if raw := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("10 MiB multipart: %d %s", resp.StatusCode, raw)
	}
	// A plain form field named "file" (no filename: the form E2B's
	// presigned upload links are posted with, FormData.append("file",
	// text)) is the file when the path query names the target, as on
	// envd; without a path it has no target.
	var field bytes.Buffer
	fmw := multipart.NewWriter(&field)
	_ = fmw.WriteField("file", "field content")
	_ = fmw.Close()
	resp = envdDo(h, t, http.MethodPost, "/files", url.Values{"path": {dir + "/field.txt"}}, bytes.NewReader(field.Bytes()), http.Header{"Content-Type": {fmw.FormDataContentType()}})
	if raw := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("a file sent as a form field: %d %s", resp.StatusCode, raw)
	}
	if b, err := os.ReadFile(dir + "/field.txt"); err != nil || string(b) != "field content" {
		t.Fatalf("field.txt: %q %v", b, err)
	}
	resp = envdDo(h, t, http.MethodPost, "/files", nil, bytes.NewReader(field.Bytes()), http.Header{"Content-Type": {fmw.FormDataContentType()}})
	if raw := readAll(t, resp); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a form field without a path: %d %s", resp.StatusCode, raw)
	}
	pr, pw := io.Pipe()
	go func() {
		for off := 0; off < len(tenMiB); off += 1 << 20 {
			_, _ = pw.Write(tenMiB[off : off+1<<20])
		}
		pw.Close()
	}()
	resp = envdDo(h, t, http.MethodPost, "/files", url.Values{"path": {dir + "/ten-stream.bin"}}, pr, http.Header{"Content-Type": {"application/octet-stream"}})
	if raw := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("10 MiB chunked: %d %s", resp.StatusCode, raw)
	}
	for _, p := range []string{dir + "/ten-multipart.bin", dir + "/ten-stream.bin"} {
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, tenMiB) {
			t.Fatalf("%s: %d bytes, %v", p, len(b), err)
		}
	}

	// A bad gzip body leaves nothing behind.
	resp = envdDo(h, t, http.MethodPost, "/files", url.Values{"path": {dir + "/bad.bin"}}, strings.NewReader("not gzip"), http.Header{"Content-Type": {"application/octet-stream"}, "Content-Encoding": {"gzip"}})
	readAll(t, resp)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad gzip: %d", resp.StatusCode)
	}
	if _, err := os.Stat(dir + "/bad.bin"); !os.IsNotExist(err) {
		t.Fatalf("bad gzip left a file: %v", err)
	}

	// A missing file: 404 with E2B's JSON body.
	resp = envdDo(h, t, http.MethodGet, "/files", url.Values{"path": {dir + "/nope"}}, nil, nil)
	raw = readAll(t, resp)
	var eb struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &eb); err != nil || resp.StatusCode != 404 || eb.Code != 404 || eb.Message != fmt.Sprintf("path '%s' does not exist", dir+"/nope") {
		t.Fatalf("missing: %d %s", resp.StatusCode, raw)
	}
	// A directory is a bad request.
	resp = envdDo(h, t, http.MethodGet, "/files", url.Values{"path": {dir}}, nil, nil)
	readAll(t, resp)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("directory: %d", resp.StatusCode)
	}

	// GET /envs: the sandbox's envs.
	resp = envdDo(h, t, http.MethodGet, "/envs", nil, nil, nil)
	raw = readAll(t, resp)
	var envs map[string]string
	if err := json.Unmarshal(raw, &envs); err != nil || envs["TEAM"] != "a" {
		t.Fatalf("/envs: %s %v", raw, err)
	}

	// GET /metrics: the sandbox's use now, in envd's names.
	resp = envdDo(h, t, http.MethodGet, "/metrics", nil, nil, nil)
	raw = readAll(t, resp)
	var m envdhttp.Metrics
	if err := json.Unmarshal(raw, &m); err != nil || resp.StatusCode != http.StatusOK || m.CPUCount == 0 || m.MemTotal == 0 || m.Timestamp == 0 || m.DiskTotal == 0 {
		t.Fatalf("/metrics: %d %s %v", resp.StatusCode, raw, err)
	}

	// POST /files/compose: the sources' concatenation, atomically; a
	// missing source leaves the destination as it was.
	compose := func(body string) (*http.Response, []byte) {
		resp := envdDo(h, t, http.MethodPost, "/files/compose", nil, strings.NewReader(body), http.Header{"Content-Type": {"application/json"}})
		return resp, readAll(t, resp)
	}
	dest := dir + "/joined.txt"
	resp, raw = compose(`{"destination":"` + dest + `","source_paths":["` + dir + `/up/one.txt","` + dir + `/up/deeper/two.txt"]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"path":"`+dest+`"`) {
		t.Fatalf("compose: %d %s", resp.StatusCode, raw)
	}
	if b, err := os.ReadFile(dest); err != nil || string(b) != "122" {
		t.Fatalf("composed %q %v", b, err)
	}
	resp, raw = compose(`{"destination":"` + dest + `","source_paths":["` + dir + `/up/one.txt","` + dir + `/nope"]}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("compose with a missing source: %d %s", resp.StatusCode, raw)
	}
	if b, _ := os.ReadFile(dest); string(b) != "122" {
		t.Fatalf("a failed compose changed the destination: %q", b)
	}
	for _, bad := range []string{`{"destination":"` + dest + `","source_paths":[]}`, `not json`, `{"destination":"","source_paths":["a"]}`,
		`{"destination":"` + dest + `","source_paths":["/etc/shadow"]}`, `{"destination":"/etc/evil","source_paths":["` + dir + `/up/one.txt"]}`,
		`{"destination":"` + dest + `","source_paths":["a"],"extra":1}`} {
		if resp, raw := compose(bad); resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("compose %s: %d %s, want a 4xx", bad, resp.StatusCode, raw)
		}
	}
	if b, _ := os.ReadFile(dest); string(b) != "122" {
		t.Fatalf("a refused compose changed the destination: %q", b)
	}

	// No token: unauthenticated on everything but /health.
	for _, p := range []string{"/files?path=" + url.QueryEscape(dir+"/three.txt"), "/envs", "/metrics"} {
		resp = envdDo(h, t, http.MethodGet, p, nil, nil, http.Header{"X-No-Token": {"1"}})
		readAll(t, resp)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d", p, resp.StatusCode)
		}
	}
}

// Before /run (no token installed) everything but /health is refused.
func TestE2BBeforeRun(t *testing.T) {
	h := daemontest.New(t)
	resp := envdDo(h, t, http.MethodGet, "/health", nil, nil, http.Header{"X-No-Token": {"1"}})
	readAll(t, resp)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("/health: %d", resp.StatusCode)
	}
	resp = envdDo(h, t, http.MethodGet, "/files", url.Values{"path": {"/etc/hostname"}}, nil, nil)
	readAll(t, resp)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/files before /run: %d", resp.StatusCode)
	}
	_, err := h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token}).Stat(context.Background(), connect.NewRequest(&filesystem.StatRequest{Path: "/"}))
	if raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("Stat before /run: %v", err)
	}
}

// The wire as the JS SDK reads it: Connect JSON, errors with their code
// in the JSON body.
func TestE2BConnectJSONWire(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	resp := envdDo(h, t, http.MethodPost, "/process.Process/SendSignal", nil,
		strings.NewReader(`{"process":{"pid":1073741824},"signal":"SIGNAL_SIGKILL"}`),
		http.Header{"Content-Type": {"application/json"}, "Connect-Protocol-Version": {"1"}})
	raw := readAll(t, resp)
	var ce struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &ce); err != nil || ce.Code != "not_found" || ce.Message != "process with pid 1073741824 not found" {
		t.Fatalf("SendSignal: %d %s", resp.StatusCode, raw)
	}
	resp = envdDo(h, t, http.MethodPost, "/process.Process/List", nil, strings.NewReader(`{}`),
		http.Header{"Content-Type": {"application/json"}, "Connect-Protocol-Version": {"1"}})
	raw = readAll(t, resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !json.Valid(raw) {
		t.Fatalf("List: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
}
