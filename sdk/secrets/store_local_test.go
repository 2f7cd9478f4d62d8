package secrets

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestLocalSecretStore(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a", "secrets")
	s, err := NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", st.Mode())
	}
	info, err := s.CreateSecret(ctx, "db/pw", []byte(secretCanary))
	if err != nil || len(info.Version) != 16 || info.Name != "db/pw" || info.CreatedAt.IsZero() {
		t.Fatal(info, err)
	}
	if _, err := s.CreateSecret(ctx, "db/pw", []byte("x")); !errors.Is(err, rayito.ErrSecretExists) {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), "pw") || strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("file %s", e.Name())
		}
		if fi, _ := e.Info(); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", e.Name(), fi.Mode())
		}
	}
	var versions []string
	versions = append(versions, info.Version)
	for i := range 11 {
		in, err := s.UpdateSecret(ctx, "db/pw", []byte{byte('a' + i)})
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, in.Version)
	}
	got, err := s.GetSecret(ctx, Ref{Name: "db/pw"})
	if err != nil || string(got.Value()) != "k" || got.Version != versions[11] {
		t.Fatal(got, err)
	}
	if got, err := s.GetSecret(ctx, Ref{Name: "db/pw", Version: versions[2]}); err != nil || string(got.Value()) != "b" {
		t.Fatal(got, err)
	}
	// Only the last 10 versions are kept.
	if _, err := s.GetSecret(ctx, Ref{Name: "db/pw", Version: versions[1]}); !errors.Is(err, rayito.ErrSecretNotFound) {
		t.Fatal(err)
	}
	if _, err := s.UpdateSecret(ctx, "nope", []byte("x")); !errors.Is(err, rayito.ErrSecretNotFound) {
		t.Fatal(err)
	}
	if _, err := s.CreateSecret(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListSecrets(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "a" || list[1].Name != "db/pw" || list[1].Version != versions[11] {
		t.Fatal(list, err)
	}
	if err := s.DeleteSecret(ctx, "db/pw"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSecret(ctx, "db/pw"); !errors.Is(err, rayito.ErrSecretNotFound) {
		t.Fatal(err)
	}
	if _, err := s.GetSecret(ctx, Ref{Name: "db/pw"}); !errors.Is(err, rayito.ErrSecretNotFound) {
		t.Fatal(err)
	}
	for _, bad := range []string{"../../etc/passwd", "/abs", "a//b"} {
		if _, err := s.CreateSecret(ctx, bad, []byte(secretCanary)); !errors.Is(err, rayito.ErrInvalidArgument) || strings.Contains(err.Error(), secretCanary) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := s.CreateSecret(ctx, "big", make([]byte, MaxValueBytes+1)); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Fatal(err)
	}
}

func TestLocalSecretStoreRefusesUnsafeDirs(t *testing.T) {
	base := t.TempDir()
	wide := filepath.Join(base, "wide")
	if err := os.Mkdir(wide, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(wide, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := NewLocalStore(wide); !errors.Is(err, rayito.ErrPermissionDenied) {
		t.Errorf("world-writable: %v", err)
	}
	target := filepath.Join(base, "target")
	_ = os.Mkdir(target, 0o700)
	link := filepath.Join(base, "link")
	_ = os.Symlink(target, link)
	if _, err := NewLocalStore(link); !errors.Is(err, rayito.ErrPermissionDenied) {
		t.Errorf("symlink: %v", err)
	}
	file := filepath.Join(base, "file")
	_ = os.WriteFile(file, nil, 0o600)
	if _, err := NewLocalStore(file); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Errorf("file: %v", err)
	}
}

func TestLocalSecretStoreNoPartialFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o700)
	s, err := NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSecret(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		t.Skip("root writes a read-only directory")
	}
	_ = os.Chmod(dir, 0o500)
	defer os.Chmod(dir, 0o700)
	if _, err := s.UpdateSecret(ctx, "k", []byte("v2")); err == nil {
		t.Fatal("write to a read-only directory")
	}
	_ = os.Chmod(dir, 0o700)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("left %s", e.Name())
		}
	}
	if got, err := s.GetSecret(ctx, Ref{Name: "k"}); err != nil || string(got.Value()) != "v" {
		t.Fatal(got, err)
	}
}

func TestDefaultLocalSecretDir(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RAYITO_SECRETS_DIR": "/s", "XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/s"},
		{map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/rayito/secrets"},
		{map[string]string{"HOME": "/h"}, "/h/.config/rayito/secrets"},
	} {
		got, err := DefaultLocalDir(func(k string) string { return c.env[k] })
		if err != nil || got != c.want {
			t.Errorf("%v: %q, %v", c.env, got, err)
		}
	}
	if _, err := DefaultLocalDir(func(string) string { return "" }); err == nil {
		t.Error("no HOME")
	}
}
