package runpayload

import (
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Encode validates p and returns its canonical encoding: the exact output
// of Python's json.dumps(obj, sort_keys=True, separators=(",", ":"),
// ensure_ascii=True) for the equivalent object. Empty maps, empty optional
// strings and nil pointers are omitted; "v" and "token_sha256" are always
// present.
//
// The error is an *Error for a rule violation, or ErrTooLarge when the
// encoding would exceed MaxLen characters.
func Encode(p *Payload) (string, error) {
	if err := p.validateFields(); err != nil {
		return "", err
	}
	b := appendPayload(make([]byte, 0, 512), p)
	if len(b) > MaxLen {
		return "", ErrTooLarge
	}
	return string(b), nil
}

// member is one key/value pair of a JSON object being encoded.
type member struct {
	key   string
	value func([]byte) []byte
}

// appendObject appends a JSON object with the members sorted by key, as
// Python's sort_keys does (code point order, which is also UTF-8 byte
// order).
func appendObject(b []byte, ms []member) []byte {
	slices.SortFunc(ms, func(a, b member) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, m.key)
		b = append(b, ':')
		b = m.value(b)
	}
	return append(b, '}')
}

func strValue(s string) func([]byte) []byte {
	return func(b []byte) []byte { return appendString(b, s) }
}

func intValue(n int) func([]byte) []byte {
	return func(b []byte) []byte { return strconv.AppendInt(b, int64(n), 10) }
}

func boolValue(v bool) func([]byte) []byte {
	return func(b []byte) []byte { return strconv.AppendBool(b, v) }
}

// listValue writes an array of strings, in the given order.
func listValue(l []string) func([]byte) []byte {
	return func(b []byte) []byte {
		b = append(b, '[')
		for i, s := range l {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, s)
		}
		return append(b, ']')
	}
}

func mapValue(m map[string]string) func([]byte) []byte {
	return func(b []byte) []byte {
		ms := make([]member, 0, len(m))
		for k, v := range m {
			ms = append(ms, member{k, strValue(v)})
		}
		return appendObject(b, ms)
	}
}

// appendPayload appends the canonical encoding of p, which must have passed
// validateFields.
func appendPayload(b []byte, p *Payload) []byte {
	ms := []member{
		{"v", intValue(p.V)},
		{"token_sha256", strValue(p.TokenSHA256)},
	}
	if len(p.Envs) > 0 {
		ms = append(ms, member{"envs", mapValue(p.Envs)})
	}
	if p.User != "" {
		ms = append(ms, member{"user", strValue(p.User)})
	}
	if p.Workdir != "" {
		ms = append(ms, member{"workdir", strValue(p.Workdir)})
	}
	if len(p.Metadata) > 0 {
		ms = append(ms, member{"metadata", mapValue(p.Metadata)})
	}
	if l := p.Limits; l != nil {
		ms = append(ms, member{"limits", func(b []byte) []byte {
			return appendObject(b, []member{{"cpu_seconds", intValue(l.CPUSeconds)}})
		}})
	}
	if l := p.Lifecycle; l != nil {
		ms = append(ms, member{"lifecycle", func(b []byte) []byte {
			return appendObject(b, []member{
				{"timeout_s", intValue(l.TimeoutS)},
				{"cap_s", intValue(l.CapS)},
				{"on_timeout", strValue(l.OnTimeout)},
				{"auto_resume", boolValue(l.AutoResume)},
			})
		}})
	}
	if n := p.Network; n != nil {
		ms = append(ms, member{"network", func(b []byte) []byte {
			inner := []member{{"enforce", boolValue(n.Enforce)}}
			if len(n.AllowOut) > 0 {
				inner = append(inner, member{"allow_out", listValue(n.AllowOut)})
			}
			if len(n.DenyOut) > 0 {
				inner = append(inner, member{"deny_out", listValue(n.DenyOut)})
			}
			return appendObject(b, inner)
		}})
	}
	if ps := p.Persist; ps != nil {
		ms = append(ms, member{"persist", func(b []byte) []byte {
			inner := []member{{"bucket", strValue(ps.Bucket)}}
			if ps.KeyPrefix != "" {
				inner = append(inner, member{"key_prefix", strValue(ps.KeyPrefix)})
			}
			return appendObject(b, inner)
		}})
	}
	return appendObject(b, ms)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way Python's json module does
// with ensure_ascii=True: printable ASCII (space through tilde) is copied
// except '"' and '\\'; \n \r \t \b \f use short escapes; everything else,
// DEL included, becomes \uXXXX with lowercase hex, as a UTF-16 surrogate
// pair above U+FFFF. Invalid UTF-8 is written as U+FFFD (validation
// rejects it before encoding).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch c {
			case '"':
				b = append(b, '\\', '"')
			case '\\':
				b = append(b, '\\', '\\')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				if c >= 0x20 && c <= 0x7e {
					b = append(b, c)
				} else {
					b = appendU(b, rune(c))
				}
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			b = appendU(b, r1)
			b = appendU(b, r2)
		} else {
			b = appendU(b, r)
		}
	}
	return append(b, '"')
}

func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u',
		hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}
