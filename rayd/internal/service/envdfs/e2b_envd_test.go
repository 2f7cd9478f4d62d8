package envdfs_test

// E2B envd's file behaviour as E2B's JS SDK suite expects it (issue 27),
// on a real rayd: entries, metadata, paths, missing parents, Remove and
// watch events, each as envd 0.6.13 answers.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// chownUser gives paths (not following links) to uid 1000.
func chownUser(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.Lchown(p, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
}

// Stat and ListDir entries: mode is the permission bits only, permissions
// Go's rendering, and a link is described by where it leads.
func TestE2BEntriesAsEnvd(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	ctx := context.Background()
	mustWriteFile(t, dir+"/f.txt", "test", 0o644)
	mustWriteFile(t, dir+"/suid", "x", 0o755)
	if err := os.Mkdir(dir+"/d", 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"lf": "f.txt", "ld": "d", "lbroken": "nothere"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	chownUser(t, dir+"/f.txt", dir+"/suid", dir+"/d", dir+"/lf", dir+"/ld", dir+"/lbroken")
	if err := unix.Chmod(dir+"/suid", 0o4755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(dir+"/f.txt", "user.e2b.author", []byte("mish"), 0); err != nil {
		t.Fatal(err)
	}
	c := h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token})
	type want struct {
		typ    filesystem.FileType
		mode   uint32
		perm   string
		target string
		author string
	}
	wants := map[string]want{
		"f.txt":   {filesystem.FileType_FILE_TYPE_FILE, 0o644, "-rw-r--r--", "", "mish"},
		"suid":    {filesystem.FileType_FILE_TYPE_FILE, 0o755, "urwxr-xr-x", "", ""},
		"d":       {filesystem.FileType_FILE_TYPE_DIRECTORY, 0o755, "drwxr-xr-x", "", ""},
		"lf":      {filesystem.FileType_FILE_TYPE_FILE, 0o644, "Lrwxrwxrwx", dir + "/f.txt", "mish"},
		"ld":      {filesystem.FileType_FILE_TYPE_DIRECTORY, 0o755, "Lrwxrwxrwx", dir + "/d", ""},
		"lbroken": {filesystem.FileType_FILE_TYPE_UNSPECIFIED, 0, "Lrwxrwxrwx", dir + "/lbroken", ""},
	}
	check := func(how string, e *filesystem.EntryInfo) {
		t.Helper()
		w := wants[e.GetName()]
		if e.GetType() != w.typ || e.GetMode() != w.mode || e.GetPermissions() != w.perm || e.GetSymlinkTarget() != w.target || e.GetMetadata()["author"] != w.author {
			t.Errorf("%s %s: type %v mode %o perm %s target %q metadata %v; want %+v", how, e.GetName(), e.GetType(), e.GetMode(), e.GetPermissions(), e.GetSymlinkTarget(), e.GetMetadata(), w)
		}
	}
	for name := range wants {
		st, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: dir + "/" + name}))
		if err != nil {
			t.Fatalf("Stat %s: %v", name, err)
		}
		check("Stat", st.Msg.GetEntry())
	}
	ls, err := c.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: dir, Depth: 2}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ls.Msg.GetEntries()); n != len(wants) {
		t.Errorf("ListDir depth 2: %d entries (a link must not be descended into)", n)
	}
	for _, e := range ls.Msg.GetEntries() {
		check("ListDir", e)
	}
	// Our own API keeps st_mode and describes the link itself.
	st, err := h.Files().Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: dir + "/lf"}))
	if err != nil || st.Msg.GetEntry().GetType() != raydv1.FileType_FILE_TYPE_SYMLINK || st.Msg.GetEntry().GetSymlinkTarget() != "f.txt" || st.Msg.GetEntry().GetMode()&unix.S_IFMT != unix.S_IFLNK {
		t.Errorf("our API's Stat of a link: %v, %v", st.Msg.GetEntry(), err)
	}
}

func mustWriteFile(t *testing.T, p, data string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
}

func xattr(p, name string) string {
	b := make([]byte, 256)
	n, err := unix.Lgetxattr(p, name, b)
	if err != nil {
		return ""
	}
	return string(b[:n])
}

