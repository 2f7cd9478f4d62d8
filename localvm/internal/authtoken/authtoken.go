// Package authtoken mints and verifies the microVM auth tokens of the local
// platform: what CreateMicrovmAuthToken returns and what the endpoint proxy
// checks in the x-aws-proxy-auth header.
//
// A token is a real JWE in compact serialization, encrypted with the
// platform key (32 bytes) using "dir" key management and A256GCM content
// encryption, like the opaque tokens of AWS Lambda MicroVMs. Its plaintext
// is a small JSON document naming the microVM, the allowed ports, and the
// issue and expiry times. Because the content is AEAD-encrypted, a token
// that was not minted with the platform key, or that was altered in any
// way, fails to decrypt: there is no MAC to compare and nothing to leak
// through timing.
//
// Whatever a token says, Verify never allows the hooks port
// (microvmsapi.HooksPort, 9000).
//
// Decrypting costs about 45 µs of CPU, paid by every request through the
// endpoint proxy (a keystroke, an exec). Verify therefore remembers the
// claims of the tokens it decrypted successfully, keyed by the SHA-256 of
// the token's exact bytes: a token that differs in any byte is decrypted
// again, a token that failed is never remembered, and every call still
// checks the expiry against the clock, the microVM and the port. The
// cache holds at most MaxCachedTokens tokens; an expired one is dropped
// when it is presented again or when the cache is full.
package authtoken

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// KeySize is the size in bytes of the platform key.
const KeySize = 32

// MaxTokenLen is the longest token Verify accepts, in characters. Longer
// input is refused as malformed before any parsing.
const MaxTokenLen = 4096

// MaxPortEntries is the most entries allowedPorts may hold.
const MaxPortEntries = 16

// MaxCachedTokens bounds the verified tokens Verify remembers (see the
// package comment). SDK clients reuse one token per sandbox and port for
// 45 minutes, so this covers over a thousand busy sandboxes.
const MaxCachedTokens = 4096

// Errors of Verify. Match them with errors.Is.
var (
	// ErrMalformed means the token is not a JWE this platform minted: it
	// is too long, not compact JWE, has a protected header other than
	// exactly alg "dir" and enc "A256GCM", does not decrypt with the
	// platform key (another key, or tampered), or holds unexpected content.
	ErrMalformed = errors.New("authtoken: malformed token")
	// ErrExpired means the token's expiry has passed.
	ErrExpired = errors.New("authtoken: token expired")
	// ErrWrongMicrovm means the token was minted for another microVM.
	ErrWrongMicrovm = errors.New("authtoken: token is for another microVM")
	// ErrPortNotAllowed means the token does not allow the port, or the
	// port is the hooks port, which no token allows.
	ErrPortNotAllowed = errors.New("authtoken: port not allowed")
)

// InvalidError reports an invalid argument of Mint. Field uses the
// names of CreateMicrovmAuthToken's input ("expirationInMinutes",
// "allowedPorts[2].range", ...) so that the API can turn it into a
// ValidationException as is.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string {
	return "invalid " + e.Field + ": " + e.Reason
}

// Claims is the content of a verified token.
type Claims struct {
	MicrovmID string
	Ports     []microvmsapi.AllowedPort
	IssuedAt  time.Time
	Expiry    time.Time
}

// Allows reports whether the claims allow port. It is false for the hooks
// port and for ports outside 1..65535, whatever the entries say.
func (c *Claims) Allows(port int) bool {
	if port < 1 || port > 65535 || port == microvmsapi.HooksPort {
		return false
	}
	for _, p := range c.Ports {
		switch {
		case p.Port != nil:
			if *p.Port == port {
				return true
			}
		case p.Range != nil:
			if p.Range.StartPort <= port && port <= p.Range.EndPort {
				return true
			}
		case p.AllPorts != nil:
			return true
		}
	}
	return false
}

// payload is the JSON plaintext of a token. Times are Unix seconds.
type payload struct {
	MicrovmID string                    `json:"mid"`
	Ports     []microvmsapi.AllowedPort `json:"ports"`
	IssuedAt  int64                     `json:"iat"`
	Expiry    int64                     `json:"exp"`
}

// Minter mints and verifies tokens with one platform key. It is safe for
// concurrent use.
type Minter struct {
	key []byte
	enc jose.Encrypter
	now func() time.Time

	mu       sync.Mutex
	verified map[[sha256.Size]byte]*Claims // by SHA-256 of the token; never mutated
}

