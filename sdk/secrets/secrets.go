package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Limits of secrets.
const (
	// MaxNameLen is the longest secret name.
	MaxNameLen = 256
	// MaxValueBytes is the largest secret value (64 KiB).
	MaxValueBytes = 64 << 10
)

// Ref names a secret and, optionally, one of its versions (Version
// "" is the current one).
type Ref struct {
	Name    string
	Version string
}

// Info describes one version of a secret, without its value.
type Info struct {
	Name      string
	Version   string
	CreatedAt time.Time
}

// Secret is one version of a secret and its value. Its String, GoString,
// Format (every verb) and LogValue never show the value; Value returns
// it.
type Secret struct {
	Info
	// value is behind two pointers: fmt prints a nested pointer as an
	// address, even where it cannot call Format (a Secret in an
	// unexported field of another struct, with any verb).
	value *secretBytes
}

type secretBytes struct{ b *[]byte }

// newSecret makes a Secret holding value (not copied).
func newSecret(info Info, value []byte) Secret {
	return Secret{Info: info, value: &secretBytes{b: &value}}
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
	return fmt.Sprintf("secrets.Secret{Name:%q, Version:%q, Value:<redacted>}", s.Name, s.Version)
}

// GoString is String: %#v never shows the value either.
func (s Secret) GoString() string { return s.String() }

// Format prints String for every verb (%v, %+v, %#v, %s, %q, %x, ...).
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.String())) }

// LogValue keeps the value out of slog records.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", s.Name), slog.String("version", s.Version), slog.String("value", "<redacted>"))
}

// Store keeps secrets: LocalStore (files on this machine) and
// AWSStore (AWS Secrets Manager) implement it. Names are 1 to 256
// characters of [A-Za-z0-9/_+=.@-], without a leading '/', ".." or "//";
// values are 1 byte to 64 KiB. Errors never carry a value.
type Store interface {
	// CreateSecret stores a new secret; rayito.ErrSecretExists if it exists.
	CreateSecret(ctx context.Context, name string, value []byte) (Info, error)
	// GetSecret reads a version of a secret (the current one for Version
	// ""); rayito.ErrSecretNotFound if the secret or the version does not exist.
	GetSecret(ctx context.Context, ref Ref) (Secret, error)
	// UpdateSecret stores a new current version; rayito.ErrSecretNotFound if the
	// secret does not exist.
	UpdateSecret(ctx context.Context, name string, value []byte) (Info, error)
	// DeleteSecret removes a secret and all its versions;
	// rayito.ErrSecretNotFound if it does not exist.
	DeleteSecret(ctx context.Context, name string) error
	// ListSecrets describes the current version of every secret, sorted
	// by name.
	ListSecrets(ctx context.Context) ([]Info, error)
}

// errSecretNotFound and errSecretExists are the stores' errors (the
// messages never name the secret).
func errSecretNotFound() error {
	return rayito.NewError(rayito.ReasonSecretNotFound, "rayito: secret not found", rayito.ErrNotFound)
}
func errSecretExists() error {
	return rayito.NewError(rayito.ReasonSecretExists, "rayito: secret already exists", rayito.ErrAlreadyExists)
}

// ValidateName checks a secret name (see Store); the error
// matches rayito.ErrInvalidArgument.
func ValidateName(name string) error {
	switch {
	case name == "":
		return rayito.NewError(rayito.ReasonInvalidArgument, "rayito: empty secret name")
	case len(name) > MaxNameLen:
		return rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("rayito: secret name longer than %d characters", MaxNameLen))
	case name[0] == '/':
		return rayito.NewError(rayito.ReasonInvalidArgument, "rayito: secret name starts with '/'")
	case strings.Contains(name, ".."):
		return rayito.NewError(rayito.ReasonInvalidArgument, "rayito: secret name contains \"..\"")
	case strings.Contains(name, "//"):
		return rayito.NewError(rayito.ReasonInvalidArgument, "rayito: secret name contains \"//\"")
	}
	for i := 0; i < len(name); i++ {
		if !secretNameChar(name[i]) {
			return rayito.NewError(rayito.ReasonInvalidArgument, "rayito: secret name has a character outside [A-Za-z0-9/_+=.@-]")
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
		return rayito.NewError(rayito.ReasonInvalidArgument, "rayito: empty secret value")
	case len(value) > MaxValueBytes:
		return rayito.NewError(rayito.ReasonInvalidArgument, fmt.Sprintf("rayito: secret value larger than %d bytes", MaxValueBytes))
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
		return rayito.NewError(rayito.ReasonInvalidArgument, "rayito: secret version longer than 64 characters")
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return rayito.NewError(rayito.ReasonInvalidArgument, "rayito: secret version has a character outside [A-Za-z0-9-]")
		}
	}
	return nil
}

// validateSecretRef checks a reference.
func validateSecretRef(ref Ref) error {
	if err := ValidateName(ref.Name); err != nil {
		return err
	}
	return validateSecretVersion(ref.Version)
}

// isCtxErr reports a canceled or expired context.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
