package rayito

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemorySecretStore is a SecretStore in the process's memory, with one
// version per secret (an update replaces it): for programs that receive
// the values they hand to sandboxes (a gateway that serves another API)
// and for tests. Nothing is written anywhere. It is safe for concurrent
// use.
type MemorySecretStore struct {
	mu      sync.Mutex
	secrets map[string]memorySecret
}

type memorySecret struct {
	info  SecretInfo
	value []byte
}

var _ SecretStore = (*MemorySecretStore)(nil)

// NewMemorySecretStore returns an empty MemorySecretStore.
func NewMemorySecretStore() *MemorySecretStore {
	return &MemorySecretStore{secrets: map[string]memorySecret{}}
}

func (s *MemorySecretStore) put(name string, value []byte) SecretInfo {
	info := SecretInfo{Name: name, Version: "1", CreatedAt: time.Now()}
	s.secrets[name] = memorySecret{info: info, value: slices.Clone(value)}
	return info
}

// CreateSecret stores a new secret; ErrSecretExists if it exists.
func (s *MemorySecretStore) CreateSecret(ctx context.Context, name string, value []byte) (SecretInfo, error) {
	if err := checkPut(ctx, name, value); err != nil {
		return SecretInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.secrets[name]; ok {
		return SecretInfo{}, errSecretExists()
	}
	return s.put(name, value), nil
}

// UpdateSecret replaces a secret's value; ErrSecretNotFound if it does
// not exist.
func (s *MemorySecretStore) UpdateSecret(ctx context.Context, name string, value []byte) (SecretInfo, error) {
	if err := checkPut(ctx, name, value); err != nil {
		return SecretInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.secrets[name]; !ok {
		return SecretInfo{}, errSecretNotFound()
	}
	return s.put(name, value), nil
}

// GetSecret reads a secret (Version "" or "1").
func (s *MemorySecretStore) GetSecret(ctx context.Context, ref SecretRef) (Secret, error) {
	if err := validateSecretRef(ref); err != nil {
		return Secret{}, err
	}
	if err := ctx.Err(); err != nil {
		return Secret{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.secrets[ref.Name]
	if !ok || ref.Version != "" && ref.Version != m.info.Version {
		return Secret{}, errSecretNotFound()
	}
	return newSecret(m.info, slices.Clone(m.value)), nil
}

// DeleteSecret removes a secret; ErrSecretNotFound if it does not exist.
func (s *MemorySecretStore) DeleteSecret(ctx context.Context, name string) error {
	if err := ValidateSecretName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.secrets[name]; !ok {
		return errSecretNotFound()
	}
	delete(s.secrets, name)
	return nil
}

// ListSecrets describes every secret, sorted by name.
func (s *MemorySecretStore) ListSecrets(ctx context.Context) ([]SecretInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SecretInfo, 0, len(s.secrets))
	for _, m := range s.secrets {
		out = append(out, m.info)
	}
	slices.SortFunc(out, func(a, b SecretInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
