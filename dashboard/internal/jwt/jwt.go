// Package jwt verifies Amazon Cognito access tokens for the dashboard
// stack's Lambda with the standard library only. The verifier chooses the
// algorithm (RS256); the token never does. Keys come only from the user
// pool's JWKS URL, which the verifier builds from the region and pool id:
// jku, x5u, jwk and x5c in a token's header are never read or fetched.
//
// Checks, in order: size and shape (three unpadded base64url segments, at
// most MaxTokenBytes in all), the header (strict JSON, alg RS256, a kid),
// the key (looked up by kid in the cached JWKS, refetched at most once per
// RefetchInterval for an unknown kid), the RS256 signature over the exact
// encoded "header.payload", then the claims: iss exactly the pool's,
// token_use access, client_id the configured client, exp in the future
// (Skew allowed), nbf and iat not in the future, sub present.
//
// Nothing is logged; errors never carry the token.
package jwt

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Errors; each returned error wraps exactly one of them.
var (
	ErrMalformed       = errors.New("jwt: malformed token")
	ErrSignature       = errors.New("jwt: bad signature or unknown key")
	ErrExpired         = errors.New("jwt: token expired or not yet valid")
	ErrClaims          = errors.New("jwt: claims do not match")
	ErrJWKSUnavailable = errors.New("jwt: the user pool's keys cannot be fetched")
	ErrConfig          = errors.New("jwt: bad verifier configuration")
)

// Limits.
const (
	MaxTokenBytes   = 8 << 10
	MaxJWKSBytes    = 64 << 10
	MaxSkew         = 60 * time.Second
	MinRSABits      = 2048
	maxHeaderBytes  = 1 << 10
	defaultRefetch  = 60 * time.Second
	defaultJWKSWait = 5 * time.Second
)

