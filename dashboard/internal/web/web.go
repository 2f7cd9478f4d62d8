// Package web is the local dashboard's page: plain HTML, one JavaScript
// module and one style sheet, embedded; no inline script or style, no
// framework, no build step. The page writes everything with textContent.
package web

import (
	"embed"
	"net/http"
	"path"
)

//go:embed static
var files embed.FS

// types are the files' content types.
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// name maps a request path to an embedded file ("" : none).
func name(p string) string {
	switch p {
	case "/", "/index.html":
		return "static/index.html"
	case "/app.js", "/style.css":
		return "static" + p
	}
	return ""
}

// Has reports whether p is one of the page's files.
func Has(p string) bool { return name(p) != "" }

// Serve writes the file of p (Has(p) must hold).
func Serve(w http.ResponseWriter, r *http.Request, p string) {
	n := name(p)
	data, err := files.ReadFile(n)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", types[path.Ext(n)])
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(data)
}

// SecurityHeaders are the headers every answer of a dashboard carries,
// errors and 404s included (the local dashboard's and the stack's, each
// with the CSP of its page): no sniffing, no caching, no framing, no
// cross-origin reads, no referrer.
func SecurityHeaders(csp string) map[string]string {
	return map[string]string{
		"Content-Security-Policy":      csp,
		"X-Content-Type-Options":       "nosniff",
		"Cache-Control":                "no-store",
		"X-Frame-Options":              "DENY",
		"Cross-Origin-Resource-Policy": "same-origin",
		"Referrer-Policy":              "no-referrer",
	}
}
