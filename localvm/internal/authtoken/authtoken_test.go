package authtoken

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// clock is a settable fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func port(p int) microvmsapi.AllowedPort { return microvmsapi.AllowedPort{Port: &p} }

func portRange(a, b int) microvmsapi.AllowedPort {
	return microvmsapi.AllowedPort{Range: &microvmsapi.PortRange{StartPort: a, EndPort: b}}
}

func allPorts() microvmsapi.AllowedPort { return microvmsapi.AllowedPort{AllPorts: &struct{}{}} }

func testKey(b byte) []byte {
	k := make([]byte, KeySize)
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

func newTestMinter(t testing.TB, c *clock) *Minter {
	t.Helper()
	m, err := NewMinter(testKey(1), c.Now)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mint(t testing.TB, m *Minter, id string, ttl time.Duration, ports ...microvmsapi.AllowedPort) string {
	t.Helper()
	tok, _, err := m.Mint(id, ports, ttl)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return tok
}

const vm = "microvm-11111111-2222-3333-4444-555555555555"

func TestRoundTrip(t *testing.T) {
	c := newClock()
	m := newTestMinter(t, c)
	tok, exp, err := m.Mint(vm, []microvmsapi.AllowedPort{port(8080), portRange(3000, 3005)}, 60*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := c.Now().Add(time.Hour); !exp.Equal(want) {
		t.Errorf("expiry = %v, want %v", exp, want)
	}
	if n := len(strings.Split(tok, ".")); n != 5 {
		t.Fatalf("token has %d parts, want 5 (compact JWE)", n)
	}
	hdr, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hdr), `"alg":"dir"`) || !strings.Contains(string(hdr), `"enc":"A256GCM"`) {
		t.Errorf("protected header = %s", hdr)
	}
	if strings.Contains(tok, vm) {
		t.Error("token shows the microVM id in clear")
	}
	for _, p := range []int{8080, 3000, 3003, 3005} {
		cl, err := m.Verify(tok, vm, p)
		if err != nil {
			t.Fatalf("Verify(port %d): %v", p, err)
		}
		if cl.MicrovmID != vm || !cl.Expiry.Equal(exp) || !cl.IssuedAt.Equal(c.Now()) || len(cl.Ports) != 2 {
			t.Errorf("claims = %+v", cl)
		}
	}
	// Still valid just before expiry.
	c.Advance(time.Hour - time.Nanosecond)
	if _, err := m.Verify(tok, vm, 8080); err != nil {
		t.Errorf("just before expiry: %v", err)
	}
}

func TestExpiryTruncatedToSecond(t *testing.T) {
	c := newClock()
	c.Advance(1500 * time.Millisecond)
	m := newTestMinter(t, c)
	tok, exp, err := m.Mint(vm, []microvmsapi.AllowedPort{port(8080)}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Nanosecond() != 0 {
		t.Errorf("expiry %v not whole seconds", exp)
	}
	cl, err := m.Verify(tok, vm, 8080)
	if err != nil {
		t.Fatal(err)
	}
	if !cl.Expiry.Equal(exp) {
		t.Errorf("claims expiry %v, Mint said %v", cl.Expiry, exp)
	}
}

func TestExpired(t *testing.T) {
	c := newClock()
	m := newTestMinter(t, c)
	tok := mint(t, m, vm, 5*time.Minute, port(8080))
	c.Advance(5 * time.Minute) // exactly at expiry: expired (strict)
	if _, err := m.Verify(tok, vm, 8080); !errors.Is(err, ErrExpired) {
		t.Errorf("at expiry: err = %v, want ErrExpired", err)
	}
	c.Advance(time.Hour)
	if _, err := m.Verify(tok, vm, 8080); !errors.Is(err, ErrExpired) {
		t.Errorf("after expiry: err = %v, want ErrExpired", err)
	}
}

func TestOtherKey(t *testing.T) {
	c := newClock()
	m := newTestMinter(t, c)
	other, err := NewMinter(testKey(2), c.Now)
	if err != nil {
		t.Fatal(err)
	}
	tok := mint(t, other, vm, time.Hour, port(8080))
	if _, err := m.Verify(tok, vm, 8080); !errors.Is(err, ErrMalformed) {
		t.Errorf("err = %v, want ErrMalformed", err)
	}
}

func TestTampered(t *testing.T) {
	c := newClock()
	m := newTestMinter(t, c)
	tok := mint(t, m, vm, time.Hour, port(8080))
	parts := strings.Split(tok, ".")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	cases := map[string]string{}
	for i, name := range []string{"header", "", "iv", "ciphertext", "tag"} {
		if name == "" {
			continue
		}
		p := append([]string(nil), parts...)
		p[i] = flip(p[i], len(p[i])/2)
		cases[name] = strings.Join(p, ".")
	}
	p := append([]string(nil), parts...)
	p[1] = "AAAA" // an encrypted key where "dir" has none
	cases["encrypted key"] = strings.Join(p, ".")
	cases["truncated"] = tok[:len(tok)-3]
	cases["extra part"] = tok + ".AAAA"
	cases["four parts"] = strings.Join(parts[:4], ".")
	cases["padded"] = tok + "=="
	cases["whitespace"] = " " + tok
	cases["empty"] = ""
	cases["oversize"] = tok + strings.Repeat("A", MaxTokenLen)
	for name, bad := range cases {
		if _, err := m.Verify(bad, vm, 8080); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

// encryptWith builds a compact JWE with any algorithms.
func encryptWith(t *testing.T, alg jose.KeyAlgorithm, enc jose.ContentEncryption, key any, plain string) string {
	t.Helper()
	e, err := jose.NewEncrypter(enc, jose.Recipient{Algorithm: alg, Key: key}, nil)
	if err != nil {
		t.Fatalf("NewEncrypter(%s, %s): %v", alg, enc, err)
	}
	obj, err := e.Encrypt([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAlgorithmsRefused(t *testing.T) {
	c := newClock()
	m := newTestMinter(t, c)
	exp := c.Now().Add(time.Hour).Unix()
	good := `{"mid":"` + vm + `","ports":[{"port":8080}],"iat":` + itoa(c.Now().Unix()) + `,"exp":` + itoa(exp) + `}`
	// Sanity: the same plaintext with the right algorithms is accepted.
	if _, err := m.Verify(encryptWith(t, jose.DIRECT, jose.A256GCM, testKey(1), good), vm, 8080); err != nil {
		t.Fatalf("control token refused: %v", err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	valid := strings.Split(mint(t, m, vm, time.Hour, port(8080)), ".")
	withHeader := func(h string) string {
		return strings.Join([]string{b64([]byte(h)), valid[1], valid[2], valid[3], valid[4]}, ".")
	}
	cases := map[string]string{
		"alg none":            withHeader(`{"alg":"none","enc":"A256GCM"}`),
		"enc none":            withHeader(`{"alg":"dir","enc":"none"}`),
		"no enc":              withHeader(`{"alg":"dir"}`),
		"crit":                withHeader(`{"alg":"dir","enc":"A256GCM","crit":["exp"],"exp":1}`),
		"A256KW same key":     encryptWith(t, jose.A256KW, jose.A256GCM, testKey(1), good),
		"A256GCMKW same key":  encryptWith(t, jose.A256GCMKW, jose.A256GCM, testKey(1), good),
		"dir A128GCM":         encryptWith(t, jose.DIRECT, jose.A128GCM, testKey(1)[:16], good),
		"dir A256CBC-HS512":   encryptWith(t, jose.DIRECT, jose.A256CBC_HS512, append(testKey(1), testKey(1)...), good),
		"PBES2":               encryptWith(t, jose.PBES2_HS256_A128KW, jose.A256GCM, testKey(1), good),
		"JWS-shaped":          b64([]byte(`{"alg":"none"}`)) + "." + b64([]byte(good)) + ".",
		"compressed":          compressed(t, good),
		"not JSON":            encryptWith(t, jose.DIRECT, jose.A256GCM, testKey(1), "not json"),
		"JSON array":          encryptWith(t, jose.DIRECT, jose.A256GCM, testKey(1), "[]"),
		"trailing JSON":       encryptWith(t, jose.DIRECT, jose.A256GCM, testKey(1), good+"{}"),
		"unknown field":       encryptWith(t, jose.DIRECT, jose.A256GCM, testKey(1), strings.Replace(good, `"mid"`, `"x":1,"mid"`, 1)),
		"no ports":            encryptWith(t, jose.DIRECT, jose.A256GCM, testKey(1), strings.Replace(good, `[{"port":8080}]`, `[]`, 1)),
		"empty entry":         encryptWith(t, jose.DIRECT, jose.A256GCM, testKey(1), strings.Replace(good, `{"port":8080}`, `{}`, 1)),
		"no microvm":          encryptWith(t, jose.DIRECT, jose.A256GCM, testKey(1), strings.Replace(good, vm, "", 1)),
		"lifetime over 60min": encryptWith(t, jose.DIRECT, jose.A256GCM, testKey(1), strings.Replace(good, `"iat":`+itoa(c.Now().Unix()), `"iat":`+itoa(c.Now().Unix()-1), 1)),
	}
	for name, tok := range cases {
		if _, err := m.Verify(tok, vm, 8080); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func compressed(t *testing.T, plain string) string {
	t.Helper()
	e, err := jose.NewEncrypter(jose.A256GCM, jose.Recipient{Algorithm: jose.DIRECT, Key: testKey(1)},
		&jose.EncrypterOptions{Compression: jose.DEFLATE})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := e.Encrypt([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestWrongMicrovm(t *testing.T) {
	m := newTestMinter(t, newClock())
	tok := mint(t, m, vm, time.Hour, allPorts())
	if _, err := m.Verify(tok, "microvm-other", 8080); !errors.Is(err, ErrWrongMicrovm) {
		t.Errorf("err = %v, want ErrWrongMicrovm", err)
	}
}

func TestPorts(t *testing.T) {
	m := newTestMinter(t, newClock())
	tests := []struct {
		name    string
		ports   []microvmsapi.AllowedPort
		allowed []int
		refused []int
	}{
		{"single", []microvmsapi.AllowedPort{port(8080)}, []int{8080}, []int{8081, 80, 9000, 0, -1, 65536}},
		{"list", []microvmsapi.AllowedPort{port(8080), port(3000)}, []int{8080, 3000}, []int{3001, 9000}},
		{"range", []microvmsapi.AllowedPort{portRange(3000, 3010)}, []int{3000, 3005, 3010}, []int{2999, 3011, 8080}},
		{"one-port range", []microvmsapi.AllowedPort{portRange(4000, 4000)}, []int{4000}, []int{3999, 4001}},
		{"range over hooks", []microvmsapi.AllowedPort{portRange(8000, 9100)}, []int{8000, 8999, 9001, 9100}, []int{9000, 7999, 9101}},
		{"explicit hooks port", []microvmsapi.AllowedPort{port(9000), port(8080)}, []int{8080}, []int{9000}},
		{"allPorts", []microvmsapi.AllowedPort{allPorts()}, []int{1, 22, 8080, 8999, 9001, 65535}, []int{9000, 0, 65536}},
		{"full range", []microvmsapi.AllowedPort{portRange(1, 65535)}, []int{1, 65535}, []int{9000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := mint(t, m, vm, time.Hour, tt.ports...)
			for _, p := range tt.allowed {
				if _, err := m.Verify(tok, vm, p); err != nil {
					t.Errorf("port %d: %v", p, err)
				}
			}
			for _, p := range tt.refused {
				if _, err := m.Verify(tok, vm, p); !errors.Is(err, ErrPortNotAllowed) {
					t.Errorf("port %d: err = %v, want ErrPortNotAllowed", p, err)
				}
			}
		})
	}
}

func TestMintValidation(t *testing.T) {
	m := newTestMinter(t, newClock())
	p := func(n int) *int { return &n }
	seventeen := make([]microvmsapi.AllowedPort, 17)
	for i := range seventeen {
		seventeen[i] = port(1000 + i)
	}
	tests := []struct {
		name  string
		id    string
		ports []microvmsapi.AllowedPort
		ttl   time.Duration
		field string
	}{
		{"empty id", "", []microvmsapi.AllowedPort{port(8080)}, time.Hour, "microvmId"},
		{"ttl zero", vm, []microvmsapi.AllowedPort{port(8080)}, 0, "expirationInMinutes"},
		{"ttl under a minute", vm, []microvmsapi.AllowedPort{port(8080)}, 59 * time.Second, "expirationInMinutes"},
		{"ttl over an hour", vm, []microvmsapi.AllowedPort{port(8080)}, time.Hour + time.Second, "expirationInMinutes"},
		{"negative ttl", vm, []microvmsapi.AllowedPort{port(8080)}, -time.Minute, "expirationInMinutes"},
		{"no ports", vm, nil, time.Hour, "allowedPorts"},
		{"17 entries", vm, seventeen, time.Hour, "allowedPorts"},
		{"empty entry", vm, []microvmsapi.AllowedPort{port(8080), {}}, time.Hour, "allowedPorts[1]"},
		{"port and range", vm, []microvmsapi.AllowedPort{{Port: p(1), Range: &microvmsapi.PortRange{StartPort: 1, EndPort: 2}}}, time.Hour, "allowedPorts[0]"},
		{"port and allPorts", vm, []microvmsapi.AllowedPort{{Port: p(1), AllPorts: &struct{}{}}}, time.Hour, "allowedPorts[0]"},
		{"port 0", vm, []microvmsapi.AllowedPort{port(0)}, time.Hour, "allowedPorts[0].port"},
		{"port 65536", vm, []microvmsapi.AllowedPort{port(65536)}, time.Hour, "allowedPorts[0].port"},
		{"port -1", vm, []microvmsapi.AllowedPort{port(-1)}, time.Hour, "allowedPorts[0].port"},
		{"range reversed", vm, []microvmsapi.AllowedPort{portRange(10, 9)}, time.Hour, "allowedPorts[0].range"},
		{"range from 0", vm, []microvmsapi.AllowedPort{portRange(0, 9)}, time.Hour, "allowedPorts[0].range"},
		{"range to 65536", vm, []microvmsapi.AllowedPort{portRange(1, 65536)}, time.Hour, "allowedPorts[0].range"},
	}
	for _, tt := range tests {
		_, _, err := m.Mint(tt.id, tt.ports, tt.ttl)
		var ie *InvalidError
		if !errors.As(err, &ie) {
			t.Errorf("%s: err = %v, want *InvalidError", tt.name, err)
			continue
		}
		if ie.Field != tt.field || ie.Reason == "" {
			t.Errorf("%s: field %q reason %q, want field %q", tt.name, ie.Field, ie.Reason, tt.field)
		}
	}
	// The limits themselves are accepted.
	sixteen := seventeen[:16]
	for _, ttl := range []time.Duration{time.Minute, time.Hour} {
		if _, _, err := m.Mint(vm, sixteen, ttl); err != nil {
			t.Errorf("ttl %v, 16 entries: %v", ttl, err)
		}
	}
	// The largest legal token stays well under MaxTokenLen.
	big := make([]microvmsapi.AllowedPort, 16)
	for i := range big {
		big[i] = portRange(65535, 65535)
	}
	tok, _, err := m.Mint(vm, big, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) > MaxTokenLen/2 {
		t.Errorf("largest token is %d chars", len(tok))
	}
}

func TestNewMinterKeySize(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := NewMinter(make([]byte, n), nil); err == nil {
			t.Errorf("key of %d bytes accepted", n)
		}
	}
	// The Minter keeps its own copy of the key.
	k := testKey(1)
	m, err := NewMinter(k, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := mint(t, m, vm, time.Minute, port(8080))
	k[0] ^= 0xff
	if _, err := m.Verify(tok, vm, 8080); err != nil {
		t.Errorf("after the caller changed its key slice: %v", err)
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "keys")
	path := filepath.Join(dir, "proxy.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != KeySize {
		t.Fatalf("key is %d bytes", len(k1))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %04o, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %04o, want 0700", di.Mode().Perm())
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(k1) != string(k2) {
		t.Error("second load returned another key")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("dir holds %d entries, want just the key", len(ents))
	}
	if _, err := NewMinter(k1, nil); err != nil {
		t.Error(err)
	}

	for _, mode := range []os.FileMode{0o640, 0o604, 0o660, 0o644, 0o610} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateKey(path); err == nil {
			t.Errorf("mode %04o accepted", mode)
		}
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadOrCreateKey(path); err != nil || string(k) != string(k1) {
		t.Errorf("mode 0400: %v", err)
	}

	for _, size := range []int{0, 16, 31, 33} {
		p := filepath.Join(dir, "size.key")
		os.Remove(p)
		if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateKey(p); err == nil {
			t.Errorf("%d-byte key accepted", size)
		}
	}

	notFile := filepath.Join(dir, "isdir")
	if err := os.Mkdir(notFile, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(notFile); err == nil {
		t.Error("a directory was accepted as key")
	}
}

func TestLoadOrCreateKeyConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k", "key")
	const n = 8
	keys := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys[i], errs[i] = LoadOrCreateKey(path)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if string(keys[i]) != string(keys[0]) {
			t.Fatal("concurrent callers got different keys")
		}
	}
}

func FuzzVerify(f *testing.F) {
	c := newClock()
	m := newTestMinter(f, c)
	f.Add(mint(f, m, vm, time.Hour, port(8080)), 8080)
	f.Add(mint(f, m, vm, time.Minute, portRange(8000, 9100), allPorts()), 9000)
	f.Add(mint(f, m, "x", time.Hour, allPorts()), 1)
	f.Add("", 0)
	f.Add("....", 8080)
	f.Add("eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..AAAAAAAAAAAAAAAA.AAAA.AAAAAAAAAAAAAAAAAAAAAA", 8080)
	f.Add("eyJhbGciOiJub25lIn0.e30.", 8080)
	f.Fuzz(func(t *testing.T, token string, port int) {
		cl, err := m.Verify(token, vm, port)
		if err == nil {
			if cl == nil || cl.MicrovmID != vm || port == microvmsapi.HooksPort || port < 1 || port > 65535 {
				t.Fatalf("accepted: port %d claims %+v", port, cl)
			}
			return
		}
		if cl != nil {
			t.Fatal("claims returned with an error")
		}
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrExpired) &&
			!errors.Is(err, ErrWrongMicrovm) && !errors.Is(err, ErrPortNotAllowed) {
			t.Fatalf("unexpected error %v", err)
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	m := newTestMinter(t, newClock())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				tok, _, err := m.Mint(vm, []microvmsapi.AllowedPort{port(8000 + i)}, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := m.Verify(tok, vm, 8000+i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// The cache of verified tokens changes nothing Verify decides: each call
// checks expiry, microVM and port; a token differing in one byte, or one
// that failed, is decrypted again.
func TestVerifiedCacheStaysStrict(t *testing.T) {
	c := newClock()
	m := newTestMinter(t, c)
	tok := mint(t, m, vm, 5*time.Minute, port(8080))
	for i := 0; i < 3; i++ {
		if _, err := m.Verify(tok, vm, 8080); err != nil {
			t.Fatalf("Verify #%d: %v", i, err)
		}
	}
	if n := m.cachedTokens(); n != 1 {
		t.Fatalf("cached %d tokens, want 1", n)
	}
	if _, err := m.Verify(tok, "microvm-other", 8080); !errors.Is(err, ErrWrongMicrovm) {
		t.Errorf("cached token, other microVM: err = %v", err)
	}
	if _, err := m.Verify(tok, vm, 8081); !errors.Is(err, ErrPortNotAllowed) {
		t.Errorf("cached token, other port: err = %v", err)
	}
	if _, err := m.Verify(tok, vm, microvmsapi.HooksPort); !errors.Is(err, ErrPortNotAllowed) {
		t.Errorf("cached token, hooks port: err = %v", err)
	}
	// One byte changed anywhere: not the cached token.
	for i := 0; i < len(tok); i++ {
		b := []byte(tok)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		if sameDecoded(tok, string(b)) {
			// Only bits base64 does not use changed: the same token
			// spelled otherwise, which decrypts as before (uncached).
			continue
		}
		if _, err := m.Verify(string(b), vm, 8080); err == nil {
			t.Fatalf("token changed at %d verified", i)
		}
	}
	if _, err := m.Verify(tok+"A", vm, 8080); err == nil {
		t.Fatal("token with a byte appended verified")
	}
	if n := m.cachedTokens(); n != 1 {
		t.Fatalf("cached %d tokens after bad ones, want 1", n)
	}
	// What a caller does with the claims does not reach the cache.
	cl, err := m.Verify(tok, vm, 8080)
	if err != nil {
		t.Fatal(err)
	}
	*cl.Ports[0].Port = 9999
	cl.MicrovmID = "microvm-other"
	cl.Expiry = cl.Expiry.Add(time.Hour)
	if _, err := m.Verify(tok, vm, 8080); err != nil {
		t.Fatalf("after mutating returned claims: %v", err)
	}
	// Expiry is honoured for a cached token, which is then dropped.
	c.Advance(5 * time.Minute)
	if _, err := m.Verify(tok, vm, 8080); !errors.Is(err, ErrExpired) {
		t.Errorf("cached token at expiry: err = %v, want ErrExpired", err)
	}
	if n := m.cachedTokens(); n != 0 {
		t.Errorf("cached %d tokens after expiry, want 0", n)
	}
	// An expired token is never remembered.
	if _, err := m.Verify(tok, vm, 8080); !errors.Is(err, ErrExpired) {
		t.Errorf("expired token: err = %v", err)
	}
	if n := m.cachedTokens(); n != 0 {
		t.Errorf("cached %d tokens, want 0", n)
	}
}

// The cache never holds more than MaxCachedTokens tokens.
func TestVerifiedCacheBounded(t *testing.T) {
	c := newClock()
	m := newTestMinter(t, c)
	first := mint(t, m, vm, time.Minute, port(8080))
	if _, err := m.Verify(first, vm, 8080); err != nil {
		t.Fatal(err)
	}
	c.Advance(2 * time.Minute) // first has expired, still cached
	for i := 0; i < MaxCachedTokens+10; i++ {
		tok := mint(t, m, vm, time.Hour, port(8080))
		if _, err := m.Verify(tok, vm, 8080); err != nil {
			t.Fatal(err)
		}
		if n := m.cachedTokens(); n > MaxCachedTokens {
			t.Fatalf("cache holds %d tokens, max %d", n, MaxCachedTokens)
		}
	}
	if _, err := m.Verify(first, vm, 8080); !errors.Is(err, ErrExpired) {
		t.Errorf("first token: err = %v, want ErrExpired", err)
	}
}

// sameDecoded reports whether two compact tokens decode to the same bytes
// part by part.
func sameDecoded(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	if len(pa) != len(pb) {
		return false
	}
	for i := range pa {
		da, err1 := base64.RawURLEncoding.DecodeString(pa[i])
		db, err2 := base64.RawURLEncoding.DecodeString(pb[i])
		if err1 != nil || err2 != nil || string(da) != string(db) {
			return false
		}
	}
	return true
}
