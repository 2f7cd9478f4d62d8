package secrets

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemoryStore is a Store in the process's memory, with one
// version per secret (an update replaces it): for programs that receive
// the values they hand to sandboxes (a gateway that serves another API)
// and for tests. Nothing is written anywhere. It is safe for concurrent
// use.
type MemoryStore struct {
	mu      sync.Mutex
	secrets map[string]memorySecret
}

type memorySecret struct {
	info  Info
	value []byte
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{secrets: map[string]memorySecret{}}
}

func (s *MemoryStore) put(name string, value []byte) Info {
	info := Info{Name: name, Version: "1", CreatedAt: time.Now()}
	s.secrets[name] = memorySecret{info: info, value: slices.Clone(value)}
	return info
}

// CreateSecret stores a new secret; rayito.ErrSecretExists if it exists.
func (s *MemoryStore) CreateSecret(ctx context.Context, name string, value []byte) (Info, error) {
	if err := checkPut(ctx, name, value); err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.secrets[name]; ok {
		return Info{}, errSecretExists()
	}
	return s.put(name, value), nil
}

// UpdateSecret replaces a secret's value; rayito.ErrSecretNotFound if it does
// not exist.
func (s *MemoryStore) UpdateSecret(ctx context.Context, name string, value []byte) (Info, error) {
	if err := checkPut(ctx, name, value); err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.secrets[name]; !ok {
		return Info{}, errSecretNotFound()
	}
	return s.put(name, value), nil
}

// GetSecret reads a secret (Version "" or "1").
func (s *MemoryStore) GetSecret(ctx context.Context, ref Ref) (Secret, error) {
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

// DeleteSecret removes a secret; rayito.ErrSecretNotFound if it does not exist.
func (s *MemoryStore) DeleteSecret(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
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
func (s *MemoryStore) ListSecrets(ctx context.Context) ([]Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Info, 0, len(s.secrets))
	for _, m := range s.secrets {
		out = append(out, m.info)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