// Metadata: the E2B surface writes user.e2b.*, our own API user.rayito.*,
// and both read both.
func TestE2BMetadataXattrs(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	ctx := context.Background()
	resp := envdDo(h, t, http.MethodPost, "/files", url.Values{"path": {dir + "/e2b.txt"}}, strings.NewReader("x"),
		http.Header{"Content-Type": {"application/octet-stream"}, "X-Metadata-Author": {"mish"}})
	if b := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("POST /files: %d %s", resp.StatusCode, b)
	}
	if got := xattr(dir+"/e2b.txt", "user.e2b.author"); got != "mish" {
		t.Errorf("user.e2b.author = %q", got)
	}
	if got := xattr(dir+"/e2b.txt", "user.rayito.author"); got != "" {
		t.Errorf("the E2B surface wrote user.rayito.author = %q", got)
	}
	if _, err := raydtest.WriteFiles(ctx, h.Files(), raydtest.UpFile{Path: dir + "/ours.txt", Data: []byte("x"), MD: map[string]string{"team": "a"}}); err != nil {
		t.Fatal(err)
	}
	if got := xattr(dir+"/ours.txt", "user.rayito.team"); got != "a" {
		t.Errorf("our API wrote user.rayito.team = %q", got)
	}
	envd := h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token})
	for p, want := range map[string][2]string{"e2b.txt": {"author", "mish"}, "ours.txt": {"team", "a"}} {
		st, err := envd.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: dir + "/" + p}))
		if err != nil || st.Msg.GetEntry().GetMetadata()[want[0]] != want[1] {
			t.Errorf("E2B Stat %s: %v, %v", p, st.Msg.GetEntry().GetMetadata(), err)
		}
		ours, err := h.Files().Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: dir + "/" + p}))
		if err != nil || ours.Msg.GetEntry().GetMetadata()[want[0]] != want[1] {
			t.Errorf("our Stat %s: %v, %v", p, ours.Msg.GetEntry().GetMetadata(), err)
		}
	}
}

// Remove of a missing path succeeds on the E2B surface (envd's
// os.RemoveAll); our own API keeps not_found.
func TestE2BRemoveMissing(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	ctx := context.Background()
	c := h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token})
	for _, p := range []string{dir + "/missing", dir + "/no/such/parent", "non_existing_file.txt"} {
		if _, err := c.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: p})); err != nil {
			t.Errorf("Remove %s: %v", p, err)
		}
	}
	if _, err := h.Files().Remove(ctx, connect.NewRequest(&raydv1.RemoveRequest{Path: dir + "/missing"})); raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("our API's Remove of a missing path: %v", err)
	}
	// Refusals stay refusals.
	if _, err := c.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/proc/1"})); raydtest.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("Remove /proc/1: %v", err)
	}
}

// Paths as envd resolves them: "~", "" (the default workdir), relative to
// the home, ".." cleaned. (Nothing is written in the user's home: rayd
// runs on the test machine.)
func TestE2BPathsAsEnvd(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	dir := raydtest.UserDir(t)
	h.Run(func(p *runpayload.Payload) { p.Workdir = dir })
	ctx := context.Background()
	hs, err := h.Files().Stat(ctx, connect.NewRequest(&raydv1.StatRequest{Path: "."}))
	if err != nil {
		t.Fatal(err)
	}
	home := hs.Msg.GetEntry().GetPath()
	up := strings.Repeat("../", strings.Count(home, "/")) // from home to /
	c := h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token})
	mk, err := c.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: up + dir[1:] + "/made"}))
	if err != nil || mk.Msg.GetEntry().GetPath() != dir+"/made" {
		t.Fatalf("MakeDir relative to the home: %v, %v", mk, err)
	}
	for p, want := range map[string]string{
		"~":                           home,
		"~/":                          home,
		"":                            dir,
		"~/" + up + dir[1:] + "/made": dir + "/made",
		dir + "/x/../made/":           dir + "/made",
	} {
		st, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: p}))
		if err != nil || st.Msg.GetEntry().GetPath() != want {
			t.Errorf("Stat %q: %v; want %s", p, err, want)
			if err == nil {
				t.Errorf("got %s", st.Msg.GetEntry().GetPath())
			}
		}
	}
	// A missing path is named as envd names it: resolved.
	_, err = c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "~/nope-e2b"}))
	if raydtest.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "path '"+home+"/nope-e2b' does not exist") {
		t.Errorf("Stat of a missing path: %v", err)
	}
	resp := envdDo(h, t, http.MethodGet, "/files", url.Values{"path": {"nope-e2b"}}, nil, nil)
	if b := readAll(t, resp); resp.StatusCode != 404 || !strings.Contains(string(b), "path '"+home+"/nope-e2b' does not exist") {
		t.Errorf("GET /files of a missing path: %d %s", resp.StatusCode, b)
	}
	if _, err := c.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "~root/x"})); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("Stat ~root/x: %v", err)
	}
	resp = envdDo(h, t, http.MethodPost, "/files", url.Values{"path": {dir + "/made/../made/f"}}, strings.NewReader("x"), http.Header{"Content-Type": {"application/octet-stream"}})
	if b := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(string(b), `"path":"`+dir+`/made/f"`) {
		t.Errorf("POST /files with ..: %d %s", resp.StatusCode, b)
	}
	resp = envdDo(h, t, http.MethodGet, "/files", url.Values{"path": {"~/" + up + dir[1:] + "/made/f"}}, nil, nil)
	if b := readAll(t, resp); resp.StatusCode != 200 || string(b) != "x" {
		t.Errorf("GET /files ~/...: %d %s", resp.StatusCode, b)
	}
}

