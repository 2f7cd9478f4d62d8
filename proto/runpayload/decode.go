package runpayload

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Decode parses and validates a run hook payload.
//
// Decode is strict. It rejects input longer than MaxLen bytes
// (ErrTooLarge), invalid UTF-8, \u escapes that are lone UTF-16
// surrogates, anything but a single JSON object (trailing data included),
// duplicate keys in any object it interprets, unknown keys at the top level
// and in limits and lifecycle, null or mistyped values, numbers that are not
// plain integer literals, and every violation of the rules checked by
// Payload.Validate. Unknown keys inside network and persist are ignored.
//
// Empty envs and metadata objects decode to nil maps, so that
// Decode(Encode(p)) deep-equals p for every decoded p.
//
// The error is an *Error, or ErrTooLarge.
func Decode(s string) (*Payload, error) {
	if len(s) > MaxLen {
		return nil, ErrTooLarge
	}
	if !utf8.ValidString(s) {
		return nil, fieldErr("", "invalid UTF-8")
	}
	if hasLoneSurrogate(s) {
		return nil, fieldErr("", "invalid unicode escape")
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	d := &decoder{dec: dec}

	tok, err := d.token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, fieldErr("", "not a JSON object")
	}
	p, err := d.payload()
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fieldErr("", "trailing data after object")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// hasLoneSurrogate reports whether s contains a \u escape of a UTF-16
// surrogate that is not part of a high/low pair. encoding/json would
// silently turn such escapes into U+FFFD. A backslash can only occur inside
// a string in valid JSON, and escapes are consumed whole, so scanning the
// raw text is exact for valid input; invalid input fails to parse anyway.
func hasLoneSurrogate(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if i+1 >= len(s) || s[i+1] != 'u' {
			i++ // skip the escaped character
			continue
		}
		r, ok := hex4(s, i+2)
		if !ok {
			return false // malformed escape: let the parser reject it
		}
		switch {
		case 0xd800 <= r && r < 0xdc00:
			if i+12 > len(s) || s[i+6] != '\\' || s[i+7] != 'u' {
				return true
			}
			r2, ok := hex4(s, i+8)
			if !ok || r2 < 0xdc00 || r2 > 0xdfff {
				return true
			}
			i += 11
		case 0xdc00 <= r && r <= 0xdfff:
			return true
		default:
			i += 5
		}
	}
	return false
}

// hex4 parses the four hex digits at s[i:i+4].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

type decoder struct {
	dec *json.Decoder
}

// token returns the next token, hiding encoding/json's error messages,
// which quote input characters.
func (d *decoder) token() (json.Token, error) {
	tok, err := d.dec.Token()
	if err != nil {
		return nil, fieldErr("", "invalid JSON")
	}
	return tok, nil
}

// object reads the members of an object whose '{' has been consumed,
// calling member for each key; member must consume the value. Duplicate
// keys are rejected.
func (d *decoder) object(field string, member func(key string) error) error {
	seen := make(map[string]bool)
	for d.dec.More() {
		tok, err := d.token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fieldErr("", "invalid JSON")
		}
		if seen[key] {
			return fieldErr(field, "duplicate key")
		}
		seen[key] = true
		if err := member(key); err != nil {
			return err
		}
	}
	tok, err := d.token()
	if err != nil {
		return err
	}
	if tok != json.Delim('}') {
		return fieldErr("", "invalid JSON")
	}
	return nil
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func (d *decoder) beginObject(field string) error {
	tok, err := d.token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return fieldErr(field, "must be an object")
	}
	return nil
}

func (d *decoder) str(field string) (string, error) {
	tok, err := d.token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", fieldErr(field, "must be a string")
	}
	return s, nil
}

func (d *decoder) boolean(field string) (bool, error) {
	tok, err := d.token()
	if err != nil {
		return false, err
	}
	v, ok := tok.(bool)
	if !ok {
		return false, fieldErr(field, "must be a boolean")
	}
	return v, nil
}

// integer reads a number written as a plain integer literal (no fraction
// or exponent) that fits in an int.
func (d *decoder) integer(field string) (int, error) {
	tok, err := d.token()
	if err != nil {
		return 0, err
	}
	num, ok := tok.(json.Number)
	if !ok || strings.ContainsAny(string(num), ".eE") {
		return 0, fieldErr(field, "must be an integer")
	}
	n, err := strconv.Atoi(string(num))
	if err != nil {
		return 0, fieldErr(field, "out of range")
	}
	return n, nil
}

