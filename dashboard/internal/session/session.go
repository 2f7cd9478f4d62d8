// Package session is the local dashboard's login: one single-use,
// expiring startup token (the URL the CLI prints) exchanged for one
// session cookie, and the session's CSRF token. Secrets are 32 random
// bytes, compared in constant time.
package session

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// DefaultTTL is how long the startup token can be exchanged.
const DefaultTTL = 5 * time.Minute

// CookiePrefix starts the session cookie's name; the port follows, since
// browsers do not keep cookies apart by port.
const CookiePrefix = "rayito_dashboard_"

// Errors of Exchange.
var (
	ErrSpent   = errors.New("session: the startup token was already used")
	ErrExpired = errors.New("session: the startup token expired")
	ErrInvalid = errors.New("session: wrong startup token")
)

// Manager holds the startup token and the sessions it opened. It is safe
// for concurrent use.
type Manager struct {
	cookieName string
	ttl        time.Duration
	now        func() time.Time

	mu       sync.Mutex
	startup  string
	issued   time.Time
	spent    bool
	sessions []session
}

type session struct{ cookie, csrf string }

// New returns the Manager of a dashboard on port, with a fresh startup
// token valid for ttl (0: DefaultTTL). now may be nil (time.Now).
func New(port int, ttl time.Duration, now func() time.Time) *Manager {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Manager{cookieName: CookiePrefix + strconv.Itoa(port), ttl: ttl, now: now, startup: Random(), issued: now()}
}

// Random is 32 random bytes, base64url without padding.
func Random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// CookieName is the session cookie's name.
func (m *Manager) CookieName() string { return m.cookieName }

// StartupToken is the token of the startup URL.
func (m *Manager) StartupToken() string { return m.startup }

// Exchange spends the startup token: the right one, within its TTL and
// never used, opens a session and returns its cookie. A wrong token
// spends nothing.
func (m *Manager) Exchange(token string) (*http.Cookie, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if subtle.ConstantTimeCompare([]byte(token), []byte(m.startup)) != 1 {
		return nil, ErrInvalid
	}
	if m.spent {
		return nil, ErrSpent
	}
	m.spent = true
	if m.now().Sub(m.issued) > m.ttl {
		return nil, ErrExpired
	}
	s := session{cookie: Random(), csrf: Random()}
	m.sessions = append(m.sessions, s)
	return &http.Cookie{
		Name: m.cookieName, Value: s.cookie, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
	}, nil
}

// Lookup returns the CSRF token of the session whose cookie r carries
// (ok false: none). Every session is compared, in constant time.
func (m *Manager) Lookup(r *http.Request) (csrf string, ok bool) {
	cookies := r.CookiesNamed(m.cookieName)
	if len(cookies) != 1 {
		return "", false
	}
	v := []byte(cookies[0].Value)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.sessions {
		if subtle.ConstantTimeCompare(v, []byte(s.cookie)) == 1 {
			csrf, ok = s.csrf, true
		}
	}
	return csrf, ok
}

// CSRFOK compares a request's CSRF header with the session's token in
// constant time.
func CSRFOK(header, csrf string) bool {
	return header != "" && subtle.ConstantTimeCompare([]byte(header), []byte(csrf)) == 1
}
