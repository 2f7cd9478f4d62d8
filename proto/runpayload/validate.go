package runpayload

import (
	"path"
	"strings"
	"unicode/utf8"

	"github.com/rayito-dev/rayito/proto/accesstoken"
)

// Validate reports whether p satisfies every rule of the payload format and
// fits in MaxLen characters once encoded. Encode and Decode apply exactly
// these rules. The error is an *Error, or ErrTooLarge.
func (p *Payload) Validate() error {
	if err := p.validateFields(); err != nil {
		return err
	}
	if len(appendPayload(nil, p)) > MaxLen {
		return ErrTooLarge
	}
	return nil
}

func (p *Payload) validateFields() error {
	if p == nil {
		return fieldErr("", "nil payload")
	}
	if p.V != Version {
		return fieldErr("v", "unsupported version")
	}
	if !accesstoken.ValidDigest(p.TokenSHA256) {
		return fieldErr("token_sha256", "must be 64 lowercase hex characters")
	}
	if err := validateEnvs(p.Envs); err != nil {
		return err
	}
	if p.User != "" && !validUser(p.User) {
		return fieldErr("user", "invalid user name")
	}
	if p.Workdir != "" {
		if err := validateWorkdir(p.Workdir); err != nil {
			return err
		}
	}
	if err := validateMetadata(p.Metadata); err != nil {
		return err
	}
	if l := p.Limits; l != nil {
		if l.CPUSeconds < 1 || l.CPUSeconds > MaxCPUSeconds {
			return fieldErr("limits.cpu_seconds", "out of range")
		}
	}
	if err := validateLifecycle(p.Lifecycle); err != nil {
		return err
	}
	if err := validatePersist(p.Persist); err != nil {
		return err
	}
	return validateNetwork(p.Network)
}

// validateNetwork checks the network entries' count and characters (rayd
// checks their syntax).
func validateNetwork(n *Network) error {
	if n == nil {
		return nil
	}
	if len(n.AllowOut)+len(n.DenyOut) > MaxNetworkEntries {
		return fieldErr("network", "too many entries")
	}
	for field, list := range map[string][]string{"network.allow_out": n.AllowOut, "network.deny_out": n.DenyOut} {
		for _, e := range list {
			if e == "" || len(e) > MaxNetworkEntryLen {
				return fieldErr(field, "entry empty or too long")
			}
			for i := 0; i < len(e); i++ {
				if e[i] <= ' ' || e[i] > '~' {
					return fieldErr(field, "entry with characters other than printable ASCII")
				}
			}
		}
	}
	return nil
}

func validateEnvs(envs map[string]string) error {
	if len(envs) > MaxEnvs {
		return fieldErr("envs", "too many entries")
	}
	for k, v := range envs {
		if !validEnvKey(k) {
			return fieldErr("envs", "invalid key")
		}
		if err := checkText(v, MaxEnvValueLen); err != "" {
			return fieldErr("envs", "invalid value: "+err)
		}
	}
	return nil
}

// validEnvKey reports whether k matches [A-Za-z_][A-Za-z0-9_]* and is at
// most MaxEnvKeyLen bytes.
func validEnvKey(k string) bool {
	if k == "" || len(k) > MaxEnvKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', c == '_':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// validUser reports whether u matches ^[a-z_][a-z0-9_-]{0,31}$.
func validUser(u string) bool {
	if u == "" || len(u) > MaxUserLen {
		return false
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case 'a' <= c && c <= 'z', c == '_':
		case ('0' <= c && c <= '9' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

func validateWorkdir(w string) error {
	if len(w) > MaxWorkdirLen {
		return fieldErr("workdir", "too long")
	}
	if !utf8.ValidString(w) || strings.IndexByte(w, 0) >= 0 {
		return fieldErr("workdir", "invalid characters")
	}
	if !path.IsAbs(w) || path.Clean(w) != w {
		return fieldErr("workdir", "must be an absolute, clean path")
	}
	return nil
}

func validateMetadata(md map[string]string) error {
	if len(md) > MaxMetadata {
		return fieldErr("metadata", "too many entries")
	}
	for k, v := range md {
		if !validMetaKey(k) {
			return fieldErr("metadata", "invalid key")
		}
		if err := checkText(v, MaxMetaValueLen); err != "" {
			return fieldErr("metadata", "invalid value: "+err)
		}
	}
	return nil
}

// validMetaKey reports whether k is 1..MaxMetaKeyLen bytes of printable
// ASCII (space through tilde).
func validMetaKey(k string) bool {
	if k == "" || len(k) > MaxMetaKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkText checks that s is valid UTF-8 without NUL and at most max bytes.
// It returns a reason, or "" if s is fine.
func checkText(s string, max int) string {
	switch {
	case len(s) > max:
		return "too long"
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains NUL"
	}
	return ""
}

func validateLifecycle(l *Lifecycle) error {
	if l == nil {
		return nil
	}
	if l.TimeoutS < 1 || l.TimeoutS > MaxTimeoutS {
		return fieldErr("lifecycle.timeout_s", "out of range")
	}
	if l.CapS < MinCapS || l.CapS > MaxCapS {
		return fieldErr("lifecycle.cap_s", "out of range")
	}
	if l.TimeoutS > l.CapS {
		return fieldErr("lifecycle.timeout_s", "exceeds cap_s")
	}
	switch l.OnTimeout {
	case OnTimeoutKill:
		if l.AutoResume {
			return fieldErr("lifecycle.auto_resume", "requires on_timeout pause")
		}
	case OnTimeoutPause:
	default:
		return fieldErr("lifecycle.on_timeout", "must be kill or pause")
	}
	return nil
}

func validatePersist(p *Persist) error {
	if p == nil {
		return nil
	}
	if len(p.Bucket) < MinBucketLen || len(p.Bucket) > MaxBucketLen {
		return fieldErr("persist.bucket", "length out of range")
	}
	if !ValidBucketChars(p.Bucket) {
		return fieldErr("persist.bucket", "invalid characters")
	}
	if err := checkText(p.KeyPrefix, MaxKeyPrefixLen); err != "" {
		return fieldErr("persist.key_prefix", err)
	}
	return nil
}

// ValidBucketChars reports whether a persistence bucket name holds only
// the characters the payload accepts: a-z, 0-9, '.' and '-'.
func ValidBucketChars(bucket string) bool {
	for i := 0; i < len(bucket); i++ {
		c := bucket[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
