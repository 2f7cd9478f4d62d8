// Package secretenv holds the rules for secrets an agent receives as
// environment variables (security model T38): which variable names a
// secret may set, the wire form of RAYITO_SECRET_ENV (names and secret
// names or ARNs, never values), and the redaction of values from the
// host's start-up diagnostics. The CLI's plan applies the same rules
// before anything is written; the agent host applies them again at start.
package secretenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Variable is the environment variable that carries the entries (names
// and secret references only) to the host on AgentCore. The host removes
// it from its environment at start.
const Variable = "RAYITO_SECRET_ENV"

// NamesVariable names, on MicroVMs, the variables of the host's
// environment that hold secret values (the caller put them there): names
// only, comma separated. The host removes it at start.
const NamesVariable = "RAYITO_SECRET_ENV_NAMES"

// MaxEntries bounds the secret variables of one agent.
const MaxEntries = 64

// MaxValueBytes bounds one value.
const MaxValueBytes = 32 << 10

// The codes of an *Error: closed, each with a fixed message.
const (
	CodeInvalid       = "secret_env_invalid"        // a malformed entry or RAYITO_SECRET_ENV
	CodeReserved      = "secret_env_reserved"       // a reserved variable name
	CodeDuplicate     = "secret_env_duplicate"      // a name set twice
	CodeTooMany       = "secret_env_too_many"       // more than MaxEntries
	CodeNotFound      = "secret_env_not_found"      // the secret does not exist
	CodeDenied        = "secret_env_access_denied"  // the role may not read it
	CodeKeyMissing    = "secret_env_key_missing"    // the JSON key is not in the secret
	CodeValueInvalid  = "secret_env_value_invalid"  // a NUL byte, too long, not JSON when a key is asked
	CodeFetchFailed   = "secret_env_fetch_failed"   // any other failure to read it
	CodeMissingValues = "secret_env_values_missing" // a named variable has no value (MicroVMs)
)

var messages = map[string]string{
	CodeInvalid:       "a secret env entry is malformed",
	CodeReserved:      "a secret cannot set a reserved variable",
	CodeDuplicate:     "a variable is set by two secrets",
	CodeTooMany:       "too many secret variables",
	CodeNotFound:      "a secret does not exist",
	CodeDenied:        "the role may not read a secret",
	CodeKeyMissing:    "a secret has no such JSON key",
	CodeValueInvalid:  "a secret value cannot be an environment variable",
	CodeFetchFailed:   "a secret could not be read",
	CodeMissingValues: "a secret variable has no value",
}

// ErrSecretEnv matches every *Error (errors.Is).
var ErrSecretEnv = errors.New("secret env")

// Error is a secret-env failure: a closed Code, and the variable's name
// where one is known (a name is not a secret; the secret's own name or
// ARN is never carried, nor a value).
type Error struct {
	Code string
	Name string
}

func (e *Error) Error() string {
	msg := messages[e.Code]
	if msg == "" {
		msg = "secret env failure"
	}
	if e.Name != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, msg, e.Name)
	}
	return e.Code + ": " + msg
}

// Is matches ErrSecretEnv.
func (e *Error) Is(target error) bool { return target == ErrSecretEnv }

// Entry is one secret variable: Name receives the secret's value (its
// SecretString), or the value of Key when the secret is a JSON object.
type Entry struct {
	Name string `json:"name"`
	// Secret is the secret's name or ARN (Secrets Manager) or its name in
	// the caller's secret store.
	Secret string `json:"secret"`
	Key    string `json:"key,omitempty"`
}

var (
	// Compiled on first use (sync.OnceValue): a counted repetition such as
	// {1,512} compiles to a program of hundreds of KB, which every start of
	// the CLI would otherwise build.
	namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`) })
	keyPattern  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,128}$`) })
)

// reservedPrefixes are prefixes no secret may set.
var reservedPrefixes = []string{"AWS_", "LD_", "RAYITO_", "OTEL_", "BEDROCK_AGENTCORE_"}

// reservedNames are the variables no secret may set: the search paths and
// start-up hooks of the common runtimes, and what the host or the runtime
// sets for the agent.
var reservedNames = []string{
	"PATH", "HOME", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUNBUFFERED", "NODE_OPTIONS", "NODE_PATH",
	"PERL5LIB", "RUBYLIB", "RUBYOPT", "JAVA_TOOL_OPTIONS", "BASH_ENV", "ENV", "SHELL", "IFS",
	"PORT", "HOSTNAME", "PWD", "USER", "LOGNAME", "TMPDIR", "TERM", "LANG", "TZ",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "ALL_PROXY", "all_proxy",
}

