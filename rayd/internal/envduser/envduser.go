// Package envduser reads the run-as user of an E2B envd request: the e2b
// SDKs send it as `Authorization: Basic base64("<user>:")` on the RPCs
// (and as the username query parameter on the plain HTTP endpoints). The
// name is only a request: the identity rules of package launch decide
// whether the account may be used.
package envduser

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// MaxNameLen bounds a user name (useradd's limit is 32; this leaves room).
const MaxNameLen = 256

// ErrInvalid is returned for an Authorization header that is not Basic
// credentials with a valid user name.
var ErrInvalid = errors.New("envduser: invalid Authorization header")

// FromHeader returns the user named by h's Authorization header, or ""
// (the sandbox's default user) when there is none.
func FromHeader(h http.Header) (string, error) {
	v := h.Get("Authorization")
	if v == "" {
		return "", nil
	}
	return Parse(v)
}

// Parse parses an Authorization header value `Basic base64("<user>:<password>")`;
// the password is ignored (the SDK sends none). An empty user means the
// default user.
func Parse(v string) (string, error) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", ErrInvalid
	}
	cred = strings.TrimSpace(cred)
	raw, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(cred)
		if err != nil {
			return "", ErrInvalid
		}
	}
	name, _, _ := strings.Cut(string(raw), ":")
	if !Valid(name) {
		return "", ErrInvalid
	}
	return name, nil
}

// Valid reports whether name may be passed on as a user name: at most
// MaxNameLen bytes of printable ASCII without '/' or ':' ("" is valid:
// the default user).
func Valid(name string) bool {
	if len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || c == '/' || c == ':' {
			return false
		}
	}
	return true
}
