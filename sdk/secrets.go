package rayito

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Limits of secrets.
const (
	// MaxSecretNameLen is the longest secret name.
	MaxSecretNameLen = 256
	// MaxSecretValueBytes is the largest secret value (64 KiB).
	MaxSecretValueBytes = 64 << 10
)

// SecretRef names a secret and, optionally, one of its versions (Version
// "" is the current one).
type SecretRef struct {
	Name    string
	Version string
}

// SecretInfo describes one version of a secret, without its value.
type SecretInfo struct {
	Name      string
	Version   string
	CreatedAt time.Time
}

// Secret is one version of a secret and its value. Its String, GoString,
// Format (every verb) and LogValue never show the value; Value returns
// it.
type Secret struct {
	SecretInfo
	// value is behind two pointers: fmt prints a nested pointer as an
	// address, even where it cannot call Format (a Secret in an
	// unexported field of another struct, with any verb).
	value *secretBytes
}

type secretBytes struct{ b *[]byte }

// newSecret makes a Secret holding value (not copied).
func newSecret(info SecretInfo, value []byte) Secret {
	return Secret{SecretInfo: info, value: &secretBytes{b: &value}}
}

// Value returns a copy of the secret's value.
func (s Secret) Value() []byte {
	return slices.Clone(s.bytes())
}

// bytes is the value itself, not copied.
func (s Secret) bytes() []byte {
	if s.value == nil || s.value.b == nil {
		return nil
	}
	return *s.value.b
}

// String reads rayito.Secret{Name:…, Version:…, Value:<redacted>}.
func (s Secret) String() string {
	return fmt.Sprintf("rayito.Secret{Name:%q, Version:%q, Value:<redacted>}", s.Name, s.Version)
}

// GoString is String: %#v never shows the value either.
func (s Secret) GoString() string { return s.String() }

// Format prints String for every verb (%v, %+v, %#v, %s, %q, %x, ...).
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.String())) }

// LogValue keeps the value out of slog records.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", s.Name), slog.String("version", s.Version), slog.String("value", "<redacted>"))
}

// SecretStore keeps secrets: LocalSecretStore (files on this machine) and
// AWSSecretStore (AWS Secrets Manager) implement it. Names are 1 to 256
// characters of [A-Za-z0-9/_+=.@-], without a leading '/', ".." or "//";
// values are 1 byte to 64 KiB. Errors never carry a value.
type SecretStore interface {
	// CreateSecret stores a new secret; ErrSecretExists if it exists.
	CreateSecret(ctx context.Context, name string, value []byte) (SecretInfo, error)
	// GetSecret reads a version of a secret (the current one for Version
	// ""); ErrSecretNotFound if the secret or the version does not exist.
	GetSecret(ctx context.Context, ref SecretRef) (Secret, error)
	// UpdateSecret stores a new current version; ErrSecretNotFound if the
	// secret does not exist.
	UpdateSecret(ctx context.Context, name string, value []byte) (SecretInfo, error)
	// DeleteSecret removes a secret and all its versions;
	// ErrSecretNotFound if it does not exist.
	DeleteSecret(ctx context.Context, name string) error
	// ListSecrets describes the current version of every secret, sorted
	// by name.
	ListSecrets(ctx context.Context) ([]SecretInfo, error)
}

// errSecretNotFound and errSecretExists are the stores' errors (the
// messages never name the secret).
func errSecretNotFound() error {
	return newError(ReasonSecretNotFound, "rayito: secret not found", ErrNotFound)
}
func errSecretExists() error {
	return newError(ReasonSecretExists, "rayito: secret already exists", ErrAlreadyExists)
}

// ValidateSecretName checks a secret name (see SecretStore); the error
// matches ErrInvalidArgument.
func ValidateSecretName(name string) error {
	switch {
	case name == "":
		return newError(ReasonInvalidArgument, "rayito: empty secret name")
	case len(name) > MaxSecretNameLen:
		return newError(ReasonInvalidArgument, fmt.Sprintf("rayito: secret name longer than %d characters", MaxSecretNameLen))
	case name[0] == '/':
		return newError(ReasonInvalidArgument, "rayito: secret name starts with '/'")
	case strings.Contains(name, ".."):
		return newError(ReasonInvalidArgument, "rayito: secret name contains \"..\"")
	case strings.Contains(name, "//"):
		return newError(ReasonInvalidArgument, "rayito: secret name contains \"//\"")
	}
	for i := 0; i < len(name); i++ {
		if !secretNameChar(name[i]) {
			return newError(ReasonInvalidArgument, "rayito: secret name has a character outside [A-Za-z0-9/_+=.@-]")
		}
	}
	return nil
}

func secretNameChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("/_+=.@-", c) >= 0
}

// validateSecretValue checks a value's size (the message never shows it).
func validateSecretValue(value []byte) error {
	switch {
	case len(value) == 0:
		return newError(ReasonInvalidArgument, "rayito: empty secret value")
	case len(value) > MaxSecretValueBytes:
		return newError(ReasonInvalidArgument, fmt.Sprintf("rayito: secret value larger than %d bytes", MaxSecretValueBytes))
	}
	return nil
}

// validateSecretVersion checks a version id's shape (the local store's
// hex ids, Secrets Manager's UUIDs).
func validateSecretVersion(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 64 {
		return newError(ReasonInvalidArgument, "rayito: secret version longer than 64 characters")
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return newError(ReasonInvalidArgument, "rayito: secret version has a character outside [A-Za-z0-9-]")
		}
	}
	return nil
}

// validateSecretRef checks a reference.
func validateSecretRef(ref SecretRef) error {
	if err := ValidateSecretName(ref.Name); err != nil {
		return err
	}
	return validateSecretVersion(ref.Version)
}

// isCtxErr reports a canceled or expired context.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
