package jwt

import (
	"context"
	"errors"
	"testing"
)

// FuzzParse: arbitrary tokens through Parse and a Verifier whose JWKS is
// on loopback: no panic, every error one of the typed ones, and nothing
// passes without a valid RS256 signature by the pool's key.
func FuzzParse(f *testing.F) {
	keys(f)
	f.Add(signRS(rs256("k1"), goodClaims(), key1))
	f.Add(signRS(rs256("k1"), goodClaims(), key2))
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := Parse(tok)
		if err == nil && (p.Kid == "" || len(p.Signature) == 0) {
			t.Fatal("parsed without kid or signature")
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("Parse: untyped error %v", err)
		}
		v, err := New(Config{Region: region, PoolID: pool, ClientID: client, JWKSURL: "http://127.0.0.1:1/none"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(context.Background(), tok)
		if err == nil {
			t.Fatal("verified without reachable keys")
		}
		for _, e := range []error{ErrMalformed, ErrSignature, ErrExpired, ErrClaims, ErrJWKSUnavailable} {
			if errors.Is(err, e) {
				return
			}
		}
		t.Fatalf("untyped error %v", err)
	})
}
