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

// sigCheck is what a request's file signature says.
type sigCheck int

const (
	// sigNone: not a presigned file request (no signature, or not a
	// read or write of /files).
	sigNone sigCheck = iota
	// sigValid: signed with the token and not expired.
	sigValid
	// sigInvalid: a signature that the token did not make.
	sigInvalid
	// sigExpired: signed with the token, but its expiration has passed.
	sigExpired
)

// envd's answers to a presigned file request it refuses.
const (
	msgInvalidSignature = "invalid signature"
	msgExpiredSignature = "signature is already expired"
)

// checkFileSignature checks a presigned envd file URL (uploadUrl,
// downloadUrl: GET for read, POST for write, on /files) against the
// sandbox whose access token is token. E2B signs
//
//	signature=v1_<base64(sha256("<path>:<read|write>:<username>:<token>[:<expiration>]"))>
//
// with the padding removed; signature_expiration (unix seconds), when
// there, is part of what is signed and must not have passed (envd: not
// before now). As on envd, the signature is checked first and the
// expiration only of a genuine one. Such a link carries no
// X-Access-Token: the router adds it to a valid one. rayd keeps only the
// token's digest, so the gateway, which holds the token, checks the
// signature.
func checkFileSignature(r *http.Request, token string, now time.Time) sigCheck {
	if r.URL.Path != "/files" {
		return sigNone
	}
	var op string
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		op = "read"
	case http.MethodPost:
		op = "write"
	default:
		return sigNone
	}
	q := r.URL.Query()
	sigs, ok := q["signature"]
	if !ok {
		return sigNone
	}
	if token == "" || len(sigs) != 1 {
		return sigInvalid
	}
	sig, ok := strings.CutPrefix(sigs[0], "v1_")
	if !ok {
		return sigInvalid
	}
	raw := q.Get("path") + ":" + op + ":" + q.Get("username") + ":" + token
	exp, hasExp := q["signature_expiration"]
	var expires int64
	if hasExp {
		n, err := strconv.ParseInt(exp[0], 10, 64)
		if err != nil || len(exp) != 1 {
			return sigInvalid
		}
		expires = n
		raw += ":" + exp[0]
	}
	sum := sha256.Sum256([]byte(raw))
	want := strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
	if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
		return sigInvalid
	}
	if hasExp && expires < now.Unix() {
		return sigExpired
	}
	return sigValid
}

// validFileSignature reports whether r is a presigned file URL of the
// sandbox with token that is valid now.
func validFileSignature(r *http.Request, token string, now time.Time) bool {
	return checkFileSignature(r, token, now) == sigValid
}
