package files_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/auth"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

func randBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFilesWriteSeveralAndReadBack(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	ctx := context.Background()
	fs := h.Files()
	mode := uint32(0o600)
	files := []raydtest.UpFile{
		{Path: dir + "/a.txt", Data: []byte("hello")},
		{Path: dir + "/new/parents/big.bin", Data: randBytes(t, 5<<20), MD: map[string]string{"kind": "blob", "owner": "test"}},
		{Path: dir + "/empty", Data: nil, Mode: &mode},
	}
	resp, err := raydtest.WriteFiles(ctx, fs, files...)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetEntries()) != 3 {
		t.Fatalf("entries %v", resp.GetEntries())
	}
	for i, f := range files {
		e := resp.GetEntries()[i]
		if e.GetPath() != f.Path || e.GetSize() != int64(len(f.Data)) || e.GetType() != raydv1.FileType_FILE_TYPE_FILE {
			t.Fatalf("entry %d: %v", i, e)
		}
		got, data, err := raydtest.ReadFile(ctx, fs, f.Path)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if sha256.Sum256(data) != sha256.Sum256(f.Data) {
			t.Fatalf("file %d: content differs (%d bytes, want %d)", i, len(data), len(f.Data))
		}
		if got.GetName() != filepath.Base(f.Path) || got.GetModifiedTimeUnixMs() == 0 {
			t.Fatalf("read entry %d: %v", i, got)
		}
	}
	if e := resp.GetEntries()[2]; e.GetMode() != 0o100600 || e.GetPermissions() != "-rw-------" {
		t.Fatalf("mode %o %q", e.GetMode(), e.GetPermissions())
	}
	// Metadata round trip, through Write, Read and Stat.
	if md := resp.GetEntries()[1].GetMetadata(); md["kind"] != "blob" || md["owner"] != "test" || len(md) != 2 {
		t.Fatalf("write metadata %v", md)
	}
	st, err := fs.Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: files[1].Path}))
	if err != nil {
		t.Fatal(err)
	}
	if md := st.Msg.GetEntry().GetMetadata(); md["kind"] != "blob" || len(md) != 2 {
		t.Fatalf("stat metadata %v", md)
	}
	// Ownership of files and created parents is the user's.
	for _, p := range []string{files[0].Path, files[1].Path, dir + "/new", dir + "/new/parents"} {
		st, err := fs.Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: p}))
		if err != nil {
			t.Fatal(err)
		}
		e := st.Msg.GetEntry()
		if e.GetOwner() != uidName() || e.GetGroup() != gidName() {
			t.Fatalf("%s owned by %s:%s", filepath.Base(p), e.GetOwner(), e.GetGroup())
		}
	}
	// Replacing a file keeps nothing of the old content.
	if _, err := raydtest.WriteFiles(ctx, fs, raydtest.UpFile{Path: files[0].Path, Data: []byte("bye")}); err != nil {
		t.Fatal(err)
	}
	if _, data, err := raydtest.ReadFile(ctx, fs, files[0].Path); err != nil || string(data) != "bye" {
		t.Fatalf("after replace: %q %v", data, err)
	}
}

// uidName is how safefs names uid 1000: the account name, or the number.
func uidName() string {
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Split(l, ":")
			if len(f) > 3 && f[2] == "1000" {
				return f[0]
			}
		}
	}
	return "1000"
}

func gidName() string {
	if b, err := os.ReadFile("/etc/group"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Split(l, ":")
			if len(f) > 2 && f[2] == "1000" {
				return f[0]
			}
		}
	}
	return "1000"
}

func TestFilesRefusesSecretsAndEscapes(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	ctx := context.Background()
	fs := h.Files()
	link := dir + "/shadow-link"
	if err := os.Symlink("/etc/shadow", link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", dir+"/etc-link"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/etc/shadow", "/proc/1/environ", link, dir + "/etc-link/shadow", "/proc/self/root/etc/shadow"} {
		_, data, err := raydtest.ReadFile(ctx, fs, p)
		if c := raydtest.CodeOf(err); c != connect.CodePermissionDenied && c != connect.CodeFailedPrecondition {
			t.Errorf("read %s: %v", p, err)
		}
		if len(data) != 0 {
			t.Errorf("read %s returned content", p)
		}
		if strings.Contains(err.Error(), p) {
			t.Errorf("error names the path: %v", err)
		}
	}
	for _, p := range []string{dir + "/../etc/passwd", "../x", dir + "/a/../b"} {
		if _, err := fs.Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: p})); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("stat %s: %v", p, err)
		}
	}
	if _, err := raydtest.WriteFiles(ctx, fs, raydtest.UpFile{Path: "/etc/evil", Data: []byte("x")}); raydtest.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("write /etc/evil: %v", err)
	}
	if _, err := os.Stat("/etc/evil"); err == nil {
		t.Error("/etc/evil was written")
	}
	// The link is still a link and /etc/shadow is untouched by a write
	// through it.
	if _, err := raydtest.WriteFiles(ctx, fs, raydtest.UpFile{Path: dir + "/etc-link/x", Data: []byte("x")}); raydtest.CodeOf(err) != connect.CodeFailedPrecondition && raydtest.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("write through link: %v", err)
	}
	// A file the user cannot read is refused by the kernel.
	secret := dir + "/secret"
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := raydtest.ReadFile(ctx, fs, secret); raydtest.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("root-owned 0600: %v", err)
	}
	if _, _, err := raydtest.ReadFile(ctx, fs, dir+"/missing"); raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("missing: %v", err)
	}
}

