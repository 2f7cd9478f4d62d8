package e2b

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// validFileSignature reports whether r is a presigned envd file URL of
// the sandbox whose access token is token: E2B's uploadUrl/downloadUrl
// (GET for read, POST for write, on /files), signed
//
//	signature=v1_<base64(sha256("<path>:<read|write>:<username>:<token>[:<expiration>]"))>
//
// with the padding removed, and, when signature_expiration (unix seconds)
// is there, not expired at now. Such a link carries no X-Access-Token:
// with a valid signature the router adds it. rayd keeps only the token's
// digest, so the gateway, which holds the token, checks the signature.
func validFileSignature(r *http.Request, token string, now time.Time) bool {
	if token == "" || r.URL.Path != "/files" {
		return false
	}
	var op string
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		op = "read"
	case http.MethodPost:
		op = "write"
	default:
		return false
	}
	q := r.URL.Query()
	sig, ok := strings.CutPrefix(q.Get("signature"), "v1_")
	if !ok || len(q["signature"]) != 1 {
		return false
	}
	raw := q.Get("path") + ":" + op + ":" + q.Get("username") + ":" + token
	if exp := q.Get("signature_expiration"); exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || n <= now.Unix() {
			return false
		}
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	want := strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
	return subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}
