// Package transfer moves files between the sandbox and S3 through
// pre-signed URLs (the security model's T16): the SDK signs them with the
// caller's credentials, rayd stores none. rayd accepts a URL only when it
// is https to the exact regional virtual host of the object's bucket, on
// port 443, for the object's exact key, which must be bound to this
// sandbox (<prefix>/<sandbox id>/<up|down>/<id>), signed with SigV4 for
// the object's region; it never follows a redirect, and its resolver
// drops loopback, link-local (IMDS among them), unspecified and multicast
// addresses, so a URL can never make rayd reach the sandbox's own
// services, the platform's or the metadata service. URLs are never
// logged.
package transfer

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Limits of a transfer's request.
const (
	// MaxURLLen bounds a pre-signed URL.
	MaxURLLen = 8192
	// MaxIDLen bounds the last segment of a transfer's key.
	MaxIDLen = 128
	// MaxKeyLen bounds an object's key (S3's own limit).
	MaxKeyLen = 1024
)

// ErrBadURL: a pre-signed URL or its object breaks the policy (answered
// INVALID_ARGUMENT before any I/O). Its message names the rule, never the
// URL or the key.
var ErrBadURL = errors.New("transfer: pre-signed URL refused")

// Object is the S3 object a transfer moves.
type Object struct {
	Bucket, Key, Region string
}

// Direction is an import's "up" (the user uploaded, rayd downloads) or an
// export's "down".
type Direction string

// The directions, as they appear in a key.
const (
	Up   Direction = "up"
	Down Direction = "down"
)

func badURL(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadURL}, args...)...)
}

// CheckObject checks an object for this sandbox and direction: a bucket of
// 3 to 63 characters of [a-z0-9-] (no dots: the bucket is a TLS host
// label), a region of [a-z0-9-], and a key <prefix>/<sandboxID>/<dir>/<id>
// whose prefix has no empty, "." or ".." segment and whose id is 1 to 128
// characters of [A-Za-z0-9._-].
func CheckObject(o Object, sandboxID string, dir Direction) error {
	if !validBucket(o.Bucket) {
		return badURL("the bucket must be 3 to 63 characters of a-z, 0-9 and '-'")
	}
	if o.Region == "" || len(o.Region) > 32 || strings.Trim(o.Region, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return badURL("the region must be characters of a-z, 0-9 and '-'")
	}
	if len(o.Key) > MaxKeyLen {
		return badURL("the key is longer than %d bytes", MaxKeyLen)
	}
	segs := strings.Split(o.Key, "/")
	if len(segs) < 4 {
		return badURL("the key is not <prefix>/<sandbox id>/%s/<id>", dir)
	}
	n := len(segs)
	if segs[n-3] != sandboxID || sandboxID == "" {
		return badURL("the key is not bound to this sandbox")
	}
	if segs[n-2] != string(dir) {
		return badURL("the key's direction is not %s", dir)
	}
	if !validID(segs[n-1]) {
		return badURL("the key's id must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", MaxIDLen)
	}
	for _, s := range segs[:n-3] {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "\x00\r\n") {
			return badURL("the key's prefix has an empty, '.' or '..' segment")
		}
	}
	return nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '-' || (i == 0 || i == len(b)-1) && !alnum {
			return false
		}
	}
	return true
}

func validID(id string) bool {
	if id == "" || len(id) > MaxIDLen || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Host is the exact regional virtual host of a bucket.
func Host(bucket, region string) string {
	return bucket + ".s3." + region + ".amazonaws.com"
}

// allowedQuery are the query parameters a pre-signed S3 URL may carry:
// SigV4's, and a multipart part's.
var allowedQuery = map[string]bool{
	"X-Amz-Algorithm": true, "X-Amz-Credential": true, "X-Amz-Date": true, "X-Amz-Expires": true,
	"X-Amz-SignedHeaders": true, "X-Amz-Signature": true, "X-Amz-Security-Token": true,
	"X-Amz-Content-Sha256": true, "x-id": true, "partNumber": true, "uploadId": true,
}

// CheckURL checks a pre-signed URL for the object o (already checked with
// CheckObject): https, no user information, port 443 or none, the exact
// host Host(o.Bucket, o.Region) (so no IP literal), the path "/" + the key
// (percent-decoded once, nothing else), a SigV4 query whose credential
// scope is the object's region and the s3 service, and no other query
// parameter than SigV4's and a part's. It returns ErrWrongRegion for a
// URL signed for another region, ErrBadURL otherwise.
func CheckURL(raw string, o Object) error {
	if len(raw) > MaxURLLen {
		return badURL("longer than %d bytes", MaxURLLen)
	}
	if strings.ContainsAny(raw, "\x00\r\n\t \\") {
		return badURL("a control character, space or backslash")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return badURL("not a URL")
	}
	switch {
	case u.Scheme != "https":
		return badURL("not https")
	case u.User != nil:
		return badURL("user information in the URL")
	case u.Opaque != "" || u.Fragment != "" || u.RawFragment != "":
		return badURL("not an S3 object URL")
	}
	host, port := u.Hostname(), u.Port()
	if port != "" && port != "443" {
		return badURL("not port 443")
	}
	if net.ParseIP(host) != nil || strings.HasPrefix(u.Host, "[") {
		return badURL("an IP address, not the bucket's host")
	}
	if host != Host(o.Bucket, o.Region) {
		return badURL("not the bucket's regional host")
	}
	p, err := url.PathUnescape(u.EscapedPath())
	if err != nil || p != "/"+o.Key {
		return badURL("the path is not the object's key")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return badURL("a malformed query")
	}
	for k, vs := range q {
		if !allowedQuery[k] || len(vs) != 1 {
			return badURL("a query parameter a pre-signed S3 URL does not have")
		}
	}
	if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || q.Get("X-Amz-Signature") == "" || q.Get("X-Amz-Date") == "" || q.Get("X-Amz-Expires") == "" {
		return badURL("not signed with SigV4")
	}
	scope := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(scope) != 5 || scope[3] != "s3" || scope[4] != "aws4_request" {
		return badURL("not signed with SigV4 for s3")
	}
	if scope[2] != o.Region {
		return fmt.Errorf("%w (signed for another region)", ErrWrongRegion)
	}
	return nil
}

// ErrWrongRegion: the URL, or S3's answer, is for another region than the
// object's.
var ErrWrongRegion = errors.New("transfer: wrong region")

func parseQuery(s string) (url.Values, error) { return url.ParseQuery(s) }