func TestFilesDirectoryOperations(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	ctx := context.Background()
	fs := h.Files()
	mk := func(p string) error {
		_, err := fs.MakeDir(ctx, connect.NewRequest(&raydv1.MakeDirRequest{Path: p}))
		return err
	}
	if err := mk(dir + "/d/e"); err != nil {
		t.Fatal(err)
	}
	if err := mk(dir + "/d/e"); raydtest.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("second MakeDir: %v", err)
	}
	if _, err := raydtest.WriteFiles(ctx, fs, raydtest.UpFile{Path: dir + "/d/f", Data: []byte("f")}, raydtest.UpFile{Path: dir + "/d/e/g", Data: []byte("g")}); err != nil {
		t.Fatal(err)
	}
	if err := mk(dir + "/d/f"); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("MakeDir over a file: %v", err)
	}
	if err := mk(dir + "/d/f/sub"); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("MakeDir under a file: %v", err)
	}
	names := func(depth uint32) []string {
		resp, err := fs.ListDir(ctx, connect.NewRequest(&raydv1.ListDirRequest{Path: dir + "/d", Depth: depth}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range resp.Msg.GetEntries() {
			out = append(out, strings.TrimPrefix(e.GetPath(), dir+"/d/"))
		}
		return out
	}
	if got := strings.Join(names(0), ","); got != "e,f" {
		t.Fatalf("depth 0: %s", got)
	}
	got := names(2)
	if len(got) != 3 || !strings.Contains(strings.Join(got, ","), "e/g") {
		t.Fatalf("depth 2: %v", got)
	}
	mv, err := fs.Move(ctx, connect.NewRequest(&raydv1.MoveRequest{Source: dir + "/d/f", Destination: dir + "/d/e/f2"}))
	if err != nil {
		t.Fatal(err)
	}
	if mv.Msg.GetEntry().GetPath() != dir+"/d/e/f2" {
		t.Fatalf("move entry %v", mv.Msg.GetEntry())
	}
	if _, err := fs.Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: dir + "/d/f"})); raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("source after move: %v", err)
	}
	if _, err := fs.Remove(ctx, connect.NewRequest(&raydv1.RemoveRequest{Path: dir + "/d"})); err == nil {
		t.Fatal("non-recursive Remove of a non-empty directory succeeded")
	}
	if _, err := fs.Remove(ctx, connect.NewRequest(&raydv1.RemoveRequest{Path: dir + "/d", Recursive: true})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir + "/d"); !os.IsNotExist(err) {
		t.Fatalf("after Remove: %v", err)
	}
}

