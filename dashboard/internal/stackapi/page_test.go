package stackapi

import (
	"regexp"

	"github.com/rayito-dev/rayito/dashboard/internal/theme"
	"strings"
	"testing"
)

// TestPage: the page, module and sheet are served without a token with
// their types; the module uses no HTML or code sink, keeps the token out
// of cookies and storage, and the HTML has no inline script, style or
// handler and loads nothing from elsewhere.
func TestPage(t *testing.T) {
	r := newRig(t, false, nil)
	for path, ctype := range map[string]string{"/": "text/html", "/app.js": "text/javascript", "/app.css": "text/css", "/theme.css": "text/css"} {
		resp, err := r.h.Handle(t.Context(), request("GET", path, "", nil, ""))
		if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Headers["Content-Type"], ctype) || resp.Headers["Content-Security-Policy"] != CSP {
			t.Fatalf("%s = %d %v %v", path, resp.StatusCode, resp.Headers, err)
		}
	}
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setTimeout(\"", "localStorage", "document.cookie", "sessionStorage.setItem(\"rayito.token"} {
		if strings.Contains(appJS, sink) {
			t.Errorf("app.js uses %s", sink)
		}
	}
	// The only thing kept in sessionStorage is the PKCE verifier and state.
	for _, m := range regexp.MustCompile(`sessionStorage\.setItem\(([^,]+),`).FindAllStringSubmatch(appJS, -1) {
		if m[1] != `"rayito.pkce"` {
			t.Errorf("app.js stores %s in sessionStorage", m[1])
		}
	}
	if regexp.MustCompile(`(?i)<script>|<script(?:\s[^>]*)?>[^<]|<style|\son[a-z]+=|src="(?:https?:)?//|href="(?:https?:)?//`).MatchString(indexHTML) {
		t.Error("index.html has inline code or an outside reference")
	}
	// An unvalidated theme in the configuration is never served: the
	// factory one is.
	r.h.Config.Theme = theme.Theme{Title: "x", Colors: theme.Colors{Accent: "red;}body{background:url(//evil)"}}
	resp, _ := r.h.Handle(t.Context(), request("GET", "/theme.css", "", nil, ""))
	if resp.Body != string(theme.Default().CSS()) {
		t.Fatalf("theme.css = %q", resp.Body)
	}
	if r.cp.lists.Load() != 0 {
		t.Fatal("the page called AWS")
	}
}
