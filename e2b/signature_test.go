package e2b

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sign is E2B's getSignature, written again from its description.
func sign(path, op, user, token, exp string) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != "" {
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}

func TestValidFileSignature(t *testing.T) {
	const token = "tok-of-the-sandbox"
	now := time.Unix(1_800_000_000, 0)
	later := strconv.FormatInt(now.Unix()+60, 10)
	earlier := strconv.FormatInt(now.Unix()-1, 10)
	req := func(method, path, user, sig, exp string) bool {
		q := url.Values{"path": {path}, "signature": {sig}}
		if user != "" {
			q.Set("username", user)
		}
		if exp != "" {
			q.Set("signature_expiration", exp)
		}
		return validFileSignature(httptest.NewRequest(method, "/files?"+q.Encode(), nil), token, now)
	}
	for name, c := range map[string]struct {
		ok  bool
		got bool
	}{
		"read":                      {true, req("GET", "/home/user/a.txt", "", sign("/home/user/a.txt", "read", "", token, ""), "")},
		"write with user":           {true, req("POST", "a.txt", "user", sign("a.txt", "write", "user", token, ""), "")},
		"not yet expired":           {true, req("GET", "a", "", sign("a", "read", "", token, later), later)},
		"expired":                   {false, req("GET", "a", "", sign("a", "read", "", token, earlier), earlier)},
		"expiration dropped":        {false, req("GET", "a", "", sign("a", "read", "", token, later), "")},
		"a read signature to write": {false, req("POST", "a", "", sign("a", "read", "", token, ""), "")},
		"another path":              {false, req("GET", "b", "", sign("a", "read", "", token, ""), "")},
		"another user":              {false, req("GET", "a", "root", sign("a", "read", "", token, ""), "")},
		"another token":             {false, req("GET", "a", "", sign("a", "read", "", "other", ""), "")},
		"no v1_ prefix":             {false, req("GET", "a", "", strings.TrimPrefix(sign("a", "read", "", token, ""), "v1_"), "")},
		"DELETE":                    {false, req("DELETE", "a", "", sign("a", "read", "", token, ""), "")},
	} {
		if c.got != c.ok {
			t.Errorf("%s: %v, want %v", name, c.got, c.ok)
		}
	}
	if validFileSignature(httptest.NewRequest("GET", "/health?signature="+url.QueryEscape(sign("", "read", "", token, "")), nil), token, now) {
		t.Error("a signature opened another endpoint than /files")
	}
	if validFileSignature(httptest.NewRequest("GET", "/files?path=a&signature="+url.QueryEscape(sign("a", "read", "", "", "")), nil), "", now) {
		t.Error("an empty token was accepted")
	}
}

// Through the router: a presigned read reaches the sandbox with the
// access token added; a forged one without.
func TestRouterPresignedFileURL(t *testing.T) {
	e := newEnv(t)
	sb := e.create(nil)
	q := url.Values{"path": {"a.txt"}, "signature": {sign("a.txt", "read", "", sb.EnvdAccessToken, "")}}
	if r := e.routed("GET", "/files?"+q.Encode(), sb.SandboxID, "49983"); r.header.Get("X-Seen-Access-Token") != sb.EnvdAccessToken {
		t.Fatalf("presigned read: %v", r.header)
	}
	q.Set("signature", sign("a.txt", "read", "", "forged", ""))
	if r := e.routed("GET", "/files?"+q.Encode(), sb.SandboxID, "49983"); r.header.Get("X-Seen-Access-Token") != "" {
		t.Fatal("a forged signature got the access token")
	}
}
