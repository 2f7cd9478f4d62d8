package files_test

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/auth"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// Reads follow symbolic links as the user's own cat would (an
// /etc/os-release-like link to ../usr/lib/os-release, links the user made
// in HOME), through the Read RPC and GET /files alike; links into /proc or
// rayd's state dir are refused by policy; Stat and ListDir report links as
// links; writes through a link are refused.
func TestFilesFollowSymlinksOnRead(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	ctx := context.Background()
	c := h.Files()
	p := func(rel string) string { return filepath.Join(dir, rel) }
	for _, d := range []string{"etc", "usr/lib", "releases/v2/sub"} {
		if err := os.MkdirAll(p(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"usr/lib/os-release": "ID=rayito\n", "data.csv": "a,b\n", "releases/v2/app.txt": "v2"}
	for rel, data := range files {
		if err := os.WriteFile(p(rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// rayd's state dir, opened up so that only the policy keeps it out.
	if err := os.Chmod(h.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.StateDir, "probe"), []byte("STATE"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"etc/os-release": "../usr/lib/os-release",
		"latest.csv":     "data.csv",
		"current":        "releases/v2",
		"env":            "/proc/self/environ",
		"state":          filepath.Join(h.StateDir, "probe"),
		"loop":           "loop",
	} {
		if err := os.Symlink(target, p(link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := filepath.WalkDir(dir, func(q string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(q, 1000, 1000)
	}); err != nil {
		t.Fatal(err)
	}

	good := map[string]string{
		p("etc/os-release"):      "ID=rayito\n",
		p("latest.csv"):          "a,b\n",
		p("current/app.txt"):     "v2",
		"/etc/passwd":            "",
		"/usr/lib/os-release":    "",
		"/etc/os-release":        "",
		p("releases/v2/app.txt"): "v2",
	}
	for q := range good {
		if good[q] != "" {
			continue
		}
		b, err := os.ReadFile(q)
		if err != nil {
			delete(good, q)
			continue
		}
		good[q] = string(b)
	}
	get := func(q string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, h.APIURL+"/files?"+url.Values{"path": {q}}.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(auth.Header, h.Token)
		resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for q, want := range good {
		e, data, err := raydtest.ReadFile(ctx, c, q)
		if err != nil || string(data) != want {
			t.Errorf("Read %s = %q, %v", q, data, err)
			continue
		}
		if e.GetType() != raydv1.FileType_FILE_TYPE_FILE || e.GetPath() != q || e.GetSize() != int64(len(want)) {
			t.Errorf("Read %s entry %v", q, e)
		}
		resp := get(q)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != want {
			t.Errorf("GET %s = %d %q", q, resp.StatusCode, body)
		}
	}
	// Refusals: policy for /proc and the state dir, a clear symlink error
	// for a loop.
	for q, want := range map[string]struct {
		code   connect.Code
		reason raydv1.ErrorReason
		status int
	}{
		p("env"):   {connect.CodePermissionDenied, raydv1.ErrorReason_ERROR_REASON_POLICY_DENIED, http.StatusForbidden},
		p("state"): {connect.CodePermissionDenied, raydv1.ErrorReason_ERROR_REASON_POLICY_DENIED, http.StatusForbidden},
		p("loop"):  {connect.CodeFailedPrecondition, raydv1.ErrorReason_ERROR_REASON_SYMLINK, http.StatusBadRequest},
	} {
		_, data, err := raydtest.ReadFile(ctx, c, q)
		if raydtest.CodeOf(err) != want.code || raydtest.ReasonOf(err) != want.reason || len(data) != 0 {
			t.Errorf("Read %s: %v (%v), %d bytes; want %v %v", q, err, raydtest.ReasonOf(err), len(data), want.code, want.reason)
		}
		resp := get(q)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want.status {
			t.Errorf("GET %s = %d %s, want %d", q, resp.StatusCode, body, want.status)
		}
	}
	// Stat: the link itself, links above it followed.
	st := func(q string) *raydv1.EntryInfo {
		t.Helper()
		resp, err := c.Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: q}))
		if err != nil {
			t.Errorf("Stat %s: %v", q, err)
			return nil
		}
		return resp.Msg.GetEntry()
	}
	if e := st(p("latest.csv")); e.GetType() != raydv1.FileType_FILE_TYPE_SYMLINK || e.GetSymlinkTarget() != "data.csv" {
		t.Errorf("Stat latest.csv = %v", e)
	}
	if e := st(p("etc/os-release")); e.GetType() != raydv1.FileType_FILE_TYPE_SYMLINK || e.GetSymlinkTarget() != "../usr/lib/os-release" {
		t.Errorf("Stat etc/os-release = %v", e)
	}
	if e := st(p("current/app.txt")); e.GetType() != raydv1.FileType_FILE_TYPE_FILE || e.GetPath() != p("current/app.txt") {
		t.Errorf("Stat current/app.txt = %v", e)
	}
	// ListDir of a link to a directory lists the directory.
	ls, err := c.ListDir(ctx, connect.NewRequest(&raydv1.ListDirRequest{Path: p("current")}))
	if err != nil || len(ls.Msg.GetEntries()) != 2 || ls.Msg.GetEntries()[0].GetPath() != p("current/app.txt") {
		t.Errorf("ListDir current = %v, %v", ls, err)
	}
	// WatchDir stays strict: a link to watch, or above it, is refused
	// before the stream starts.
	for q, want := range map[string]connect.Code{p("current"): connect.CodeInvalidArgument, p("current/sub"): connect.CodeFailedPrecondition} {
		s, err := c.WatchDir(ctx, connect.NewRequest(&raydv1.WatchDirRequest{Path: q}))
		if err == nil {
			if s.Receive() {
				t.Errorf("WatchDir %s: got message %v", q, s.Msg())
			}
			err = s.Err()
			s.Close()
		}
		if raydtest.CodeOf(err) != want {
			t.Errorf("WatchDir %s: %v, want %v", q, err, want)
		}
	}
	// Writes stay strict: no link above the last component.
	if _, err := raydtest.WriteFiles(ctx, c, raydtest.UpFile{Path: p("current/new.txt"), Data: []byte("x")}); raydtest.CodeOf(err) != connect.CodeFailedPrecondition || raydtest.ReasonOf(err) != raydv1.ErrorReason_ERROR_REASON_SYMLINK {
		t.Errorf("write through a directory link: %v", err)
	}
	if _, err := os.Lstat(p("releases/v2/new.txt")); err == nil {
		t.Error("a write went through the link")
	}
	if b, err := os.ReadFile(filepath.Join(h.StateDir, "probe")); err != nil || string(b) != "STATE" {
		t.Errorf("state probe: %q %v", b, err)
	}
}