// skip consumes one value of any type.
func (d *decoder) skip() error {
	depth := 0
	for {
		tok, err := d.token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// stringList reads an array of strings. An empty array yields nil.
func (d *decoder) stringList(field string) ([]string, error) {
	tok, err := d.token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('[') {
		return nil, fieldErr(field, "must be an array of strings")
	}
	var out []string
	for {
		tok, err := d.token()
		if err != nil {
			return nil, err
		}
		if tok == json.Delim(']') {
			return out, nil
		}
		s, ok := tok.(string)
		if !ok {
			return nil, fieldErr(field, "must be an array of strings")
		}
		if len(out) >= MaxNetworkEntries {
			return nil, fieldErr(field, "too many entries")
		}
		out = append(out, s)
	}
}

// stringMap reads an object of string values. An empty object yields nil.
func (d *decoder) stringMap(field string) (map[string]string, error) {
	if err := d.beginObject(field); err != nil {
		return nil, err
	}
	var m map[string]string
	err := d.object(field, func(key string) error {
		v, err := d.str(field)
		if err != nil {
			return err
		}
		if m == nil {
			m = make(map[string]string)
		}
		m[key] = v
		return nil
	})
	return m, err
}

func (d *decoder) payload() (*Payload, error) {
	p := new(Payload)
	var haveV, haveToken bool
	err := d.object("", func(key string) error {
		var err error
		switch key {
		case "v":
			haveV = true
			p.V, err = d.integer(key)
		case "token_sha256":
			haveToken = true
			p.TokenSHA256, err = d.str(key)
		case "envs":
			p.Envs, err = d.stringMap(key)
		case "user":
			p.User, err = d.str(key)
		case "workdir":
			p.Workdir, err = d.str(key)
		case "metadata":
			p.Metadata, err = d.stringMap(key)
		case "limits":
			p.Limits, err = d.limits(key)
		case "lifecycle":
			p.Lifecycle, err = d.lifecycle(key)
		case "network":
			p.Network, err = d.network(key)
		case "persist":
			p.Persist, err = d.persist(key)
		default:
			return fieldErr("", "unknown top-level key")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !haveV {
		return nil, fieldErr("v", "missing")
	}
	if !haveToken {
		return nil, fieldErr("token_sha256", "missing")
	}
	return p, nil
}

func (d *decoder) limits(field string) (*Limits, error) {
	if err := d.beginObject(field); err != nil {
		return nil, err
	}
	l := new(Limits)
	var have bool
	err := d.object(field, func(key string) error {
		var err error
		switch key {
		case "cpu_seconds":
			have = true
			l.CPUSeconds, err = d.integer(join(field, key))
		default:
			return fieldErr(field, "unknown key")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !have {
		return nil, fieldErr(join(field, "cpu_seconds"), "missing")
	}
	return l, nil
}

func (d *decoder) lifecycle(field string) (*Lifecycle, error) {
	if err := d.beginObject(field); err != nil {
		return nil, err
	}
	l := new(Lifecycle)
	var haveTimeout, haveCap, haveOn, haveAuto bool
	err := d.object(field, func(key string) error {
		var err error
		switch key {
		case "timeout_s":
			haveTimeout = true
			l.TimeoutS, err = d.integer(join(field, key))
		case "cap_s":
			haveCap = true
			l.CapS, err = d.integer(join(field, key))
		case "on_timeout":
			haveOn = true
			l.OnTimeout, err = d.str(join(field, key))
		case "auto_resume":
			haveAuto = true
			l.AutoResume, err = d.boolean(join(field, key))
		default:
			return fieldErr(field, "unknown key")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	switch {
	case !haveTimeout:
		return nil, fieldErr(join(field, "timeout_s"), "missing")
	case !haveCap:
		return nil, fieldErr(join(field, "cap_s"), "missing")
	case !haveOn:
		return nil, fieldErr(join(field, "on_timeout"), "missing")
	case !haveAuto:
		return nil, fieldErr(join(field, "auto_resume"), "missing")
	}
	return l, nil
}

func (d *decoder) network(field string) (*Network, error) {
	if err := d.beginObject(field); err != nil {
		return nil, err
	}
	n := new(Network)
	var have bool
	err := d.object(field, func(key string) error {
		var err error
		switch key {
		case "enforce":
			have = true
			n.Enforce, err = d.boolean(join(field, key))
		case "allow_out":
			n.AllowOut, err = d.stringList(join(field, key))
		case "deny_out":
			n.DenyOut, err = d.stringList(join(field, key))
		default:
			err = d.skip() // forward compatibility
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !have {
		return nil, fieldErr(join(field, "enforce"), "missing")
	}
	return n, nil
}

func (d *decoder) persist(field string) (*Persist, error) {
	if err := d.beginObject(field); err != nil {
		return nil, err
	}
	ps := new(Persist)
	var have bool
	err := d.object(field, func(key string) error {
		var err error
		switch key {
		case "bucket":
			have = true
			ps.Bucket, err = d.str(join(field, key))
		case "key_prefix":
			ps.KeyPrefix, err = d.str(join(field, key))
		default:
			err = d.skip() // forward compatibility
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !have {
		return nil, fieldErr(join(field, "bucket"), "missing")
	}
	return ps, nil
}
