package accesstoken

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

const (
	zeroToken  = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" // 32 zero bytes
	zeroDigest = "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925"
	tok16      = "AAECAwQFBgcICQoLDA0ODw" // bytes 0..15
	tok16URL   = "-__7__v_-__7__v_-__7_w" // uses '-' and '_'
	tok17      = "AAECAwQFBgcICQoLDA0ODxA"
	tok18      = "AAECAwQFBgcICQoLDA0ODxAR"
)

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := New()
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) != 43 || strings.ContainsAny(tok, "=+/") {
			t.Fatalf("New() = %q: want 43 unpadded base64url characters", tok)
		}
		raw, err := Decode(tok)
		if err != nil {
			t.Fatalf("Decode(New()) failed: %v", err)
		}
		if len(raw) != Size {
			t.Fatalf("decoded %d bytes, want %d", len(raw), Size)
		}
		if seen[tok] {
			t.Fatal("New returned a duplicate token")
		}
		seen[tok] = true
	}
}

func TestDecode(t *testing.T) {
	seq := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	tests := []struct {
		name    string
		token   string
		want    []byte
		wantErr error
	}{
		{"32 zero bytes", zeroToken, make([]byte, 32), nil},
		{"32 zero bytes padded", zeroToken + "=", make([]byte, 32), nil},
		{"16 bytes unpadded", tok16, seq(16), nil},
		{"16 bytes padded", tok16 + "==", seq(16), nil},
		{"17 bytes unpadded", tok17, seq(17), nil},
		{"17 bytes padded", tok17 + "=", seq(17), nil},
		{"18 bytes no padding needed", tok18, seq(18), nil},
		{"url alphabet", tok16URL, bytes.Repeat([]byte{0xfb, 0xff}, 8), nil},
		{"url alphabet padded", tok16URL + "==", bytes.Repeat([]byte{0xfb, 0xff}, 8), nil},

		{"empty", "", nil, ErrTooShort},
		{"15 bytes", "AAECAwQFBgcICQoLDA0O", nil, ErrTooShort},
		{"15 zero bytes", strings.Repeat("A", 20), nil, ErrTooShort},

		{"standard alphabet", "+//7//v/+//7//v/+//7/w", nil, ErrMalformed},
		{"standard alphabet plus", "+__7__v_-__7__v_-__7_w", nil, ErrMalformed},
		{"standard alphabet slash", "-_/7__v_-__7__v_-__7_w", nil, ErrMalformed},
		{"leading space", " " + tok16, nil, ErrMalformed},
		{"trailing space", tok16 + " ", nil, ErrMalformed},
		{"trailing newline", tok16 + "\n", nil, ErrMalformed},
		{"embedded newline", tok16[:8] + "\n" + tok16[8:], nil, ErrMalformed},
		{"embedded CR", tok16[:8] + "\r" + tok16[8:], nil, ErrMalformed},
		{"tab", tok16 + "\t", nil, ErrMalformed},
		{"NUL", tok16 + "\x00", nil, ErrMalformed},
		{"non-ASCII", tok16 + "é", nil, ErrMalformed},
		{"dot", tok16[:21] + ".", nil, ErrMalformed},

		{"non-canonical last char 16 bytes", tok16[:21] + "x", nil, ErrMalformed},
		{"non-canonical last char 16 bytes B", "AAAAAAAAAAAAAAAAAAAAAB", nil, ErrMalformed},
		{"non-canonical last char 16 bytes padded", "AAAAAAAAAAAAAAAAAAAAAB==", nil, ErrMalformed},
		{"non-canonical last char 17 bytes", "AAECAwQFBgcICQoLDA0ODxB", nil, ErrMalformed},
		{"non-canonical last char 32 bytes", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB", nil, ErrMalformed},

		{"too much padding 16", tok16 + "===", nil, ErrMalformed},
		{"too little padding 16", tok16 + "=", nil, ErrMalformed},
		{"too much padding 17", tok17 + "==", nil, ErrMalformed},
		{"padding where none needed", tok18 + "=", nil, ErrMalformed},
		{"padding quantum where none needed", tok18 + "====", nil, ErrMalformed},
		{"padding in the middle", tok16[:4] + "==" + tok16[4:], nil, ErrMalformed},
		{"padding then data", tok16 + "==AA", nil, ErrMalformed},
		{"only padding", "====", nil, ErrMalformed},
		{"impossible length", tok18 + "A", nil, ErrMalformed},
		{"impossible length padded", tok18 + "A===", nil, ErrMalformed},

		{"1024 chars ok", strings.Repeat("A", 1024), make([]byte, 768), nil},
		{"1025 chars", strings.Repeat("A", 1025), nil, ErrMalformed},
		{"huge", strings.Repeat("A", 1<<16), nil, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.token)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Decode error = %v, want %v", err, tt.wantErr)
				}
				if got != nil {
					t.Fatalf("Decode returned bytes with an error")
				}
				if len(tt.token) >= 4 && strings.Contains(err.Error(), tt.token) {
					t.Fatalf("error message contains the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode error = %v, want nil", err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("Decode = %x, want %x", got, tt.want)
			}
		})
	}
}

func TestErrorsDoNotLeakToken(t *testing.T) {
	secret := "SECRETSECRETSECRETSECRETSECRETSECRETSECRETx" // non-canonical last char
	for _, tok := range []string{secret, secret + "+", " " + secret, secret + "==", strings.Repeat(secret, 30)} {
		_, err := Decode(tok)
		if err == nil {
			t.Fatalf("Decode accepted a bad token")
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("error leaks token: %v", err)
		}
	}
}

