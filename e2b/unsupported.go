package e2b

import (
	"fmt"
	"net/http"
)

// unsupportedMsg is the message of every E2B feature the gateway does not
// have.
func unsupportedMsg(feature string) string {
	return feature + " is not supported by Rayito's E2B gateway"
}

// Unsupported lists the E2B routes the gateway answers with a refusal
// naming the feature (501), for docs/e2b.md and its tests: pattern ->
// feature.
var Unsupported = []struct{ Pattern, Feature string }{
	{"GET /sandboxes/metrics", "metrics of several sandboxes (GET /sandboxes/metrics)"},
	{"/templates", "templates"},
	{"/templates/", "templates"},
	{"/v2/templates", "templates"},
	{"/v2/templates/", "templates"},
	{"/v3/templates", "templates"},
	{"/v3/templates/", "templates"},
	{"/volumes", "volumes"},
	{"/volumes/", "volumes"},
	{"/teams", "teams"},
	{"/teams/", "teams"},
	{"/api-keys", "API key management (use `rayito e2b key create`)"},
	{"/api-keys/", "API key management (use `rayito e2b key create`)"},
	{"/access-tokens", "access tokens"},
	{"/access-tokens/", "access tokens"},
	{"/secrets", "secrets"},
	{"/secrets/", "secrets"},
	{"/nodes", "nodes"},
	{"/nodes/", "nodes"},
}

func (s *Server) unsupportedRoutes() {
	for _, u := range Unsupported {
		msg := unsupportedMsg(u.Feature)
		s.mux.HandleFunc(u.Pattern, func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusNotImplemented, msg)
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s in Rayito's E2B gateway", r.Method, r.URL.EscapedPath()))
	})
}