// Reserved reports whether name may not be set by a secret: PATH, HOME,
// PYTHONPATH, NODE_OPTIONS and the other search paths and start-up hooks
// of common runtimes, the proxy and CA variables, what the runtime and
// the host set (PORT, HOSTNAME, ...), and anything starting with AWS_,
// LD_, RAYITO_, OTEL_ or BEDROCK_AGENTCORE_. Case matters for the
// variable but not here: PATH and Path are both reserved.
func Reserved(name string) bool {
	up := strings.ToUpper(name)
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(up, p) {
			return true
		}
	}
	return slices.ContainsFunc(reservedNames, func(r string) bool { return strings.EqualFold(r, name) })
}

// ReservedTable is the reserved names and prefixes (a prefix ends in
// "_*"), for documentation and the plan.
func ReservedTable() []string {
	var out []string
	for _, n := range reservedNames {
		if n == strings.ToUpper(n) {
			out = append(out, n)
		}
	}
	for _, p := range reservedPrefixes {
		out = append(out, p+"*")
	}
	return out
}

// CheckName checks a variable name: a portable name ([A-Za-z_][A-Za-z0-9_]*,
// at most 128 bytes) that is not reserved.
func CheckName(name string) error {
	if !namePattern().MatchString(name) {
		return &Error{Code: CodeInvalid}
	}
	if Reserved(name) {
		return &Error{Code: CodeReserved, Name: name}
	}
	return nil
}

// Check checks entries: each name valid and not reserved, no name twice,
// a secret reference of at most 2048 printable bytes, a JSON key of at most
// 128 of [A-Za-z0-9_.-], at most MaxEntries.
func Check(entries []Entry) error {
	if len(entries) > MaxEntries {
		return &Error{Code: CodeTooMany}
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if err := CheckName(e.Name); err != nil {
			return err
		}
		if seen[strings.ToUpper(e.Name)] {
			return &Error{Code: CodeDuplicate, Name: e.Name}
		}
		seen[strings.ToUpper(e.Name)] = true
		if !printable(e.Secret) || len(e.Secret) > 2048 {
			return &Error{Code: CodeInvalid, Name: e.Name}
		}
		if e.Key != "" && !keyPattern().MatchString(e.Key) {
			return &Error{Code: CodeInvalid, Name: e.Name}
		}
	}
	return nil
}

func printable(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r > 0x7e {
			return false
		}
	}
	return true
}

// Encode is RAYITO_SECRET_ENV's value for entries (checked first).
func Encode(entries []Entry) (string, error) {
	if err := Check(entries); err != nil {
		return "", err
	}
	b, err := json.Marshal(entries)
	return string(b), err
}

// Decode reads RAYITO_SECRET_ENV's value (at most 256 KiB, a JSON array
// of entries, nothing unknown) and checks it.
func Decode(raw string) ([]Entry, error) {
	if len(raw) > 256<<10 {
		return nil, &Error{Code: CodeInvalid}
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var out []Entry
	if err := dec.Decode(&out); err != nil || dec.More() {
		return nil, &Error{Code: CodeInvalid}
	}
	if err := Check(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Value is the variable's value from a secret's string: the whole string,
// or Key's value when Key is set (the secret must be a JSON object whose
// Key is a string). A value with a NUL byte or over MaxValueBytes is
// refused.
func (e Entry) Value(secret string) (string, error) {
	v := secret
	if e.Key != "" {
		var obj map[string]any
		if json.Unmarshal([]byte(secret), &obj) != nil {
			return "", &Error{Code: CodeValueInvalid, Name: e.Name}
		}
		raw, ok := obj[e.Key]
		if !ok {
			return "", &Error{Code: CodeKeyMissing, Name: e.Name}
		}
		s, ok := raw.(string)
		if !ok {
			return "", &Error{Code: CodeValueInvalid, Name: e.Name}
		}
		v = s
	}
	if strings.IndexByte(v, 0) >= 0 || len(v) > MaxValueBytes {
		return "", &Error{Code: CodeValueInvalid, Name: e.Name}
	}
	return v, nil
}

// Redactor replaces secret values in text with "[redacted]". Every value
// is replaced, however short: a one-byte value redacts every occurrence of
// that byte, which makes a diagnostic unreadable rather than leak it.
type Redactor struct {
	values []string
}

// NewRedactor redacts values (empty ones are ignored), longest first so
// that a value containing another is replaced whole.
func NewRedactor(values []string) *Redactor {
	var vs []string
	for _, v := range values {
		if v != "" && !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	slices.SortFunc(vs, func(a, b string) int { return len(b) - len(a) })
	return &Redactor{values: vs}
}

// Redact returns s with every occurrence of a value replaced, in one pass
// from the left (the longest value matching at a position wins; a
// replacement is never matched again).
func (r *Redactor) Redact(s string) string {
	if r == nil || len(r.values) == 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		matched := false
		for _, v := range r.values {
			if strings.HasPrefix(s[i:], v) {
				b.WriteString("[redacted]")
				i += len(v)
				matched = true
				break
			}
		}
		if !matched {
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}
