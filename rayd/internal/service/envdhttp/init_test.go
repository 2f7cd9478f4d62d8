package envdhttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestInit(t *testing.T) {
	h := &Handlers{}
	post := func(body string) (int, string) {
		r := httptest.NewRequest("POST", InitPath, strings.NewReader(body))
		r.Header.Set("X-Access-Token", "tok-1")
		w := httptest.NewRecorder()
		h.init(w, r)
		return w.Code, w.Body.String()
	}
	for _, ok := range []string{
		``, `{}`,
		`{"accessToken":"tok-1","defaultUser":"user","defaultWorkdir":"/home/user","envVars":{},"timestamp":"2026-01-01T00:00:00Z","hyperloopIP":"10.0.0.1","volumeMounts":[]}`,
		`{"accessToken":"","envVars":null}`,
	} {
		if code, body := post(ok); code != http.StatusNoContent {
			t.Errorf("%s: %d %s", ok, code, body)
		}
	}
	for body, field := range map[string]string{
		`{"accessToken":"other-secret"}`:  "accessToken",
		`{"accessToken":5}`:               "accessToken",
		`{"defaultUser":"root"}`:          "defaultUser",
		`{"defaultWorkdir":"/"}`:          "defaultWorkdir",
		`{"envVars":{"A":"secret-env"}}`:  "envVars",
		`{"volumeMounts":[{"name":"v"}]}`: "volumeMounts",
		`{"somethingNew":1}`:              "somethingNew",
		`[1]`:                             "JSON object",
		`{`:                               "JSON object",
	} {
		code, got := post(body)
		if code != http.StatusBadRequest || !strings.Contains(got, field) || strings.Contains(got, "other-secret") || strings.Contains(got, "secret-env") {
			t.Errorf("%s: %d %s, want 400 naming %s without the value", body, code, got, field)
		}
	}
	r := httptest.NewRequest("GET", InitPath, nil)
	w := httptest.NewRecorder()
	h.init(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /init: %d", w.Code)
	}
	if code, _ := post(`{"x":"` + strings.Repeat("a", maxInitBody) + `"}`); code != http.StatusBadRequest {
		t.Errorf("a large body: %d", code)
	}
}

// FuzzCheckInit: any /init body is answered without a panic, and accepted
// only when every field is one rayd already satisfies.
func FuzzCheckInit(f *testing.F) {
	for _, s := range []string{`{}`, `{"accessToken":"t"}`, `{"envVars":{"a":"b"}}`, `{"defaultUser":"user","x":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req initReq
		if json.Unmarshal(b, &req) != nil {
			return
		}
		if checkInit(req, "t") == "" {
			for k := range req {
				switch k {
				case "timestamp", "hyperloopIP", "accessToken", "defaultUser", "defaultWorkdir", "envVars", "volumeMounts":
				default:
					t.Fatalf("accepted field %q", k)
				}
			}
		}
	})
}
