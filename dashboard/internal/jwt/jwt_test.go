package jwt

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	region = "eu-west-1"
	pool   = "eu-west-1_TestPool1"
	client = "3n4b5urk1ft4fl3mg5e62d9ado"
)

var (
	keyOnce sync.Once
	key1    *rsa.PrivateKey
	key2    *rsa.PrivateKey
	small   *rsa.PrivateKey
)

func keys(t testing.TB) {
	t.Helper()
	keyOnce.Do(func() {
		var err error
		if key1, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if key2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if small, err = rsa.GenerateKey(rand.Reader, 1024); err != nil {
			panic(err)
		}
	})
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func jwkOf(kid string, k *rsa.PublicKey, use string) map[string]string {
	m := map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
	if use != "" {
		m["use"] = use
	}
	return m
}

// jwksServer serves a JWKS on loopback and counts requests.
type jwksServer struct {
	*httptest.Server
	hits atomic.Int64
	down atomic.Bool
	mu   sync.Mutex
	set  []map[string]string
}

func newJWKS(t *testing.T) *jwksServer {
	keys(t)
	s := &jwksServer{set: []map[string]string{jwkOf("k1", &key1.PublicKey, "sig"), jwkOf("small", &small.PublicKey, "sig"), jwkOf("enc", &key2.PublicKey, "enc")}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if s.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"keys": s.set})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) add(k map[string]string) {
	s.mu.Lock()
	s.set = append(s.set, k)
	s.mu.Unlock()
}

