package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rayito-dev/rayito/dashboard/local"
	"github.com/rayito-dev/rayito/localvm"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// xssMetadata is a metadata value that would run code if the page ever
// parsed it as HTML.
const xssMetadata = `<script>window.pwned=1</script><img src=x onerror=window.pwned=2>`

// TestDashboardInChromium runs `rayito dashboard` (the built CLI) and
// opens the URL it prints in headless Chromium (Debian's chromium, make
// deps) against a real local platform: the page lists the live sandboxes, a hostile metadata value
// shows as text and runs nothing, the session cookie is out of the
// page's reach, and an action without confirm is refused (the sandbox
// keeps running).
func TestDashboardInChromium(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: the sandboxes of the page come from a root local platform (make deps installs chromium as root)")
	}
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("needs Debian's chromium (make deps installs it as root)")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The CLI reads the token store under its XDG_STATE_HOME: the
	// sandbox's token goes there, so the page gets its metadata.
	xdg := t.TempDir()
	tokens := rayito.WithTokenStoreDir(filepath.Join(xdg, "rayito", "tokens"))
	sbx, err := rayito.Create(ctx, p.opts(tokens, rayito.WithMetadata(map[string]string{"owner": "dashboard-test", "note": xssMetadata}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(context.Background())
	id := sbx.ID()

	// The real command, as a user runs it: its first stdout line is the
	// one-time URL.
	cmd := exec.Command(rayitoBin(t), "dashboard", "--no-open", "--allow-actions")
	cmd.Env = append(os.Environ(), "RAYITO_ENDPOINT="+p.endpoint, "XDG_STATE_HOME="+xdg, "RAYITO_BACKEND=", "DISPLAY=", "WAYLAND_DISPLAY=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Errorf("rayito dashboard after Ctrl-C: %v (stderr %q)", err, stderr.String())
		}
	}()
	startURL, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(startURL, "http://127.0.0.1:") || !strings.Contains(startURL, "/?token=") {
		t.Fatalf("rayito dashboard printed %q (%v; stderr %q)", startURL, err, stderr.String())
	}
	startURL = strings.TrimSpace(startURL)

	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true),
		// Root cannot use Chromium's own sandbox.
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	)...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	row := `#sandboxes tbody tr[data-id="` + id + `"]`
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	eval := func(js string) bool {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	t0 := time.Now()
	if err := chromedp.Do(bctx,
		chromedp.Navigate(startURL),
		chromedp.WaitVisible(chromedp.CSS(row)),
	); err != nil {
		t.Fatalf("the page (after %v): %v", time.Since(t0), err)
	}
	t.Logf("the list rendered %v after the startup URL", time.Since(t0).Round(time.Millisecond))
	href, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil || strings.Contains(href, "token") || !strings.HasSuffix(href, "/") {
		t.Errorf("the page's URL is %q (%v): want the clean URL", href, err)
	}
	if !eval(`document.cookie === ""`) {
		t.Error("document.cookie is not empty: the session cookie must be HttpOnly")
	}
	if st, mode := text(row+` td:nth-child(3)`), text(`#mode`); st != "RUNNING" || mode != "actions allowed" {
		t.Errorf("state %q, mode %q", st, mode)
	}
	if md := text(row + ` td.metadata`); !strings.Contains(md, "note="+xssMetadata) || !strings.Contains(md, "owner=dashboard-test") {
		t.Errorf("metadata cell %q: want the values as text", md)
	}
	if eval(`typeof window.pwned !== "undefined"`) || eval(`document.querySelectorAll("#sandboxes script, #sandboxes img").length > 0`) {
		t.Fatal("the metadata value ran or became elements")
	}

	// Kill without ticking "I confirm": refused, the sandbox lives on.
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(row+` input[type=checkbox]`)),
		chromedp.Click(chromedp.CSS(`#kill`)),
		chromedp.WaitVisible(chromedp.CSS(`#error`)),
	); err != nil {
		t.Fatal(err)
	}
	if e, r := text(`#error`), text(`#actionresult`); !strings.HasPrefix(e, "confirm_required:") || r != "refused: confirm_required" {
		t.Errorf("kill without confirm: error %q, result %q", e, r)
	}
	if info, err := rayito.GetInfo(ctx, id, p.opts()...); err != nil || info.State != "RUNNING" {
		t.Fatalf("after a refused kill: %v %v", info, err)
	}
	// The URL was spent: a second browser tab gets nothing.
	if resp, err := http.Get(startURL); err != nil || resp.StatusCode != 401 {
		t.Fatalf("the startup URL again: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// The sandbox's detail: its events and its log.
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(row+` td.id`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail`)),
	); err != nil {
		t.Fatal(err)
	}
	if d := text(`#detailid`); d != id {
		t.Errorf("detail of %q, want %q", d, id)
	}
}

// TestDashboardAPIOnLocalPlatform drives the dashboard's API over HTTP
// against a real local platform: the listing with metadata, the log as
// `rayito sandbox logs` reads it, events, and each action through the
// worker (set timeout, pause, resume, kill), an unknown id as a code.
func TestDashboardAPIOnLocalPlatform(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: pause and resume need the root platform's cgroup freezer")
	}
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sbx, err := rayito.Create(ctx, p.opts(rayito.WithMetadata(map[string]string{"team": "a"}), rayito.WithTimeout(5*time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(context.Background())
	id := sbx.ID()
	srv, err := local.New(local.Options{
		SDK: p.opts(), AllowActions: true,
		LogFile: func(id string) string { return localvm.LogPath(p.stateDir, id) },
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	defer func() {
		stopServe()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 60 * time.Second}
	resp, err := hc.Get(srv.URL())
	if err != nil || resp.StatusCode != 200 || resp.Request.URL.RawQuery != "" {
		t.Fatalf("startup URL: %v %v", resp, err)
	}
	resp.Body.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(srv.Port())
	get := func(path string, v any) int {
		t.Helper()
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode
	}
	var sess struct{ CSRF string }
	get("/api/v1/session", &sess)
	act := func(body string) []local.ActionResult {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/api/v1/actions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(local.CSRFHeader, sess.CSRF)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Results []local.ActionResult }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", body, resp.StatusCode, err)
		}
		return out.Results
	}
	state := func() string {
		info, err := rayito.GetInfo(ctx, id, p.opts()...)
		if err != nil {
			t.Fatal(err)
		}
		return info.State
	}

	var list struct{ Sandboxes []local.Sandbox }
	if s := get("/api/v1/sandboxes", &list); s != 200 || len(list.Sandboxes) != 1 {
		t.Fatalf("sandboxes: %d %+v", s, list)
	}
	if sb := list.Sandboxes[0]; sb.ID != id || sb.State != "RUNNING" || sb.Metadata["team"] != "a" || sb.Template != "local" || sb.StartedAt == nil || sb.MemBytes == 0 {
		t.Fatalf("sandbox: %+v", sb)
	}
	var logs struct{ Lines []string }
	if s := get("/api/v1/sandboxes/"+id+"/logs", &logs); s != 200 || len(logs.Lines) == 0 {
		t.Fatalf("logs: %d %d lines", s, len(logs.Lines))
	}
	var evs struct{ Events []local.Event }
	if s := get("/api/v1/events?sandbox="+id, &evs); s != 200 {
		t.Fatalf("events: %d", s)
	}

	if r := act(`{"action":"set_timeout","ids":["` + id + `"],"confirm":true,"timeout_seconds":120}`); len(r) != 1 || !r[0].OK {
		t.Fatalf("set_timeout: %+v", r)
	}
	if r := act(`{"action":"pause","ids":["` + id + `"],"confirm":true}`); len(r) != 1 || !r[0].OK || state() != "SUSPENDED" {
		t.Fatalf("pause: %+v, %s", r, state())
	}
	if r := act(`{"action":"resume","ids":["` + id + `"],"confirm":true}`); len(r) != 1 || !r[0].OK || state() != "RUNNING" {
		t.Fatalf("resume: %+v, %s", r, state())
	}
	unknown := "microvm-00000000-0000-4000-8000-000000000000"
	r := act(`{"action":"kill","ids":["` + id + `","` + unknown + `"],"confirm":true}`)
	if len(r) != 2 || !r[0].OK || r[1].OK || r[1].Error != "sandbox_not_found" {
		t.Fatalf("kill: %+v", r)
	}
	if s := state(); s != "TERMINATED" && s != "TERMINATING" {
		t.Fatalf("after kill: %s", s)
	}
}