// rootOwnedDir makes a directory the sandbox user may search but not
// write, as / and /var are in a sandbox.
func rootOwnedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "rayd-rootdir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Missing parents are created for the user as envd creates them (write
// `/0/x` as user): uploads, MakeDir and Move's destination; our own API
// keeps the user's own permissions.
func TestE2BParentsAsEnvd(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	root := rootOwnedDir(t)
	ctx := context.Background()
	body, ct := multipartBody(t, map[string]string{root + "/0/multi0.txt": "zero", root + "/2/multi2.txt": "two"})
	resp := envdDo(h, t, http.MethodPost, "/files", nil, body, http.Header{"Content-Type": {ct}})
	b := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("multi-file upload under a root directory: %d %s", resp.StatusCode, b)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil || len(out) != 2 || out[0]["path"] != root+"/0/multi0.txt" {
		t.Fatalf("answer %s (%v)", b, err)
	}
	c := h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token})
	if _, err := c.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: root + "/mk/deep"})); err != nil {
		t.Fatalf("MakeDir: %v", err)
	}
	if _, err := c.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: root + "/0/multi0.txt", Destination: root + "/mv/to/x"})); err != nil {
		t.Fatalf("Move: %v", err)
	}
	for _, p := range []string{root + "/0", root + "/2", root + "/2/multi2.txt", root + "/mk", root + "/mk/deep", root + "/mv", root + "/mv/to", root + "/mv/to/x"} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || st.Uid != 1000 || st.Gid != 1000 {
			t.Errorf("%s: uid %d gid %d, %v", p, st.Uid, st.Gid, err)
		}
	}
	// A file directly in the root directory stays refused, and so does
	// our own API's write under it.
	resp = envdDo(h, t, http.MethodPost, "/files", url.Values{"path": {root + "/top.txt"}}, strings.NewReader("x"), http.Header{"Content-Type": {"application/octet-stream"}})
	if b := readAll(t, resp); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a file in the root directory: %d %s", resp.StatusCode, b)
	}
	if _, err := raydtest.WriteFiles(ctx, h.Files(), raydtest.UpFile{Path: root + "/ours/x", Data: []byte("x")}); raydtest.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("our API under a root directory: %v", err)
	}
	// What was made for the user there, the user removes again (envd is
	// root); what is root's stays.
	for _, p := range []string{root + "/2", root + "/mk"} {
		if _, err := c.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: p})); err != nil {
			t.Errorf("Remove %s: %v", p, err)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s after Remove: %v", p, err)
		}
	}
	mustWriteFile(t, root+"/roots.txt", "x", 0o644)
	if _, err := c.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: root + "/roots.txt"})); raydtest.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("Remove of root's file: %v", err)
	}
}

// Watch events as envd's: a file written through the E2B surface shows up
// as create, chmod, write (new) or chmod, write, write (replaced); a chmod
// of the watched directory is ".", and a recursive watch reports a chmod
// of a subdirectory twice (its parent's watch and its own).
func TestE2BWatchAsEnvd(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	if err := os.Mkdir(dir+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	chownUser(t, dir+"/sub")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := h.EnvdFS(raydtest.EnvdHeaders{Token: h.Token})
	s, err := c.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: dir, Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Receive() || s.Msg().GetStart() == nil {
		t.Fatalf("first message %v (%v)", s.Msg(), s.Err())
	}
	events := make(chan string, 64)
	go func() {
		for s.Receive() {
			if fe := s.Msg().GetFilesystem(); fe != nil {
				events <- strings.ToLower(strings.TrimPrefix(fe.GetType().String(), "EVENT_TYPE_")) + ":" + fe.GetName()
			}
		}
		close(events)
	}()
	// expect reads the next events (in this order, nothing between).
	expect := func(step string, want ...string) {
		t.Helper()
		var got []string
		for len(got) < len(want) {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("%s: stream ended (%v) after %v", step, s.Err(), got)
				}
				got = append(got, ev)
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: got %v, want %v", step, got, want)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("%s: got %v, want %v", step, got, want)
		}
	}
	post := func(p, data string) {
		t.Helper()
		resp := envdDo(h, t, http.MethodPost, "/files", url.Values{"path": {p}}, strings.NewReader(data), http.Header{"Content-Type": {"application/octet-stream"}})
		if b := readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", p, resp.StatusCode, b)
		}
	}
	post(dir+"/new.txt", "x")
	expect("new file", "create:new.txt", "chmod:new.txt", "write:new.txt")
	post(dir+"/new.txt", "y")
	expect("replaced file", "chmod:new.txt", "write:new.txt", "write:new.txt")
	post(dir+"/sub/empty", "")
	expect("new empty file", "create:sub/empty", "chmod:sub/empty")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	expect("chmod of the watched directory", "chmod:.")
	if err := os.Chmod(dir+"/sub", 0o711); err != nil {
		t.Fatal(err)
	}
	expect("chmod of a subdirectory", "chmod:sub", "chmod:sub")
	select {
	case ev := <-events:
		t.Fatalf("unexpected event %s", ev)
	case <-time.After(300 * time.Millisecond):
	}
}
