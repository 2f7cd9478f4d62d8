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
	nowExp := strconv.FormatInt(now.Unix(), 10)
	check := func(method, path, user, sig, exp string) sigCheck {
		q := url.Values{"path": {path}, "signature": {sig}}
		if user != "" {
			q.Set("username", user)
		}
		if exp != "" {
			q.Set("signature_expiration", exp)
		}
		return checkFileSignature(httptest.NewRequest(method, "/files?"+q.Encode(), nil), token, now)
	}
	for name, c := range map[string]struct {
		want sigCheck
		got  sigCheck
	}{
		"read":            {sigValid, check("GET", "/home/user/a.txt", "", sign("/home/user/a.txt", "read", "", token, ""), "")},
		"write with user": {sigValid, check("POST", "a.txt", "user", sign("a.txt", "write", "user", token, ""), "")},
		"not yet expired": {sigValid, check("GET", "a", "", sign("a", "read", "", token, later), later)},
		// envd: a link expires after its second, not at it.
		"expiring now":              {sigValid, check("GET", "a", "", sign("a", "read", "", token, nowExp), nowExp)},
		"expired":                   {sigExpired, check("GET", "a", "", sign("a", "read", "", token, earlier), earlier)},
		"expired and forged":        {sigInvalid, check("GET", "a", "", sign("a", "read", "", "other", earlier), earlier)},
		"expiration dropped":        {sigInvalid, check("GET", "a", "", sign("a", "read", "", token, later), "")},
		"expiration not a number":   {sigInvalid, check("GET", "a", "", sign("a", "read", "", token, "x"), "x")},
		"a read signature to write": {sigInvalid, check("POST", "a", "", sign("a", "read", "", token, ""), "")},
		"another path":              {sigInvalid, check("GET", "b", "", sign("a", "read", "", token, ""), "")},
		"another user":              {sigInvalid, check("GET", "a", "root", sign("a", "read", "", token, ""), "")},
		"another token":             {sigInvalid, check("GET", "a", "", sign("a", "read", "", "other", ""), "")},
		"no v1_ prefix":             {sigInvalid, check("GET", "a", "", strings.TrimPrefix(sign("a", "read", "", token, ""), "v1_"), "")},
		"DELETE":                    {sigNone, check("DELETE", "a", "", sign("a", "read", "", token, ""), "")},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
	if c := checkFileSignature(httptest.NewRequest("GET", "/files?path=a", nil), token, now); c != sigNone {
		t.Errorf("no signature: %v, want none", c)
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
	r := e.routed("GET", "/files?"+q.Encode(), sb.SandboxID, "49983")
	if r.header.Get("X-Seen-Access-Token") != "" {
		t.Fatal("a forged signature got the access token")
	}
	// Refused as envd refuses it: the sandbox never sees it.
	r.errBody(t, 401, "invalid signature")
	past := strconv.FormatInt(time.Now().Unix()-10, 10)
	q = url.Values{"path": {"a.txt"}, "signature_expiration": {past}, "signature": {sign("a.txt", "read", "", sb.EnvdAccessToken, past)}}
	r = e.routed("GET", "/files?"+q.Encode(), sb.SandboxID, "49983")
	if r.code != 401 || string(r.body) != `{"code":401,"message":"signature is already expired"}` {
		t.Fatalf("expired link: %d %s", r.code, r.body)
	}
	// The host form (the SDK's link without E2B_SANDBOX_URL) works too.
	q = url.Values{"path": {"a.txt"}, "signature": {sign("a.txt", "read", "", sb.EnvdAccessToken, "")}}
	if r := e.do("GET", "/files?"+q.Encode(), nil, "X-API-KEY", "", "Host", "49983-"+sb.SandboxID+".e2b.localhost:3443"); r.header.Get("X-Seen-Access-Token") != sb.EnvdAccessToken || r.header.Get("X-Seen-Port") != "49983" {
		t.Fatalf("presigned read on the host form: %d %v", r.code, r.header)
	}
}

// A presigned link on the gateway's own address, without any sandbox
// header or host (E2B's SDKs make them so when E2B_SANDBOX_URL is set),
// reaches the sandbox whose token signed it; one that no sandbox signed
// is the API's (401 without a key).
func TestRouterPresignedLinkWithoutSandbox(t *testing.T) {
	e := newEnv(t)
	e.create(nil)
	sb := e.create(nil)
	e.create(nil)
	future := strconv.FormatInt(time.Now().Unix()+60, 10)
	q := url.Values{"path": {"b.txt"}, "username": {"user"}, "signature_expiration": {future}, "signature": {sign("b.txt", "write", "user", sb.EnvdAccessToken, future)}}
	r := e.do("POST", "/files?"+q.Encode(), "body", "X-API-KEY", "")
	if r.code != 200 || r.header.Get("X-Seen-Access-Token") != sb.EnvdAccessToken || r.header.Get("X-Seen-Port") != "49983" {
		t.Fatalf("link without a sandbox: %d %v %s", r.code, r.header, r.body)
	}
	past := strconv.FormatInt(time.Now().Unix()-60, 10)
	q = url.Values{"path": {"b.txt"}, "signature_expiration": {past}, "signature": {sign("b.txt", "read", "", sb.EnvdAccessToken, past)}}
	e.do("GET", "/files?"+q.Encode(), nil, "X-API-KEY", "").errBody(t, 401, "signature is already expired")
	q.Set("signature", sign("b.txt", "read", "", "forged", past))
	e.do("GET", "/files?"+q.Encode(), nil, "X-API-KEY", "").errBody(t, 401, "X-API-KEY")
}