func TestDigest(t *testing.T) {
	tests := []struct {
		token, want string
	}{
		{zeroToken, zeroDigest},
		{zeroToken + "=", zeroDigest},
		{tok16, "be45cb2605bf36bebde684841a28f0fd43c69850a3dce5fedba69928ee3a8991"},
		{tok16 + "==", "be45cb2605bf36bebde684841a28f0fd43c69850a3dce5fedba69928ee3a8991"},
		{tok16URL, "ad49f039cfeee357096f67f767bfffdef429a3d93708003b0b35931c08b116ff"},
	}
	for _, tt := range tests {
		got, err := Digest(tt.token)
		if err != nil {
			t.Fatalf("Digest(%q): %v", tt.token, err)
		}
		if got != tt.want {
			t.Errorf("Digest(%q) = %s, want %s", tt.token, got, tt.want)
		}
	}
	if got := DigestBytes(make([]byte, 32)); got != zeroDigest {
		t.Errorf("DigestBytes(32 zero bytes) = %s, want %s", got, zeroDigest)
	}
	if _, err := Digest("AAAA"); !errors.Is(err, ErrTooShort) {
		t.Errorf("Digest(short) error = %v, want ErrTooShort", err)
	}
	if d, err := Digest("+//7//v/+//7//v/+//7/w"); !errors.Is(err, ErrMalformed) || d != "" {
		t.Errorf("Digest(bad) = %q, %v; want \"\", ErrMalformed", d, err)
	}
}

func TestVerify(t *testing.T) {
	upper := strings.ToUpper(zeroDigest)
	tests := []struct {
		name          string
		token, digest string
		want          bool
	}{
		{"match", zeroToken, zeroDigest, true},
		{"match padded", zeroToken + "=", zeroDigest, true},
		{"match 16", tok16, "be45cb2605bf36bebde684841a28f0fd43c69850a3dce5fedba69928ee3a8991", true},
		{"other token", tok16, zeroDigest, false},
		{"one digit off", zeroToken, zeroDigest[:63] + "6", false},
		{"uppercase digest", zeroToken, upper, false},
		{"empty digest", zeroToken, "", false},
		{"short digest", zeroToken, zeroDigest[:62], false},
		{"long digest", zeroToken, zeroDigest + "0", false},
		{"non-hex digest", zeroToken, "g" + zeroDigest[1:], false},
		{"empty token", "", zeroDigest, false},
		{"malformed token", zeroToken + " ", zeroDigest, false},
		{"short token", "AAAA", "df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b81119", false},
		{"both empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verify(tt.token, tt.digest); got != tt.want {
				t.Fatalf("Verify = %v, want %v", got, tt.want)
			}
		})
	}
	tok, err := New()
	if err != nil {
		t.Fatal(err)
	}
	d, err := Digest(tok)
	if err != nil {
		t.Fatal(err)
	}
	if !Verify(tok, d) {
		t.Fatal("Verify(New(), Digest) = false")
	}
}

func TestValidDigest(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{zeroDigest, true},
		{strings.Repeat("0", 64), true},
		{strings.Repeat("f", 64), true},
		{"", false},
		{strings.Repeat("0", 63), false},
		{strings.Repeat("0", 65), false},
		{strings.Repeat("F", 64), false},
		{strings.Repeat("g", 64), false},
		{strings.Repeat("0", 63) + " ", false},
		{strings.Repeat("0", 62) + "é", false},
	}
	for _, tt := range tests {
		if got := ValidDigest(tt.s); got != tt.want {
			t.Errorf("ValidDigest(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		zeroToken, zeroToken + "=", tok16, tok16 + "==", tok17 + "=", tok18, tok16URL,
		"", "====", "AAAA", "+//7//v/+//7//v/+//7/w", "AAAAAAAAAAAAAAAAAAAAAB",
		tok16 + "\n", tok18 + "=", strings.Repeat("A", 1025),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		raw, err := Decode(token)
		if err != nil {
			if raw != nil {
				t.Fatal("Decode returned bytes with an error")
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooShort) {
				t.Fatalf("untyped error: %v", err)
			}
			if _, err := Digest(token); err == nil {
				t.Fatal("Digest succeeded where Decode failed")
			}
			if Verify(token, DigestBytes([]byte(token))) {
				t.Fatal("Verify accepted an invalid token")
			}
			return
		}
		if len(raw) < MinSize {
			t.Fatalf("Decode returned %d bytes", len(raw))
		}
		// The canonical form is the input with any padding removed.
		canon := base64.RawURLEncoding.EncodeToString(raw)
		if canon != strings.TrimRight(token, "=") {
			t.Fatalf("non-canonical input accepted: %q re-encodes as %q", token, canon)
		}
		again, err := Decode(canon)
		if err != nil {
			t.Fatalf("Decode(re-encoded) failed: %v", err)
		}
		if !bytes.Equal(raw, again) {
			t.Fatal("re-decoded bytes differ")
		}
		d, err := Digest(token)
		if err != nil {
			t.Fatalf("Digest failed after Decode succeeded: %v", err)
		}
		if !ValidDigest(d) {
			t.Fatalf("Digest returned invalid digest %q", d)
		}
		if !Verify(token, d) {
			t.Fatal("Verify(token, Digest(token)) = false")
		}
	})
}