func TestFilesWriteRules(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	ctx := context.Background()
	fs := h.Files()
	target := dir + "/keep"
	if _, err := raydtest.WriteFiles(ctx, fs, raydtest.UpFile{Path: target, Data: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	// A chunk over 1 MiB.
	s := fs.Write(ctx)
	p := target
	_ = s.Send(&raydv1.WriteRequest{Path: &p, Chunk: make([]byte, 1<<20+1)})
	if _, err := s.CloseAndReceive(); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("big chunk: %v", err)
	}
	// No path on the first message.
	s = fs.Write(ctx)
	_ = s.Send(&raydv1.WriteRequest{Chunk: []byte("x")})
	if _, err := s.CloseAndReceive(); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("no path: %v", err)
	}
	// Metadata on a later message.
	s = fs.Write(ctx)
	_ = s.Send(&raydv1.WriteRequest{Path: &p, Chunk: []byte("x")})
	_ = s.Send(&raydv1.WriteRequest{Chunk: []byte("y"), Metadata: map[string]string{"a": "b"}})
	if _, err := s.CloseAndReceive(); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("late metadata: %v", err)
	}
	// A stream cancelled midway leaves the old file intact.
	cctx, cancel := context.WithCancel(ctx)
	s = fs.Write(cctx)
	_ = s.Send(&raydv1.WriteRequest{Path: &p, Chunk: make([]byte, 1<<20)})
	for range 3 {
		_ = s.Send(&raydv1.WriteRequest{Chunk: make([]byte, 1<<20)})
	}
	time.Sleep(100 * time.Millisecond)
	// Cancel without CloseAndReceive: closing the request body would be
	// a clean end of the stream, i.e. a commit.
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := fs.ListDir(ctx, connect.NewRequest(&raydv1.ListDirRequest{Path: dir}))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Msg.GetEntries()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("temporary files left: %d entries", len(resp.Msg.GetEntries()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, data, err := raydtest.ReadFile(ctx, fs, target); err != nil || string(data) != "old" {
		t.Fatalf("after cancel: %q %v", data, err)
	}
	// Invalid mode and metadata.
	bad := uint32(0o4755)
	if _, err := raydtest.WriteFiles(ctx, fs, raydtest.UpFile{Path: target, Data: []byte("x"), Mode: &bad}); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("setuid mode: %v", err)
	}
	if _, err := raydtest.WriteFiles(ctx, fs, raydtest.UpFile{Path: target, Data: []byte("x"), MD: map[string]string{"BAD KEY": "v"}}); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("bad metadata: %v", err)
	}
	if _, data, err := raydtest.ReadFile(ctx, fs, target); err != nil || string(data) != "old" {
		t.Fatalf("after refused writes: %q %v", data, err)
	}
}

