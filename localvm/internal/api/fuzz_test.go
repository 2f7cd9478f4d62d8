package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/localvm/internal/api"
	"github.com/rayito-dev/rayito/localvm/internal/registry"
)

// FuzzRequest sends arbitrary bodies and queries to the REST API: it must
// answer 200 or a well-formed rest-json 4xx error, never panic or 5xx.
func FuzzRequest(f *testing.F) {
	f.Add(uint8(0), `{"imageIdentifier":"local","maximumDurationInSeconds":60}`, "")
	f.Add(uint8(1), `{"expirationInMinutes":5,"allowedPorts":[{"port":8080}]}`, "")
	f.Add(uint8(2), "", "maxResults=2&nextToken=abc")
	f.Add(uint8(0), `{"imageIdentifier":"x","idlePolicy":{"maxIdleDurationSeconds":1}}`, "")
	f.Add(uint8(3), "", "")
	f.Fuzz(func(t *testing.T, op uint8, body, query string) {
		e := newAPI(t, func(ro *registry.Options, _ *api.Options) { ro.MaxSandboxes = 4 })
		var method, path string
		switch op % 4 {
		case 0:
			method, path = http.MethodPost, "/2025-09-09/microvms"
		case 1:
			method, path = http.MethodPost, "/2025-09-09/microvms/microvm-00000000-0000-4000-8000-000000000000/auth-token"
		case 2:
			method, path = http.MethodGet, "/2025-09-09/microvms"
		default:
			method, path = http.MethodDelete, "/2025-09-09/microvms/"+url.PathEscape(body)
		}
		if q, err := url.ParseQuery(query); err == nil && len(query) < 512 {
			path += "?" + q.Encode()
		}
		req := httptest.NewRequest(method, "http://127.0.0.1:7450"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.srv.Config.Handler.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s: status %d", method, path, rec.Code)
		}
		if rec.Code != http.StatusOK {
			var er struct {
				Type    string `json:"__type"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &er); err != nil || er.Type == "" || rec.Header().Get("X-Amzn-ErrorType") != er.Type {
				t.Fatalf("malformed error %d %q", rec.Code, rec.Body.String())
			}
			if body != "" && len(body) > 8 && strings.Contains(er.Message, body) {
				t.Fatal("error message quotes the input")
			}
		}
	})
}
