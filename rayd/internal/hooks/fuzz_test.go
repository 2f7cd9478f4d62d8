package hooks

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEnvelope feeds arbitrary /run bodies to the envelope parser: it never
// panics and accepts only well-formed envelopes.
func FuzzEnvelope(f *testing.F) {
	f.Add(`{"microvmId":"microvm-1","runHookPayload":"{\"v\":1}"}`)
	f.Add(`{"microvmId":1}`)
	f.Add(`{"microvmId":"a","runHookPayload":"b","extra":[1,2]}`)
	f.Add(`[]`)
	f.Add(strings.Repeat("{", 1000))
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, PathPrefix+HookRun, strings.NewReader(body))
		id, payload, ok := readEnvelope(httptest.NewRecorder(), req)
		if !ok && (id != "" || payload != "") {
			t.Fatal("a refused envelope returned fields")
		}
		if ok && (!utf8.ValidString(id) || !utf8.ValidString(payload)) {
			t.Fatal("accepted invalid UTF-8")
		}
	})
}
