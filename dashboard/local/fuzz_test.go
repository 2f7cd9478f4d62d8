package local

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/dashboard/internal/theme"
)

// FuzzRequest sends arbitrary requests through the handler (with or
// without the session's cookie and CSRF token): it never panics, every
// answer carries the security headers, errors are JSON or short text,
// and nothing reaches the platform without the session, and no action
// without its confirm.
func FuzzRequest(f *testing.F) {
	f.Add("GET", "/api/v1/sandboxes", "", "", "", true, false, "")
	f.Add("POST", "/api/v1/actions", "", "application/json", "", true, true, `{"action":"kill","ids":["a"],"confirm":true}`)
	f.Add("POST", "/api/v1/actions", "", "application/json", "same-origin", true, true, `{"action":"kill","ids":["a"]}`)
	f.Add("GET", "/?token=x", "null", "", "", false, false, "")
	f.Add("GET", "/api/v1/cost?billed=true&account=x", "", "", "cross-site", true, true, "")
	f.Add("PUT", "/logo.svg", "http://127.0.0.1:1", "text/plain", "none", false, false, "x")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	be := &fakeBackend{}
	s, err := newServer(Options{AllowActions: true, MaxIDs: 3, ActionInterval: 1, Backend: "local"}, ln, theme.Default(), nil, be)
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.worker(ctx)
	// One session for every input.
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://"+ln.Addr().String()+"/?token="+s.session.StartupToken(), nil))
	cookie := rec.Result().Cookies()[0]
	req := httptest.NewRequest("GET", "http://"+ln.Addr().String()+"/api/v1/session", nil)
	req.AddCookie(cookie)
	csrf, _ := s.session.Lookup(req)
	host := ln.Addr().String()
	h := s.Handler()

	f.Fuzz(func(t *testing.T, method, target, origin, ctype, fetchSite string, withCookie, withCSRF bool, body string) {
		if !validMethod(method) || target == "" || target[0] != '/' || strings.ContainsAny(target, " \r\n\x00#") {
			return
		}
		r, err := http.NewRequest(method, "http://"+host+target, strings.NewReader(body))
		if err != nil {
			return
		}
		r.Host = host
		set := func(k, v string) {
			if v != "" && validHeader(v) {
				r.Header.Set(k, v)
			}
		}
		set("Origin", origin)
		set("Content-Type", ctype)
		set("Sec-Fetch-Site", fetchSite)
		if withCookie {
			r.AddCookie(cookie)
		}
		if withCSRF {
			r.Header.Set(CSRFHeader, csrf)
		}
		before := be.calls.Load()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		resp := w.Result()
		for k, v := range wantHeaders {
			if k == "Content-Security-Policy" && resp.Header.Get(k) == LogoCSP {
				continue
			}
			if resp.Header.Get(k) != v {
				t.Fatalf("%s %s: %d without %s", method, target, resp.StatusCode, k)
			}
		}
		called := be.calls.Load() != before
		if called && (!withCookie || resp.StatusCode == 401 || resp.StatusCode == 421) {
			t.Fatalf("%s %s: a platform call without a session (%d)", method, target, resp.StatusCode)
		}
		if called && method == "POST" && (!withCSRF || !strings.Contains(body, "confirm")) {
			t.Fatalf("%s %s: an action without CSRF or confirm", method, target)
		}
		if resp.StatusCode >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("%s %s: %d as %q", method, target, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})
}

func validMethod(m string) bool {
	if m == "" || len(m) > 16 {
		return false
	}
	for i := 0; i < len(m); i++ {
		if c := m[i]; c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}
