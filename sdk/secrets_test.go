package rayito

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
)

const secretCanary = "canary-V4LUE-5ecr3t"

func TestSecretRedaction(t *testing.T) {
	sec := newSecret(SecretInfo{Name: "db/pw", Version: "v1"}, []byte(secretCanary))
	cache, _ := NewSecretCache(&memStore{})
	cache.entries[SecretRef{Name: "db/pw"}] = &secretEntry{done: make(chan struct{}), value: []byte(secretCanary)}
	cfg := newConfig([]Option{WithSecrets(map[string]SecretRef{"DB": {Name: "db/pw"}}), WithSecretCache(cache)})
	cc := commandOpts([]CommandOption{WithSecrets(map[string]SecretRef{"X": {Name: "x"}})})
	for _, v := range []any{sec, &sec, []Secret{sec}, map[string]Secret{"a": sec}, struct{ S Secret }{sec}, struct{ s Secret }{sec}, struct{ s []Secret }{[]Secret{sec}}, cache, cfg, cc, cfg.secretConfig} {
		got := fmt.Sprintf("%v %+v %#v %s %q %x %X %d", v, v, v, v, v, v, v, v)
		dec := strings.Trim(fmt.Sprint([]byte(secretCanary)), "[]")
		if strings.Contains(got, secretCanary) || strings.Contains(got, fmt.Sprintf("%x", secretCanary)) || strings.Contains(got, dec) {
			t.Errorf("%T printed the value: %s", v, got)
		}
	}
	if got := sec.String(); got != `rayito.Secret{Name:"db/pw", Version:"v1", Value:<redacted>}` {
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
		if err := ValidateSecretName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "a/../b", "a//b", "a b", "é", strings.Repeat("a", 257), "a\x00"} {
		if err := ValidateSecretName(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if err := validateSecretValue(nil); !errors.Is(err, ErrInvalidArgument) {
		t.Error(err)
	}
	big := []byte(strings.Repeat(secretCanary, MaxSecretValueBytes/len(secretCanary)+1))
	if err := validateSecretValue(big); !errors.Is(err, ErrInvalidArgument) || strings.Contains(err.Error(), secretCanary) {
		t.Error(err)
	}
}

func TestSecretErrorsMatch(t *testing.T) {
	if err := errSecretNotFound(); !errors.Is(err, ErrSecretNotFound) || !errors.Is(err, ErrNotFound) || ReasonOf(err) != ReasonSecretNotFound {
		t.Error(err)
	}
	if err := errSecretExists(); !errors.Is(err, ErrSecretExists) || !errors.Is(err, ErrAlreadyExists) || ReasonOf(err) != ReasonSecretExists {
		t.Error(err)
	}
}

// memStore is a SecretStore in memory that counts reads.
type memStore struct {
	mu    sync.Mutex
	vals  map[string][]byte
	gets  atomic.Int32
	delay time.Duration
}

func (m *memStore) CreateSecret(_ context.Context, name string, v []byte) (SecretInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.vals == nil {
		m.vals = map[string][]byte{}
	}
	if _, ok := m.vals[name]; ok {
		return SecretInfo{}, errSecretExists()
	}
	m.vals[name] = v
	return SecretInfo{Name: name}, nil
}

func (m *memStore) GetSecret(_ context.Context, ref SecretRef) (Secret, error) {
	m.gets.Add(1)
	time.Sleep(m.delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[ref.Name]
	if !ok {
		return Secret{}, errSecretNotFound()
	}
	return newSecret(SecretInfo{Name: ref.Name}, v), nil
}

func (m *memStore) UpdateSecret(_ context.Context, name string, v []byte) (SecretInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.vals[name] = v
	return SecretInfo{Name: name}, nil
}
func (m *memStore) DeleteSecret(context.Context, string) error        { return nil }
func (m *memStore) ListSecrets(context.Context) ([]SecretInfo, error) { return nil, nil }

func TestSecretCacheSingleFlightAndTTL(t *testing.T) {
	st := &memStore{vals: map[string][]byte{"k": []byte("v1")}, delay: 50 * time.Millisecond}
	now := time.Unix(1000, 0)
	var clock sync.Mutex
	c, err := NewSecretCache(st, WithSecretTTL(10*time.Second), withSecretClock(func() time.Time { clock.Lock(); defer clock.Unlock(); return now }))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			v, err := c.Get(context.Background(), SecretRef{Name: "k"})
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
	if v, _ := c.Get(context.Background(), SecretRef{Name: "k"}); string(v) != "v1" || st.gets.Load() != 1 {
		t.Fatalf("fresh entry re-read: %q", v)
	}
	clock.Lock()
	now = now.Add(11 * time.Second)
	clock.Unlock()
	if v, _ := c.Get(context.Background(), SecretRef{Name: "k"}); string(v) != "v2" || st.gets.Load() != 2 {
		t.Fatalf("expired entry: %q", v)
	}
	_, _ = st.UpdateSecret(context.Background(), "k", []byte("v3"))
	c.Invalidate(SecretRef{Name: "k"})
	if v, _ := c.Get(context.Background(), SecretRef{Name: "k"}); string(v) != "v3" {
		t.Fatalf("after Invalidate: %q", v)
	}
	if _, err := c.Get(context.Background(), SecretRef{Name: "missing"}); !errors.Is(err, ErrSecretNotFound) {
		t.Fatal(err)
	}
	// A mutated copy does not change the cache.
	v, _ := c.Get(context.Background(), SecretRef{Name: "k"})
	v[0] = 'X'
	if v, _ := c.Get(context.Background(), SecretRef{Name: "k"}); string(v) != "v3" {
		t.Fatal("cache shares its bytes")
	}
}

func TestSecretCacheTTLBounds(t *testing.T) {
	for _, d := range []time.Duration{0, 999 * time.Millisecond, 86401 * time.Second} {
		if _, err := NewSecretCache(&memStore{}, WithSecretTTL(d)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", d, err)
		}
	}
	c, err := NewSecretCache(&memStore{})
	if err != nil || c.TTL() != DefaultSecretTTL {
		t.Fatal(c, err)
	}
}

func TestSecretEnvsMerge(t *testing.T) {
	st := &memStore{vals: map[string][]byte{"db/pw": []byte(secretCanary), "api": []byte("k2"), "webhooks/gh": []byte("w")}}
	sbx := &Sandbox{cfg: newConfig([]Option{
		WithSecretStore(st), WithEnvs(map[string]string{"SBX_ENV": "1"}),
		WithSecrets(map[string]SecretRef{"DB_PW": {Name: "db/pw"}}),
	})}
	ctx := context.Background()
	cc := commandOpts([]CommandOption{WithEnvs(map[string]string{"A": "b"}), WithSecrets(map[string]SecretRef{"API": {Name: "api"}})})
	envs, err := sbx.secretEnvs(ctx, cc.envs, cc.secrets)
	if err != nil {
		t.Fatal(err)
	}
	if envs["A"] != "b" || envs["DB_PW"] != secretCanary || envs["API"] != "k2" || len(envs) != 3 {
		t.Fatalf("envs = %d entries", len(envs))
	}
	if _, ok := cc.envs["DB_PW"]; ok {
		t.Fatal("the call's WithEnvs map was changed")
	}
	// PTY and code options take the same value.
	pc := ptyOpts([]PtyOption{WithSecrets(map[string]SecretRef{"API": {Name: "api"}})})
	kc := codeOpts([]CodeOption{WithSecrets(map[string]SecretRef{"API": {Name: "api"}})})
	if pc.secrets["API"].Name != "api" || kc.secrets["API"].Name != "api" {
		t.Fatal("pty/code plumbing")
	}
	bad := []struct {
		envs    map[string]string
		secrets map[string]SecretRef
		want    string
	}{
		{map[string]string{"API": "x"}, map[string]SecretRef{"API": {Name: "api"}}, "API"},
		{nil, map[string]SecretRef{"SBX_ENV": {Name: "api"}}, "SBX_ENV"},
		{nil, map[string]SecretRef{"PATH": {Name: "api"}}, "PATH"},
		{nil, map[string]SecretRef{"AWS_SECRET": {Name: "api"}}, "AWS_SECRET"},
		{nil, map[string]SecretRef{"LD_PRELOAD": {Name: "api"}}, "LD_PRELOAD"},
		{nil, map[string]SecretRef{"RAYITO_X": {Name: "api"}}, "RAYITO_X"},
		{nil, map[string]SecretRef{"1X": {Name: "api"}}, "1X"},
		{nil, map[string]SecretRef{"HOOK": {Name: "webhooks/gh"}}, "HOOK"},
		{nil, map[string]SecretRef{"BADREF": {Name: "../x"}}, "BADREF"},
	}
	for _, b := range bad {
		_, err := sbx.secretEnvs(ctx, b.envs, b.secrets)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%v: %v", b.secrets, err)
		}
		if err != nil && (strings.Contains(err.Error(), "webhooks/gh") || strings.Contains(err.Error(), secretCanary)) {
			t.Errorf("error names the secret: %v", err)
		}
	}
	_, err = sbx.secretEnvs(ctx, nil, map[string]SecretRef{"GONE": {Name: "gone"}})
	if !errors.Is(err, ErrSecretNotFound) || !strings.Contains(err.Error(), "GONE") || strings.Contains(err.Error(), "gone") {
		t.Errorf("not found: %v", err)
	}
	// No secrets: the call's map itself, and no store is made.
	plain := &Sandbox{cfg: newConfig(nil)}
	m := map[string]string{"A": "1"}
	if got, err := plain.secretEnvs(ctx, m, nil); err != nil || len(got) != 1 || plain.cfg.secretCache != nil {
		t.Fatal(got, err)
	}
	// The gateway helper reads webhook secrets.
	if v, err := sbx.secretValue(ctx, SecretRef{Name: "webhooks/gh"}); err != nil || string(v) != "w" {
		t.Fatal(v, err)
	}
	if err := newConfig([]Option{WithEnvs(map[string]string{"X": "1"}), WithSecrets(map[string]SecretRef{"X": {Name: "a"}})}).checkSecrets(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatal(err)
	}
}

func TestSecretDefaultStoreIsLocal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	env := map[string]string{"RAYITO_SECRETS_DIR": dir, "RAYITO_BACKEND": "local"}
	cfg := newConfig([]Option{withGetenv(func(k string) string { return env[k] })})
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("store made before use")
	}
	st, _ := NewLocalSecretStore(dir)
	if _, err := st.CreateSecret(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	sbx := &Sandbox{cfg: cfg}
	if v, err := sbx.secretValue(context.Background(), SecretRef{Name: "k"}); err != nil || string(v) != "v" {
		t.Fatal(v, err)
	}
}