// NewMinter returns a Minter using key, which must be KeySize bytes (see
// LoadOrCreateKey). now is the clock; nil means time.Now.
func NewMinter(key []byte, now func() time.Time) (*Minter, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("authtoken: key is %d bytes, want %d", len(key), KeySize)
	}
	k := append([]byte(nil), key...)
	enc, err := jose.NewEncrypter(jose.A256GCM, jose.Recipient{Algorithm: jose.DIRECT, Key: k}, nil)
	if err != nil {
		return nil, fmt.Errorf("authtoken: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	return &Minter{key: k, enc: enc, now: now, verified: make(map[[sha256.Size]byte]*Claims)}, nil
}

// Mint returns a token that lets its bearer reach the listed ports of
// microvmID until expiry, which is now plus ttl, truncated to the second
// (the token's precision).
//
// ttl must be 1 to 60 minutes, and ports must hold 1 to 16 entries, each
// with exactly one of Port, Range and AllPorts; ports are 1..65535 and a
// range's start is at most its end. Violations are reported as
// *InvalidError. AllPorts is accepted, as AWS does, but never opens the
// hooks port (see Verify).
func (m *Minter) Mint(microvmID string, ports []microvmsapi.AllowedPort, ttl time.Duration) (token string, expiry time.Time, err error) {
	if microvmID == "" {
		return "", time.Time{}, &InvalidError{Field: "microvmId", Reason: "must not be empty"}
	}
	if ttl < microvmsapi.MinAuthTokenMinutes*time.Minute || ttl > microvmsapi.MaxAuthTokenMinutes*time.Minute {
		return "", time.Time{}, &InvalidError{
			Field:  "expirationInMinutes",
			Reason: fmt.Sprintf("must be between %d and %d minutes", microvmsapi.MinAuthTokenMinutes, microvmsapi.MaxAuthTokenMinutes),
		}
	}
	if err := ValidatePorts(ports); err != nil {
		return "", time.Time{}, err
	}
	now := m.now()
	expiry = now.Add(ttl).Truncate(time.Second)
	plain, err := json.Marshal(payload{
		MicrovmID: microvmID,
		Ports:     ports,
		IssuedAt:  now.Unix(),
		Expiry:    expiry.Unix(),
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("authtoken: %w", err)
	}
	obj, err := m.enc.Encrypt(plain)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("authtoken: %w", err)
	}
	token, err = obj.CompactSerialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("authtoken: %w", err)
	}
	return token, expiry, nil
}

// ValidatePorts checks allowedPorts as Mint does and returns an
// *InvalidError for the first problem.
func ValidatePorts(ports []microvmsapi.AllowedPort) error {
	if len(ports) < 1 || len(ports) > MaxPortEntries {
		return &InvalidError{Field: "allowedPorts", Reason: fmt.Sprintf("must hold 1 to %d entries", MaxPortEntries)}
	}
	for i, p := range ports {
		field := fmt.Sprintf("allowedPorts[%d]", i)
		n := 0
		if p.Port != nil {
			n++
		}
		if p.Range != nil {
			n++
		}
		if p.AllPorts != nil {
			n++
		}
		if n != 1 {
			return &InvalidError{Field: field, Reason: "must set exactly one of port, range and allPorts"}
		}
		switch {
		case p.Port != nil:
			if !validPort(*p.Port) {
				return &InvalidError{Field: field + ".port", Reason: "must be between 1 and 65535"}
			}
		case p.Range != nil:
			if !validPort(p.Range.StartPort) || !validPort(p.Range.EndPort) {
				return &InvalidError{Field: field + ".range", Reason: "ports must be between 1 and 65535"}
			}
			if p.Range.StartPort > p.Range.EndPort {
				return &InvalidError{Field: field + ".range", Reason: "startPort must not exceed endPort"}
			}
		}
	}
	return nil
}

func validPort(p int) bool { return p >= 1 && p <= 65535 }

