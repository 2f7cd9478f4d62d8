package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/internal/hook"
)

const secretCanary = "canary-V4LUE-5ecr3t"

func TestSecretRedaction(t *testing.T) {
	sec := newSecret(Info{Name: "db/pw", Version: "v1"}, []byte(secretCanary))
	cache, _ := NewCache(&memStore{})
	cache.entries[Ref{Name: "db/pw"}] = &secretEntry{done: make(chan struct{}), value: []byte(secretCanary)}
	sbx := hook.Detached(WithSecrets(map[string]Ref{"DB": {Name: "db/pw"}}), WithCache(cache))
	st := hook.Value(sbx, stateKey{}, nil)
	opt := WithSecrets(map[string]Ref{"X": {Name: "x"}})
	for _, v := range []any{sec, &sec, []Secret{sec}, map[string]Secret{"a": sec}, struct{ S Secret }{sec}, struct{ s Secret }{sec}, struct{ s []Secret }{[]Secret{sec}}, cache, st, opt} {
		got := fmt.Sprintf("%v %+v %#v %s %q %x %X %d", v, v, v, v, v, v, v, v)
		dec := strings.Trim(fmt.Sprint([]byte(secretCanary)), "[]")
		if strings.Contains(got, secretCanary) || strings.Contains(got, fmt.Sprintf("%x", secretCanary)) || strings.Contains(got, dec) {
			t.Errorf("%T printed the value: %s", v, got)
		}
	}
	if got := sec.String(); got != `secrets.Secret{Name:"db/pw", Version:"v1", Value:<redacted>}` {
		t.Errorf("String = %s", got)
	}
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "secret", sec)
	if strings.Contains(b.String(), secretCanary) || !strings.Contains(b.String(), "<redacted>") {
		t.Errorf("slog: %s", b.String())
	}
	if string(sec.Value()) != secretCanary {
		t.Error("Value")
	}
}

func TestSecretNameValidation(t *testing.T) {
	for _, ok := range []string{"a", "db/password", "A-Z_0.9+=@x", strings.Repeat("a", 256)} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "a/../b", "a//b", "a b", "é", strings.Repeat("a", 257), "a\x00"} {
		if err := ValidateName(bad); !errors.Is(err, rayito.ErrInvalidArgument) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if err := validateSecretValue(nil); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Error(err)
	}
	big := []byte(strings.Repeat(secretCanary, MaxValueBytes/len(secretCanary)+1))
	if err := validateSecretValue(big); !errors.Is(err, rayito.ErrInvalidArgument) || strings.Contains(err.Error(), secretCanary) {
		t.Error(err)
	}
}

func TestSecretErrorsMatch(t *testing.T) {
	if err := errSecretNotFound(); !errors.Is(err, rayito.ErrSecretNotFound) || !errors.Is(err, rayito.ErrNotFound) || rayito.ReasonOf(err) != rayito.ReasonSecretNotFound {
		t.Error(err)
	}
	if err := errSecretExists(); !errors.Is(err, rayito.ErrSecretExists) || !errors.Is(err, rayito.ErrAlreadyExists) || rayito.ReasonOf(err) != rayito.ReasonSecretExists {
		t.Error(err)
	}
}

// memStore is a Store in memory that counts reads.
type memStore struct {
	mu    sync.Mutex
	vals  map[string][]byte
	gets  atomic.Int32
	delay time.Duration
}

func (m *memStore) CreateSecret(_ context.Context, name string, v []byte) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.vals == nil {
		m.vals = map[string][]byte{}
	}
	if _, ok := m.vals[name]; ok {
		return Info{}, errSecretExists()
	}
	m.vals[name] = v
	return Info{Name: name}, nil
}

func (m *memStore) GetSecret(_ context.Context, ref Ref) (Secret, error) {
	m.gets.Add(1)
	time.Sleep(m.delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[ref.Name]
	if !ok {
		return Secret{}, errSecretNotFound()
	}
	return newSecret(Info{Name: ref.Name}, v), nil
}

func (m *memStore) UpdateSecret(_ context.Context, name string, v []byte) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.vals[name] = v
	return Info{Name: name}, nil
}
func (m *memStore) DeleteSecret(context.Context, string) error  { return nil }
func (m *memStore) ListSecrets(context.Context) ([]Info, error) { return nil, nil }

