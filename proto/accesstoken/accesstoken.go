// Package accesstoken creates, decodes and verifies the access tokens that
// authenticate RPCs to rayd.
//
// A token is Size random bytes encoded as unpadded base64url (RFC 4648 §5).
// The platform hands rayd only the SHA-256 digest of the decoded token bytes
// (see Digest); rayd checks a presented token against that digest with
// Verify, in constant time.
//
// Decode is strict: it accepts only the URL-safe alphabet, in canonical form
// (unused trailing bits zero), either unpadded or with exactly the right "="
// padding. Errors returned by this package never contain the token.
package accesstoken

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/rayito-dev/rayito/proto/limits"
)

const (
	// Size is the number of random bytes in a token made by New.
	Size = 32

	// MinSize is the minimum number of decoded bytes Decode accepts.
	MinSize = limits.AccessTokenMinBytes

	// MaxEncodedLen is the maximum length in bytes of an encoded token
	// accepted by Decode.
	MaxEncodedLen = 1024

	// DigestLen is the length of a hex digest as returned by Digest.
	DigestLen = 2 * sha256.Size
)

var (
	// ErrMalformed reports a token that is not canonical base64url, or is
	// longer than MaxEncodedLen.
	ErrMalformed = errors.New("accesstoken: malformed token")

	// ErrTooShort reports a token that decodes to fewer than MinSize bytes.
	ErrTooShort = errors.New("accesstoken: token too short")
)

var strictRaw = base64.RawURLEncoding.Strict()

// New returns a fresh token: Size bytes from crypto/rand, encoded as
// unpadded base64url.
func New() (string, error) {
	var b [Size]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("accesstoken: reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Decode returns the bytes encoded by token.
//
// The token must use the base64url alphabet, be canonically encoded and be
// either unpadded or correctly padded with "=". Whitespace, the standard
// alphabet's "+" and "/", and inputs longer than MaxEncodedLen are rejected
// with an error wrapping ErrMalformed; tokens that decode to fewer than
// MinSize bytes are rejected with ErrTooShort.
func Decode(token string) ([]byte, error) {
	if len(token) > MaxEncodedLen {
		return nil, fmt.Errorf("%w: longer than %d characters", ErrMalformed, MaxEncodedLen)
	}
	body := token
	if pad := trailingPad(token); pad > 0 {
		body = token[:len(token)-pad]
		// Padding is only valid when it completes the last quantum.
		if len(token)%4 != 0 || (4-len(body)%4)%4 != pad {
			return nil, fmt.Errorf("%w: invalid padding", ErrMalformed)
		}
	}
	for i := 0; i < len(body); i++ {
		if !isURLAlphabet(body[i]) {
			return nil, fmt.Errorf("%w: invalid character", ErrMalformed)
		}
	}
	if len(body)%4 == 1 {
		return nil, fmt.Errorf("%w: invalid length", ErrMalformed)
	}
	raw, err := strictRaw.DecodeString(body)
	if err != nil {
		// The alphabet and length are valid, so only non-zero trailing
		// bits remain. Do not wrap err: keep the message free of input.
		return nil, fmt.Errorf("%w: non-canonical encoding", ErrMalformed)
	}
	if len(raw) < MinSize {
		return nil, ErrTooShort
	}
	return raw, nil
}

// trailingPad returns the number of trailing '=' characters in s.
func trailingPad(s string) int {
	n := 0
	for n < len(s) && s[len(s)-1-n] == '=' {
		n++
	}
	return n
}

func isURLAlphabet(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// Digest decodes token and returns the lowercase hex SHA-256 digest of the
// decoded bytes (DigestLen characters).
func Digest(token string) (string, error) {
	raw, err := Decode(token)
	if err != nil {
		return "", err
	}
	return DigestBytes(raw), nil
}

// DigestBytes returns the lowercase hex SHA-256 digest of raw.
func DigestBytes(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// Verify reports whether token decodes and its digest equals digestHex.
// The digests are compared in constant time. Verify returns false if token
// is invalid or digestHex is not a valid digest (see ValidDigest).
func Verify(token, digestHex string) bool {
	if !ValidDigest(digestHex) {
		return false
	}
	raw, err := Decode(token)
	if err != nil {
		return false
	}
	got := DigestBytes(raw)
	return subtle.ConstantTimeCompare([]byte(got), []byte(digestHex)) == 1
}

// ValidDigest reports whether s is exactly DigestLen lowercase hex characters.
func ValidDigest(s string) bool {
	if len(s) != DigestLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
