package secrets

import (
	"context"
	"errors"
	"fmt"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestMemorySecretStore(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	if _, err := s.CreateSecret(ctx, "b-key", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSecret(ctx, "b-key", []byte("x")); !errors.Is(err, rayito.ErrSecretExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := s.CreateSecret(ctx, "a-key", []byte("w")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateSecret(ctx, "b-key", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSecret(ctx, Ref{Name: "b-key"})
	if err != nil || string(got.Value()) != "v2" {
		t.Fatalf("get: %v", err)
	}
	if fmt.Sprint(got) == "v2" || fmt.Sprintf("%#v", got) == "v2" {
		t.Fatal("a Secret printed its value")
	}
	if _, err := s.GetSecret(ctx, Ref{Name: "b-key", Version: "9"}); !errors.Is(err, rayito.ErrSecretNotFound) {
		t.Fatalf("unknown version: %v", err)
	}
	list, err := s.ListSecrets(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "a-key" || list[1].Name != "b-key" {
		t.Fatalf("list %v %v", list, err)
	}
	if err := s.DeleteSecret(ctx, "b-key"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSecret(ctx, Ref{Name: "b-key"}); !errors.Is(err, rayito.ErrSecretNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := s.UpdateSecret(ctx, "nope", []byte("x")); !errors.Is(err, rayito.ErrSecretNotFound) {
		t.Fatalf("update of a missing secret: %v", err)
	}
	if _, err := s.CreateSecret(ctx, "../bad", []byte("x")); err == nil {
		t.Fatal("a bad name was accepted")
	}
}