func TestSecretCacheSingleFlightAndTTL(t *testing.T) {
	st := &memStore{vals: map[string][]byte{"k": []byte("v1")}, delay: 50 * time.Millisecond}
	now := time.Unix(1000, 0)
	var clock sync.Mutex
	c, err := NewCache(st, WithTTL(10*time.Second), withClock(func() time.Time { clock.Lock(); defer clock.Unlock(); return now }))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			v, err := c.Get(context.Background(), Ref{Name: "k"})
			if err != nil || string(v) != "v1" {
				t.Errorf("Get = %q, %v", v, err)
			}
		})
	}
	wg.Wait()
	if n := st.gets.Load(); n != 1 {
		t.Fatalf("%d store calls, want 1", n)
	}
	st.delay = 0
	_, _ = st.UpdateSecret(context.Background(), "k", []byte("v2"))
	if v, _ := c.Get(context.Background(), Ref{Name: "k"}); string(v) != "v1" || st.gets.Load() != 1 {
		t.Fatalf("fresh entry re-read: %q", v)
	}
	clock.Lock()
	now = now.Add(11 * time.Second)
	clock.Unlock()
	if v, _ := c.Get(context.Background(), Ref{Name: "k"}); string(v) != "v2" || st.gets.Load() != 2 {
		t.Fatalf("expired entry: %q", v)
	}
	_, _ = st.UpdateSecret(context.Background(), "k", []byte("v3"))
	c.Invalidate(Ref{Name: "k"})
	if v, _ := c.Get(context.Background(), Ref{Name: "k"}); string(v) != "v3" {
		t.Fatalf("after Invalidate: %q", v)
	}
	if _, err := c.Get(context.Background(), Ref{Name: "missing"}); !errors.Is(err, rayito.ErrSecretNotFound) {
		t.Fatal(err)
	}
	// A mutated copy does not change the cache.
	v, _ := c.Get(context.Background(), Ref{Name: "k"})
	v[0] = 'X'
	if v, _ := c.Get(context.Background(), Ref{Name: "k"}); string(v) != "v3" {
		t.Fatal("cache shares its bytes")
	}
}

func TestSecretCacheTTLBounds(t *testing.T) {
	for _, d := range []time.Duration{0, 999 * time.Millisecond, 86401 * time.Second} {
		if _, err := NewCache(&memStore{}, WithTTL(d)); !errors.Is(err, rayito.ErrInvalidArgument) {
			t.Errorf("%s: %v", d, err)
		}
	}
	c, err := NewCache(&memStore{})
	if err != nil || c.TTL() != DefaultTTL {
		t.Fatal(c, err)
	}
}

// callEnvs is the envs of a command on sbx with the call's envs and
// secrets, through the root's own path.
func callEnvs(ctx context.Context, sbx any, envs map[string]string, secrets map[string]Ref) (map[string]string, error) {
	opts := []any{}
	if envs != nil {
		opts = append(opts, rayito.WithEnvs(envs))
	}
	if secrets != nil {
		opts = append(opts, WithSecrets(secrets))
	}
	return hook.CallEnvs(ctx, sbx, opts...)
}