var now = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func newVerifier(t *testing.T, s *jwksServer) *Verifier {
	t.Helper()
	v, err := New(Config{Region: region, PoolID: pool, ClientID: client, JWKSURL: s.URL, Now: func() time.Time { return now }, RefetchInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func iss() string { return "https://cognito-idp." + region + ".amazonaws.com/" + pool }

func goodClaims() map[string]any {
	return map[string]any{
		"sub": "8c1f0f0e-0000-4000-8000-000000000001", "iss": iss(), "token_use": "access", "client_id": client,
		"username": "ana", "exp": now.Add(30 * time.Minute).Unix(), "iat": now.Add(-time.Minute).Unix(), "auth_time": now.Add(-time.Minute).Unix(),
	}
}

func enc(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b64(b)
}

func signRS(hdr, claims any, k *rsa.PrivateKey) string {
	in := enc(hdr) + "." + enc(claims)
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return in + "." + b64(sig)
}

func rs256(kid string) map[string]any { return map[string]any{"alg": "RS256", "kid": kid} }

func TestVerify(t *testing.T) {
	s := newJWKS(t)
	// The attacker's server: a jku/x5u header pointing here must never be dialled.
	var attackerDials atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			attackerDials.Add(1)
			c.Close()
		}
	}()
	attacker := "http://" + ln.Addr().String() + "/jwks.json"
	keys(t)
	with := func(mod func(map[string]any)) map[string]any { c := goodClaims(); mod(c); return c }
	hmacToken := func() string {
		pub, _ := x509.MarshalPKIXPublicKey(&key1.PublicKey)
		in := enc(map[string]any{"alg": "HS256", "kid": "k1"}) + "." + enc(goodClaims())
		m := hmac.New(sha256.New, pub)
		m.Write([]byte(in))
		return in + "." + b64(m.Sum(nil))
	}
	rs384 := func() string {
		in := enc(map[string]any{"alg": "RS384", "kid": "k1"}) + "." + enc(goodClaims())
		sum := sha512.Sum384([]byte(in))
		sig, _ := rsa.SignPKCS1v15(rand.Reader, key1, crypto.SHA384, sum[:])
		return in + "." + b64(sig)
	}
	ps256 := func() string {
		in := enc(map[string]any{"alg": "PS256", "kid": "k1"}) + "." + enc(goodClaims())
		sum := sha256.Sum256([]byte(in))
		sig, _ := rsa.SignPSS(rand.Reader, key1, crypto.SHA256, sum[:], nil)
		return in + "." + b64(sig)
	}
	es256 := func() string {
		ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		in := enc(map[string]any{"alg": "ES256", "kid": "k1"}) + "." + enc(goodClaims())
		sum := sha256.Sum256([]byte(in))
		sig, _ := ecdsa.SignASN1(rand.Reader, ek, sum[:])
		return in + "." + b64(sig)
	}
	good := signRS(rs256("k1"), goodClaims(), key1)
	flip := func(tok string, seg int) string {
		parts := strings.Split(tok, ".")
		b, _ := base64.RawURLEncoding.DecodeString(parts[seg])
		b[len(b)/2] ^= 0x01
		parts[seg] = b64(b)
		return strings.Join(parts, ".")
	}
	big := signRS(rs256("k1"), with(func(c map[string]any) { c["pad"] = strings.Repeat("a", MaxTokenBytes) }), key1)
	cases := []struct {
		name  string
		token string
		want  error
	}{
		{"valid", good, nil},
		{"alg none", enc(map[string]any{"alg": "none", "kid": "k1"}) + "." + enc(goodClaims()) + ".", ErrMalformed},
		{"alg none with a signature", enc(map[string]any{"alg": "none", "kid": "k1"}) + "." + enc(goodClaims()) + "." + b64([]byte("x")), ErrMalformed},
		{"alg missing", signRS(map[string]any{"kid": "k1"}, goodClaims(), key1), ErrMalformed},
		{"alg lower case", signRS(map[string]any{"alg": "rs256", "kid": "k1"}, goodClaims(), key1), ErrMalformed},
		{"HS256 with the public key (key confusion)", hmacToken(), ErrMalformed},
		{"RS384", rs384(), ErrMalformed},
		{"PS256", ps256(), ErrMalformed},
		{"ES256", es256(), ErrMalformed},
		{"unknown kid", signRS(rs256("k9"), goodClaims(), key1), ErrSignature},
		{"kid missing", signRS(map[string]any{"alg": "RS256"}, goodClaims(), key1), ErrMalformed},
		{"signed by another key", signRS(rs256("k1"), goodClaims(), key2), ErrSignature},
		{"key under 2048 bits", signRS(rs256("small"), goodClaims(), small), ErrSignature},
		{"key with use enc", signRS(rs256("enc"), goodClaims(), key2), ErrSignature},
		{"jku to the attacker, signed by the attacker", signRS(map[string]any{"alg": "RS256", "kid": "evil", "jku": attacker, "x5u": attacker}, goodClaims(), key2), ErrSignature},
		{"jwk embedded, signed by it", signRS(map[string]any{"alg": "RS256", "kid": "k1", "jwk": jwkOf("k1", &key2.PublicKey, "sig")}, goodClaims(), key2), ErrSignature},
		{"flipped byte in header", flip(good, 0), ErrMalformed},
		{"flipped byte in payload", flip(good, 1), ErrSignature},
		{"flipped byte in signature", flip(good, 2), ErrSignature},
		{"wrong iss", signRS(rs256("k1"), with(func(c map[string]any) { c["iss"] = iss() + "x" }), key1), ErrClaims},
		{"iss of another pool", signRS(rs256("k1"), with(func(c map[string]any) { c["iss"] = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Other" }), key1), ErrClaims},
		{"wrong client_id", signRS(rs256("k1"), with(func(c map[string]any) { c["client_id"] = "other" }), key1), ErrClaims},
		{"id token", signRS(rs256("k1"), with(func(c map[string]any) { c["token_use"] = "id" }), key1), ErrClaims},
		{"id token with aud", signRS(rs256("k1"), with(func(c map[string]any) { c["token_use"] = "id"; delete(c, "client_id"); c["aud"] = client }), key1), ErrClaims},
		{"exp past", signRS(rs256("k1"), with(func(c map[string]any) { c["exp"] = now.Add(-61 * time.Second).Unix() }), key1), ErrExpired},
		{"exp within skew", signRS(rs256("k1"), with(func(c map[string]any) { c["exp"] = now.Add(-30 * time.Second).Unix() }), key1), nil},
		{"exp missing", signRS(rs256("k1"), with(func(c map[string]any) { delete(c, "exp") }), key1), ErrClaims},
		{"exp a string", signRS(rs256("k1"), with(func(c map[string]any) { c["exp"] = "9999999999" }), key1), ErrClaims},
		{"nbf future", signRS(rs256("k1"), with(func(c map[string]any) { c["nbf"] = now.Add(5 * time.Minute).Unix() }), key1), ErrExpired},
		{"iat future", signRS(rs256("k1"), with(func(c map[string]any) { c["iat"] = now.Add(5 * time.Minute).Unix() }), key1), ErrExpired},
		{"sub missing", signRS(rs256("k1"), with(func(c map[string]any) { delete(c, "sub") }), key1), ErrClaims},
		{"oversized", big, ErrMalformed},
		{"two segments", strings.Join(strings.Split(good, ".")[:2], "."), ErrMalformed},
		{"four segments", good + ".x", ErrMalformed},
		{"padded base64", strings.Replace(good, ".", "=.", 1), ErrMalformed},
		{"standard base64 alphabet", enc(rs256("k1")) + "+/." + strings.SplitN(good, ".", 2)[1], ErrMalformed},
		{"empty", "", ErrMalformed},
		{"crit header", signRS(map[string]any{"alg": "RS256", "kid": "k1", "crit": []string{"exp"}}, goodClaims(), key1), ErrMalformed},
		{"duplicate alg", b64([]byte(`{"alg":"RS256","kid":"k1","alg":"none"}`)) + "." + strings.SplitN(good, ".", 2)[1], ErrMalformed},
		{"header not an object", b64([]byte(`["RS256"]`)) + "." + strings.SplitN(good, ".", 2)[1], ErrMalformed},
	}
	v := newVerifier(t, s)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(context.Background(), tc.token)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if c.Sub == "" || c.ClientID != client {
					t.Fatalf("claims %+v", c)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if c != nil {
				t.Fatal("claims returned with an error")
			}
			if tc.token != "" && strings.Contains(err.Error(), tc.token) {
				t.Fatal("the error carries the token")
			}
		})
	}
	if n := attackerDials.Load(); n != 0 {
		t.Fatalf("the attacker's jku/x5u server was dialled %d times", n)
	}
	// One fetch, plus at most one for the unknown kids within the interval.
	if n := s.hits.Load(); n > 2 {
		t.Fatalf("JWKS fetched %d times, want at most 2 within the refetch interval", n)
	}
}

func TestRefetchUnknownKid(t *testing.T) {
	s := newJWKS(t)
	v := newVerifier(t, s)
	keys(t)
	tok2 := signRS(rs256("k2"), goodClaims(), key2)
	for range 5 {
		if _, err := v.Verify(context.Background(), tok2); !errors.Is(err, ErrSignature) {
			t.Fatalf("err = %v", err)
		}
	}
	if n := s.hits.Load(); n != 1 {
		t.Fatalf("fetched %d times for an unknown kid within the interval, want 1", n)
	}
	// The pool rotates in k2: found after the interval, with one more fetch.
	s.add(jwkOf("k2", &key2.PublicKey, ""))
	now0 := now
	t.Cleanup(func() { now = now0 })
	now = now.Add(61 * time.Second)
	tok2 = signRS(rs256("k2"), goodClaims(), key2)
	if _, err := v.Verify(context.Background(), tok2); err != nil {
		t.Fatalf("after the interval: %v", err)
	}
	if n := s.hits.Load(); n != 2 {
		t.Fatalf("fetched %d times, want 2", n)
	}
	// Known keys come from the cache.
	if _, err := v.Verify(context.Background(), signRS(rs256("k1"), goodClaims(), key1)); err != nil {
		t.Fatal(err)
	}
	if n := s.hits.Load(); n != 2 {
		t.Fatalf("fetched %d times, want 2", n)
	}
}

func TestJWKSUnavailable(t *testing.T) {
	s := newJWKS(t)
	s.down.Store(true)
	v := newVerifier(t, s)
	tok := signRS(rs256("k1"), goodClaims(), key1)
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrJWKSUnavailable) {
		t.Fatalf("JWKS answering 503: err = %v", err)
	}
	s.Close()
	v2 := newVerifier(t, s)
	if _, err := v2.Verify(context.Background(), tok); !errors.Is(err, ErrJWKSUnavailable) {
		t.Fatalf("JWKS closed: err = %v", err)
	}
}

func TestNewConfig(t *testing.T) {
	for _, c := range []Config{
		{Region: "eu-west-1", PoolID: "us-east-1_abc", ClientID: client},
		{Region: "eu-west-1", PoolID: pool, ClientID: "UPPER"},
		{Region: "evil.com/", PoolID: pool, ClientID: client},
		{Region: region, PoolID: pool, ClientID: client, Skew: 5 * time.Minute},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", c, err)
		}
	}
	v, err := New(Config{Region: region, PoolID: pool, ClientID: client})
	if err != nil {
		t.Fatal(err)
	}
	if v.jwks != iss()+"/.well-known/jwks.json" || v.Issuer() != iss() {
		t.Fatalf("jwks %q iss %q", v.jwks, v.Issuer())
	}
}
