package gateway

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrPathNotAllowed is wrapped by every error CheckPath returns.
var ErrPathNotAllowed = errors.New("gateway: path not allowed")

// pathError is the error CheckPath returns. It carries a reason but never
// the path itself.
type pathError struct{ reason string }

func (e *pathError) Error() string { return ErrPathNotAllowed.Error() + ": " + e.reason }
func (e *pathError) Unwrap() error { return ErrPathNotAllowed }

func pathErr(reason string) error { return &pathError{reason: reason} }

// CheckPath reports whether rawPath (the path of a request-target exactly as
// received, without the query) is allowed. It refuses, it never normalizes:
//
//   - the path must start with '/';
//   - it may only contain RFC 3986 path characters: ALPHA DIGIT - . _ ~,
//     the sub-delimiters ! $ & ' ( ) * + , = (but not ';'), ':' '@' '/',
//     and '%' followed by two hex digits;
//   - each segment is percent-decoded exactly once, and the decoded segment
//     must be valid UTF-8 and contain no '/', '\\', '%', ';' and no control
//     character (so %2f %5c %25 %3b %00 are refused);
//   - no "." or ".." segment, before or after decoding;
//   - no empty segment, except a single trailing slash ("/" and "/a/" are
//     allowed, "//" and "/a//b" are not).
//
// The returned error wraps ErrPathNotAllowed and never contains the path.
func CheckPath(rawPath string) error {
	_, err := decodePath(rawPath)
	return err
}

// decodePath checks rawPath like CheckPath and returns its once-decoded form.
func decodePath(rawPath string) (string, error) {
	if rawPath == "" || rawPath[0] != '/' {
		return "", pathErr("does not start with '/'")
	}
	if rawPath == "/" {
		return "/", nil
	}
	if strings.IndexByte(rawPath, '%') < 0 {
		// Fast path: nothing to decode.
		if err := checkSegments(rawPath); err != nil {
			return "", err
		}
		return rawPath, nil
	}
	if err := checkSegments(rawPath); err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(len(rawPath))
	for i := 0; i < len(rawPath); i++ {
		c := rawPath[i]
		if c == '%' {
			b.WriteByte(unhex(rawPath[i+1])<<4 | unhex(rawPath[i+2]))
			i += 2
			continue
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// checkSegments validates every segment of rawPath (which starts with '/').
func checkSegments(rawPath string) error {
	rest := rawPath[1:]
	for {
		seg, tail, more := strings.Cut(rest, "/")
		if seg == "" {
			if !more {
				return nil // single trailing slash
			}
			return pathErr("empty segment")
		}
		if err := checkSegment(seg); err != nil {
			return err
		}
		if !more {
			return nil
		}
		rest = tail
	}
}

func checkSegment(seg string) error {
	hasPct := false
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,=:@", c) >= 0:
		case c == '%':
			if i+2 >= len(seg) || !ishex(seg[i+1]) || !ishex(seg[i+2]) {
				return pathErr("bad percent-encoding")
			}
			hasPct = true
			i += 2
		default:
			if c >= 0x80 {
				return pathErr("raw non-ASCII byte")
			}
			return pathErr(fmt.Sprintf("character 0x%02x", c))
		}
	}
	if !hasPct {
		if seg == "." || seg == ".." {
			return pathErr("dot segment")
		}
		return nil
	}
	// Decode once and check the decoded bytes.
	decoded := make([]byte, 0, len(seg))
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c == '%' {
			c = unhex(seg[i+1])<<4 | unhex(seg[i+2])
			i += 2
		}
		switch {
		case c < 0x20 || c == 0x7f:
			return pathErr("encoded control character")
		case c == '/' || c == '\\' || c == '%' || c == ';':
			return pathErr(fmt.Sprintf("encoded 0x%02x", c))
		}
		decoded = append(decoded, c)
	}
	if !utf8.Valid(decoded) {
		return pathErr("decoded segment is not valid UTF-8")
	}
	if d := string(decoded); d == "." || d == ".." {
		return pathErr("dot segment")
	}
	return nil
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}