// Verify decrypts token and checks that it is unexpired (now strictly
// before its expiry, no clock skew allowed), minted for microvmID, and
// allows port. The hooks port (9000) is never allowed, whatever the token
// says. Errors wrap ErrMalformed, ErrExpired, ErrWrongMicrovm or
// ErrPortNotAllowed, checked in that order.
//
// A token decrypted once is remembered (see the package comment): the
// checks after decryption are made on every call all the same.
func (m *Minter) Verify(token, microvmID string, port int) (*Claims, error) {
	if len(token) == 0 || len(token) > MaxTokenLen {
		return nil, ErrMalformed
	}
	sum := sha256.Sum256([]byte(token))
	m.mu.Lock()
	c := m.verified[sum]
	m.mu.Unlock()
	now := m.now()
	if c == nil {
		var err error
		if c, err = m.decrypt(token); err != nil {
			return nil, err
		}
		if now.Before(c.Expiry) {
			m.remember(sum, c, now)
		}
	}
	if !now.Before(c.Expiry) {
		m.mu.Lock()
		delete(m.verified, sum)
		m.mu.Unlock()
		return nil, ErrExpired
	}
	if c.MicrovmID != microvmID {
		return nil, ErrWrongMicrovm
	}
	if !c.Allows(port) {
		return nil, ErrPortNotAllowed
	}
	return c.clone(), nil
}

// clone deep-copies c, so that the cached claims stay untouched whatever
// a caller does with what Verify returned.
func (c *Claims) clone() *Claims {
	out := *c
	out.Ports = make([]microvmsapi.AllowedPort, len(c.Ports))
	for i, p := range c.Ports {
		if p.Port != nil {
			v := *p.Port
			p.Port = &v
		}
		if p.Range != nil {
			r := *p.Range
			p.Range = &r
		}
		if p.AllPorts != nil {
			p.AllPorts = &struct{}{}
		}
		out.Ports[i] = p
	}
	return &out
}

// remember caches the claims of a token that decrypted. When the cache is
// full it first drops the expired tokens, then, if none had expired,
// everything: the next calls decrypt again, as they would without it.
func (m *Minter) remember(sum [sha256.Size]byte, c *Claims, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.verified) >= MaxCachedTokens {
		for k, v := range m.verified {
			if !now.Before(v.Expiry) {
				delete(m.verified, k)
			}
		}
		if len(m.verified) >= MaxCachedTokens {
			clear(m.verified)
		}
	}
	m.verified[sum] = c
}

// cachedTokens returns how many verified tokens are remembered (tests).
func (m *Minter) cachedTokens() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.verified)
}

var (
	keyAlgs = []jose.KeyAlgorithm{jose.DIRECT}
	encAlgs = []jose.ContentEncryption{jose.A256GCM}
)

// decrypt parses, decrypts and sanity-checks a token.
func (m *Minter) decrypt(token string) (*Claims, error) {
	if len(token) == 0 || len(token) > MaxTokenLen {
		return nil, ErrMalformed
	}
	// Compact JWE is header.key.iv.ciphertext.tag; with "dir" the key part
	// is empty (go-jose would ignore a non-empty one) and the header holds
	// alg and enc only.
	parts := strings.Split(token, ".")
	if len(parts) != 5 || parts[1] != "" || !exactHeader(parts[0]) {
		return nil, ErrMalformed
	}
	obj, err := jose.ParseEncryptedCompact(token, keyAlgs, encAlgs)
	if err != nil {
		return nil, ErrMalformed
	}
	plain, err := obj.Decrypt(m.key)
	if err != nil {
		return nil, ErrMalformed
	}
	var p payload
	dec := json.NewDecoder(strings.NewReader(string(plain)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || dec.More() {
		return nil, ErrMalformed
	}
	// The content is authenticated, so these only catch a minting bug or a
	// key shared with something else.
	if p.MicrovmID == "" || p.Expiry <= p.IssuedAt ||
		p.Expiry-p.IssuedAt > int64(microvmsapi.MaxAuthTokenMinutes*60) ||
		ValidatePorts(p.Ports) != nil {
		return nil, ErrMalformed
	}
	return &Claims{
		MicrovmID: p.MicrovmID,
		Ports:     p.Ports,
		IssuedAt:  time.Unix(p.IssuedAt, 0),
		Expiry:    time.Unix(p.Expiry, 0),
	}, nil
}

// exactHeader reports whether the protected header is exactly what Mint
// writes: alg "dir" and enc "A256GCM", nothing else (no zip, kid, crit...).
func exactHeader(b64 string) bool {
	raw, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return false
	}
	var h map[string]any
	if err := json.Unmarshal(raw, &h); err != nil {
		return false
	}
	return len(h) == 2 && h["alg"] == string(jose.DIRECT) && h["enc"] == string(jose.A256GCM)
}

// NewKey returns KeySize random bytes.
func NewKey() []byte {
	k := make([]byte, KeySize)
	rand.Read(k) // never fails (crypto/rand panics instead)
	return k
}
