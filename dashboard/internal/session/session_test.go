package session

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestExchange(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	m := New(7460, time.Minute, func() time.Time { return now })
	if m.CookieName() != "rayito_dashboard_7460" || len(m.StartupToken()) != 43 {
		t.Fatalf("%q %q", m.CookieName(), m.StartupToken())
	}
	for _, bad := range []string{"", "x", m.StartupToken()[:42], m.StartupToken() + "A"} {
		if _, err := m.Exchange(bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Exchange(%q): %v", bad, err)
		}
	}
	c, err := m.Exchange(m.StartupToken())
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != m.CookieName() || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Domain != "" || c.MaxAge != 0 || !c.Expires.IsZero() || len(c.Value) != 43 {
		t.Fatalf("cookie %+v", c)
	}
	if _, err := m.Exchange(m.StartupToken()); !errors.Is(err, ErrSpent) {
		t.Fatalf("second exchange: %v", err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(c)
	csrf, ok := m.Lookup(r)
	if !ok || len(csrf) != 43 || csrf == c.Value {
		t.Fatalf("lookup: %q %v", csrf, ok)
	}
	if !CSRFOK(csrf, csrf) || CSRFOK("", "") || CSRFOK(csrf[:42], csrf) {
		t.Fatal("CSRFOK")
	}
	r = httptest.NewRequest("GET", "/", nil)
	r.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value[:42] + "x"})
	if _, ok := m.Lookup(r); ok {
		t.Fatal("a forged cookie was accepted")
	}

	expired := New(7460, time.Minute, func() time.Time { return now })
	now = now.Add(time.Minute + time.Second)
	if _, err := expired.Exchange(expired.StartupToken()); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
}