func TestFilesHTTPEndpoints(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	do := func(method, path string, q url.Values, body io.Reader, hdr map[string]string) *http.Response {
		t.Helper()
		if q == nil {
			q = url.Values{}
		}
		q.Set("path", path)
		req, err := http.NewRequest(method, h.APIURL+"/files?"+q.Encode(), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(auth.Header, h.Token)
		for k, v := range hdr {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	errCode := func(resp *http.Response) string {
		var e struct{ Code, Message string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return e.Code
	}
	data := randBytes(t, 20<<20)
	target := dir + "/sub/big.bin"
	resp := do(http.MethodPut, target, url.Values{"mode": {"640"}}, bytes.NewReader(data), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT status %d", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	var entry raydv1.EntryInfo
	if err := protojson.Unmarshal(body, &entry); err != nil {
		t.Fatal(err)
	}
	if entry.GetSize() != int64(len(data)) || entry.GetPath() != target || entry.GetPermissions() != "-rw-r-----" || entry.GetOwner() != uidName() {
		t.Fatalf("PUT entry %v", &entry)
	}
	resp = do(http.MethodGet, target, nil, nil, nil)
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(data)) || resp.Header.Get("Content-Type") != "application/octet-stream" || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("GET %d len %d headers %v", resp.StatusCode, resp.ContentLength, resp.Header)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("GET body differs (%d bytes): %v", len(got), err)
	}
	resp = do(http.MethodGet, target, nil, nil, map[string]string{"Accept-Encoding": "gzip"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip GET %d %v", resp.StatusCode, resp.Header)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(zr)
	if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("gzip GET body differs: %v", err)
	}
	// Metadata rides X-Metadata-<key> headers, as on envd's upload: one
	// way to write a file with metadata. An invalid key is refused and
	// nothing is written.
	resp = do(http.MethodPut, dir+"/md.txt", nil, strings.NewReader("with metadata"), map[string]string{"X-Metadata-Owner": "alice", "x-metadata-stage": "raw v2"})
	body, _ = io.ReadAll(resp.Body)
	var mdEntry raydv1.EntryInfo
	if resp.StatusCode != http.StatusOK || protojson.Unmarshal(body, &mdEntry) != nil ||
		len(mdEntry.GetMetadata()) != 2 || mdEntry.GetMetadata()["owner"] != "alice" || mdEntry.GetMetadata()["stage"] != "raw v2" {
		t.Fatalf("PUT with metadata: %d %s", resp.StatusCode, body)
	}
	resp = do(http.MethodPut, dir+"/md-bad.txt", nil, strings.NewReader("x"), map[string]string{"X-Metadata-k!": "v"})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("PUT with an invalid metadata key: %d", resp.StatusCode)
	}
	if _, err := os.Stat(dir + "/md-bad.txt"); !os.IsNotExist(err) {
		t.Fatalf("a refused PUT wrote its file: %v", err)
	}
	// A gzip-encoded PUT.
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte(strings.Repeat("abc", 100000)))
	zw.Close()
	resp = do(http.MethodPut, dir+"/z.txt", nil, &zb, map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("gzip PUT %d", resp.StatusCode)
	}
	if b, err := os.ReadFile(dir + "/z.txt"); err != nil || string(b) != strings.Repeat("abc", 100000) {
		t.Fatalf("gzip PUT content: %v", err)
	}
	resp = do(http.MethodPut, dir+"/bad.txt", nil, strings.NewReader("not gzip"), map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad gzip PUT %d", resp.StatusCode)
	}
	// Errors.
	for _, tc := range []struct {
		method, path string
		hdr          map[string]string
		status       int
		code         string
	}{
		{http.MethodGet, target, map[string]string{auth.Header: ""}, 401, "unauthenticated"},
		{http.MethodGet, target, map[string]string{auth.Header: "wrong"}, 401, "unauthenticated"},
		{http.MethodPut, target, map[string]string{auth.Header: ""}, 401, "unauthenticated"},
		{http.MethodGet, "/proc/self/environ", nil, 403, "permission_denied"}, // /etc is read-only, not denied
		{http.MethodPut, "/etc/passwd", nil, 403, "permission_denied"},
		{http.MethodGet, "/etc/shadow", nil, 403, "permission_denied"},
		{http.MethodGet, dir + "/missing", nil, 404, "not_found"},
		{http.MethodGet, dir + "/../etc/passwd", nil, 400, "invalid_argument"},
		{http.MethodDelete, target, nil, 405, "unimplemented"},
	} {
		var body io.Reader
		if tc.method == http.MethodPut {
			body = strings.NewReader("x")
		}
		resp := do(tc.method, tc.path, nil, body, tc.hdr)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			continue
		}
		if c := errCode(resp); c != tc.code {
			t.Errorf("%s %s: code %q, want %q", tc.method, tc.path, c, tc.code)
		}
	}
	if b, _ := os.ReadFile("/etc/passwd"); bytes.Equal(b, []byte("x")) {
		t.Fatal("/etc/passwd overwritten")
	}
}

func TestFilesAuthOnEveryRPC(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(nil)
	ctx := context.Background()
	c := raydv1connect.NewFilesystemServiceClient(h.Client, h.APIURL)
	// A path nothing else creates (a fixed /tmp name could exist already).
	p := filepath.Join(t.TempDir(), "x")
	calls := map[string]func() error{
		"Read": func() error {
			_, _, err := raydtest.ReadFile(ctx, c, p)
			return err
		},
		"Write": func() error {
			_, err := raydtest.WriteFiles(ctx, c, raydtest.UpFile{Path: p, Data: []byte("x")})
			return err
		},
		"Stat": func() error {
			_, err := c.Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: p}))
			return err
		},
		"ListDir": func() error {
			_, err := c.ListDir(ctx, connect.NewRequest(&raydv1.ListDirRequest{Path: p}))
			return err
		},
		"MakeDir": func() error {
			_, err := c.MakeDir(ctx, connect.NewRequest(&raydv1.MakeDirRequest{Path: p}))
			return err
		},
		"Move": func() error {
			_, err := c.Move(ctx, connect.NewRequest(&raydv1.MoveRequest{Source: p, Destination: p + "2"}))
			return err
		},
		"Remove": func() error {
			_, err := c.Remove(ctx, connect.NewRequest(&raydv1.RemoveRequest{Path: p}))
			return err
		},
		"WatchDir": func() error {
			s, err := c.WatchDir(ctx, connect.NewRequest(&raydv1.WatchDirRequest{Path: p}))
			if err != nil {
				return err
			}
			defer s.Close()
			for s.Receive() {
			}
			return s.Err()
		},
		"GetTransfer": func() error {
			_, err := c.GetTransfer(ctx, connect.NewRequest(&raydv1.GetTransferRequest{TransferId: "x"}))
			return err
		},
	}
	for name, call := range calls {
		if got := raydtest.CodeOf(call()); got != connect.CodeUnauthenticated {
			t.Errorf("%s without token: %v", name, got)
		}
	}
	if _, err := os.Lstat(p); err == nil {
		t.Fatal("an unauthenticated call touched the file system")
	}
	// With the token: a checkpoint of a sandbox created without
	// persistence needs a location.
	s, err := h.Files().Checkpoint(ctx, connect.NewRequest(&raydv1.CheckpointRequest{}))
	if err == nil {
		for s.Receive() {
		}
		err = s.Err()
		s.Close()
	}
	if raydtest.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "location") {
		t.Fatalf("Checkpoint: %v", err)
	}
	if got := h.Health().GetFeatures().GetServices(); !strings.Contains(strings.Join(got, ","), "files") {
		t.Fatalf("features.services %v", got)
	}
}