var (
	regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)
	poolRE   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}_[0-9A-Za-z]{1,55}$`)
	clientRE = regexp.MustCompile(`^[0-9a-z]{1,128}$`)
	kidRE    = regexp.MustCompile(`^[A-Za-z0-9+/=_\-]{1,128}$`)
)

// Config configures a Verifier.
type Config struct {
	Region   string // the user pool's region, e.g. eu-west-1
	PoolID   string // e.g. eu-west-1_AbCdEf123
	ClientID string // the app client the tokens must name

	// JWKSURL overrides the pool's JWKS URL (tests on loopback only);
	// Issuer overrides the expected iss with it.
	JWKSURL string
	Issuer  string

	HTTPClient      *http.Client     // default: 5 s timeout, no redirects
	RefetchInterval time.Duration    // min time between fetches (default 60 s)
	Skew            time.Duration    // allowed clock skew for exp, <= MaxSkew (default MaxSkew)
	Now             func() time.Time // default time.Now
}

// Claims are the verified claims the dashboard uses.
type Claims struct {
	Sub      string
	Username string
	ClientID string
	Expires  time.Time
}

// Verifier verifies access tokens; safe for concurrent use.
type Verifier struct {
	cfg    Config
	iss    string
	jwks   string
	client *http.Client

	mu        sync.Mutex
	keys      map[string]*rsa.PublicKey
	fetched   bool
	lastFetch time.Time
}

// New checks cfg and returns a Verifier. It fetches nothing yet.
func New(cfg Config) (*Verifier, error) {
	if !regionRE.MatchString(cfg.Region) {
		return nil, fmt.Errorf("%w: region", ErrConfig)
	}
	if !poolRE.MatchString(cfg.PoolID) || !strings.HasPrefix(cfg.PoolID, cfg.Region+"_") {
		return nil, fmt.Errorf("%w: user pool id", ErrConfig)
	}
	if !clientRE.MatchString(cfg.ClientID) {
		return nil, fmt.Errorf("%w: client id", ErrConfig)
	}
	if cfg.Skew < 0 || cfg.Skew > MaxSkew {
		return nil, fmt.Errorf("%w: skew must be 0 to %s", ErrConfig, MaxSkew)
	}
	if cfg.Skew == 0 {
		cfg.Skew = MaxSkew
	}
	if cfg.RefetchInterval <= 0 {
		cfg.RefetchInterval = defaultRefetch
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &Verifier{cfg: cfg, client: cfg.HTTPClient}
	v.iss = "https://cognito-idp." + cfg.Region + ".amazonaws.com/" + cfg.PoolID
	if cfg.Issuer != "" {
		v.iss = cfg.Issuer
	}
	v.jwks = v.iss + "/.well-known/jwks.json"
	if cfg.JWKSURL != "" {
		v.jwks = cfg.JWKSURL
	}
	if v.client == nil {
		v.client = &http.Client{
			Timeout:       defaultJWKSWait,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return v, nil
}

// Issuer is the iss tokens must carry.
func (v *Verifier) Issuer() string { return v.iss }

// header is the strict JOSE header; unknown members (jku, x5u, jwk, x5c,
// ...) are ignored, never fetched.
type header struct {
	Alg  *string         `json:"alg"`
	Kid  *string         `json:"kid"`
	Typ  *string         `json:"typ"`
	Crit json.RawMessage `json:"crit"`
}

type claims struct {
	Iss      string          `json:"iss"`
	Sub      string          `json:"sub"`
	TokenUse string          `json:"token_use"`
	ClientID string          `json:"client_id"`
	Username string          `json:"username"`
	Exp      json.RawMessage `json:"exp"`
	Nbf      json.RawMessage `json:"nbf"`
	Iat      json.RawMessage `json:"iat"`
}

// Parsed is a token split and decoded but not verified.
type Parsed struct {
	Kid       string
	Signed    []byte // the exact encoded header.payload
	Signature []byte
	Payload   []byte
}

// Parse checks the token's shape and header without any key; it is the
// fuzzed parser. The verifier's choice of algorithm is enforced here.
func Parse(token string) (*Parsed, error) {
	if len(token) == 0 || len(token) > MaxTokenBytes {
		return nil, fmt.Errorf("%w: size", ErrMalformed)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return nil, fmt.Errorf("%w: not three segments", ErrMalformed)
	}
	seg := make([][]byte, 3)
	for i, p := range parts {
		b, err := base64.RawURLEncoding.Strict().DecodeString(p)
		if err != nil {
			return nil, fmt.Errorf("%w: segment %d is not unpadded base64url", ErrMalformed, i+1)
		}
		seg[i] = b
	}
	if len(seg[0]) > maxHeaderBytes {
		return nil, fmt.Errorf("%w: header too large", ErrMalformed)
	}
	var h header
	if err := strictJSON(seg[0], &h); err != nil {
		return nil, fmt.Errorf("%w: header", ErrMalformed)
	}
	if h.Alg == nil || *h.Alg != "RS256" {
		return nil, fmt.Errorf("%w: algorithm not allowed", ErrMalformed)
	}
	if h.Crit != nil {
		return nil, fmt.Errorf("%w: crit not supported", ErrMalformed)
	}
	if h.Typ != nil && *h.Typ != "JWT" {
		return nil, fmt.Errorf("%w: typ", ErrMalformed)
	}
	if h.Kid == nil || !kidRE.MatchString(*h.Kid) {
		return nil, fmt.Errorf("%w: kid", ErrMalformed)
	}
	return &Parsed{Kid: *h.Kid, Signed: []byte(parts[0] + "." + parts[1]), Signature: seg[2], Payload: seg[1]}, nil
}

// strictJSON decodes one JSON object with no trailing data and no
// duplicate keys at the top level.
func strictJSON(b []byte, v any) error {
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not an object")
	}
	var m map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(b))
	tok, err := d.Token()
	if err != nil || tok != json.Delim('{') {
		return errors.New("not an object")
	}
	m = map[string]json.RawMessage{}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return err
		}
		ks, ok := k.(string)
		if !ok {
			return errors.New("bad key")
		}
		if _, dup := m[ks]; dup {
			return errors.New("duplicate key")
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return err
		}
		m[ks] = raw
	}
	if _, err := d.Token(); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return json.Unmarshal(b, v)
}

// Verify checks token completely and returns its claims.
func (v *Verifier) Verify(ctx context.Context, token string) (*Claims, error) {
	p, err := Parse(token)
	if err != nil {
		return nil, err
	}
	key, err := v.key(ctx, p.Kid)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(p.Signed)
	if len(p.Signature) != key.Size() || rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], p.Signature) != nil {
		return nil, ErrSignature
	}
	var c claims
	if err := strictJSON(p.Payload, &c); err != nil {
		return nil, fmt.Errorf("%w: payload", ErrMalformed)
	}
	if c.Iss != v.iss {
		return nil, fmt.Errorf("%w: iss", ErrClaims)
	}
	if c.TokenUse != "access" {
		return nil, fmt.Errorf("%w: token_use", ErrClaims)
	}
	if c.ClientID != v.cfg.ClientID {
		return nil, fmt.Errorf("%w: client_id", ErrClaims)
	}
	if c.Sub == "" || len(c.Sub) > 128 {
		return nil, fmt.Errorf("%w: sub", ErrClaims)
	}
	now := v.cfg.Now()
	exp, ok, err := numericDate(c.Exp)
	if err != nil || !ok {
		return nil, fmt.Errorf("%w: exp", ErrClaims)
	}
	if !now.Before(exp.Add(v.cfg.Skew)) {
		return nil, fmt.Errorf("%w: exp", ErrExpired)
	}
	for _, f := range []json.RawMessage{c.Nbf, c.Iat} {
		t, ok, err := numericDate(f)
		if err != nil {
			return nil, fmt.Errorf("%w: nbf/iat", ErrClaims)
		}
		if ok && t.After(now.Add(v.cfg.Skew)) {
			return nil, fmt.Errorf("%w: nbf/iat in the future", ErrExpired)
		}
	}
	return &Claims{Sub: c.Sub, Username: c.Username, ClientID: c.ClientID, Expires: exp}, nil
}

// numericDate reads a NumericDate (integer seconds); ok is false when absent.
func numericDate(raw json.RawMessage) (time.Time, bool, error) {
	if raw == nil {
		return time.Time{}, false, nil
	}
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return time.Time{}, false, errors.New("not a number")
	}
	var n json.Number
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&n); err != nil {
		return time.Time{}, false, err
	}
	i, err := n.Int64()
	if err != nil || i < 0 || i > 1<<40 {
		return time.Time{}, false, errors.New("bad date")
	}
	return time.Unix(i, 0), true, nil
}

// key returns the pool's key kid, fetching the JWKS the first time and
// again for an unknown kid at most once per RefetchInterval.
func (v *Verifier) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[kid]; ok {
		return k, nil
	}
	now := v.cfg.Now()
	if v.fetched && now.Sub(v.lastFetch) < v.cfg.RefetchInterval {
		return nil, ErrSignature
	}
	if !v.fetched && !v.lastFetch.IsZero() && now.Sub(v.lastFetch) < time.Second {
		// The last attempt failed a moment ago: do not hammer the endpoint.
		return nil, ErrJWKSUnavailable
	}
	v.lastFetch = now
	keys, err := v.fetch(ctx)
	if err != nil {
		return nil, err
	}
	v.keys, v.fetched = keys, true
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return nil, ErrSignature
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
}

func (v *Verifier) fetch(ctx context.Context) (map[string]*rsa.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.jwks, nil)
	if err != nil {
		return nil, ErrJWKSUnavailable
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, ErrJWKSUnavailable
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, ErrJWKSUnavailable
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil || len(body) > MaxJWKSBytes {
		return nil, ErrJWKSUnavailable
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, ErrJWKSUnavailable
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" || (k.Use != "" && k.Use != "sig") || (k.Alg != "" && k.Alg != "RS256") || !kidRE.MatchString(k.Kid) {
			continue
		}
		pub, err := rsaKey(k.N, k.E)
		if err != nil {
			continue
		}
		keys[k.Kid] = pub
	}
	if len(keys) == 0 {
		return nil, ErrJWKSUnavailable
	}
	return keys, nil
}

func rsaKey(n64, e64 string) (*rsa.PublicKey, error) {
	nb, err := base64.RawURLEncoding.DecodeString(n64)
	if err != nil || len(nb) == 0 || nb[0] == 0 {
		return nil, errors.New("bad n")
	}
	eb, err := base64.RawURLEncoding.DecodeString(e64)
	if err != nil || len(eb) == 0 || len(eb) > 4 {
		return nil, errors.New("bad e")
	}
	n := new(big.Int).SetBytes(nb)
	if n.BitLen() < MinRSABits || n.BitLen() > 8192 {
		return nil, errors.New("key size")
	}
	e := 0
	for _, b := range eb {
		e = e<<8 | int(b)
	}
	if e < 3 || e%2 == 0 {
		return nil, errors.New("bad e")
	}
	return &rsa.PublicKey{N: n, E: e}, nil
}