func TestSecretEnvsMerge(t *testing.T) {
	st := &memStore{vals: map[string][]byte{"db/pw": []byte(secretCanary), "api": []byte("k2"), "webhooks/gh": []byte("w")}}
	sbx := hook.Detached(
		WithStore(st), rayito.WithEnvs(map[string]string{"SBX_ENV": "1"}),
		WithSecrets(map[string]Ref{"DB_PW": {Name: "db/pw"}}),
	)
	ctx := context.Background()
	callMap := map[string]string{"A": "b"}
	envs, err := callEnvs(ctx, sbx, callMap, map[string]Ref{"API": {Name: "api"}})
	if err != nil {
		t.Fatal(err)
	}
	if envs["A"] != "b" || envs["DB_PW"] != secretCanary || envs["API"] != "k2" || len(envs) != 3 {
		t.Fatalf("envs = %d entries", len(envs))
	}
	if _, ok := callMap["DB_PW"]; ok {
		t.Fatal("the call's WithEnvs map was changed")
	}
	// PTY and code options take the same value.
	var _ rayito.PtyOption = WithSecrets(nil)
	var _ rayito.CodeOption = WithSecrets(nil)
	bad := []struct {
		envs    map[string]string
		secrets map[string]Ref
		want    string
	}{
		{map[string]string{"API": "x"}, map[string]Ref{"API": {Name: "api"}}, "API"},
		{nil, map[string]Ref{"SBX_ENV": {Name: "api"}}, "SBX_ENV"},
		{nil, map[string]Ref{"PATH": {Name: "api"}}, "PATH"},
		{nil, map[string]Ref{"AWS_SECRET": {Name: "api"}}, "AWS_SECRET"},
		{nil, map[string]Ref{"LD_PRELOAD": {Name: "api"}}, "LD_PRELOAD"},
		{nil, map[string]Ref{"RAYITO_X": {Name: "api"}}, "RAYITO_X"},
		{nil, map[string]Ref{"1X": {Name: "api"}}, "1X"},
		{nil, map[string]Ref{"HOOK": {Name: "webhooks/gh"}}, "HOOK"},
		{nil, map[string]Ref{"BADREF": {Name: "../x"}}, "BADREF"},
	}
	for _, b := range bad {
		_, err := callEnvs(ctx, sbx, b.envs, b.secrets)
		if !errors.Is(err, rayito.ErrInvalidArgument) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%v: %v", b.secrets, err)
		}
		if err != nil && (strings.Contains(err.Error(), "webhooks/gh") || strings.Contains(err.Error(), secretCanary)) {
			t.Errorf("error names the secret: %v", err)
		}
	}
	_, err = callEnvs(ctx, sbx, nil, map[string]Ref{"GONE": {Name: "gone"}})
	if !errors.Is(err, rayito.ErrSecretNotFound) || !strings.Contains(err.Error(), "GONE") || strings.Contains(err.Error(), "gone") {
		t.Errorf("not found: %v", err)
	}
	// No secrets: the call's map itself, and no store is made.
	plain := hook.Detached()
	m := map[string]string{"A": "1"}
	if got, err := callEnvs(ctx, plain, m, nil); err != nil || len(got) != 1 || hook.Value(plain, stateKey{}, nil) != nil {
		t.Fatal(got, err)
	}
	// The gateway helper reads webhook secrets.
	if v, err := secretValue(ctx, sbx, Ref{Name: "webhooks/gh"}); err != nil || string(v) != "w" {
		t.Fatal(v, err)
	}
	checked := hook.Detached(rayito.WithEnvs(map[string]string{"X": "1"}), WithSecrets(map[string]Ref{"X": {Name: "a"}}))
	if err := hook.Value(checked, stateKey{}, nil).(hook.Checker).CheckSandbox(map[string]string{"X": "1"}); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Fatal(err)
	}
}

// secretValue reads ref through sbx's cache, as the gateway does.
func secretValue(ctx context.Context, sbx any, ref Ref) ([]byte, error) {
	c, err := hook.Value(sbx, stateKey{}, newState).(*state).cacheOf(ctx, sbx.(*rayito.Sandbox))
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, ref)
}

func TestSecretDefaultStoreIsLocal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	env := map[string]string{"RAYITO_SECRETS_DIR": dir, "RAYITO_BACKEND": "local"}
	for k, v := range env {
		t.Setenv(k, v)
	}
	sbx := hook.Detached()
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("store made before use")
	}
	st, _ := NewLocalStore(dir)
	if _, err := st.CreateSecret(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := secretValue(context.Background(), sbx, Ref{Name: "k"}); err != nil || string(v) != "v" {
		t.Fatal(v, err)
	}
}
