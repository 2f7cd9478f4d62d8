package mcpserver

import (
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	t.Parallel()
	if got, n := cut("héllo", 5); got != "héllo" || n != 0 {
		t.Errorf("cut within the limit: %q %d", got, n)
	}
	s := strings.Repeat("é", 1000) + "END"
	got, n := cut(s, 100)
	if n != 903 {
		t.Errorf("cut %d characters, want 903", n)
	}
	if !strings.HasPrefix(got, strings.Repeat("é", 80)) || !strings.HasSuffix(got, "END") || !strings.Contains(got, "903 characters cut") {
		t.Errorf("cut kept the wrong parts: %q", got)
	}
	if !utf8.ValidString(got) {
		t.Error("cut split a character")
	}
}

func TestShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit  int
		counts []int
		want   []int
	}{
		{100, []int{10, 20}, []int{10, 20}},
		{100, []int{10, 500}, []int{10, 90}},
		{100, []int{500, 500}, []int{50, 50}},
		{100, []int{30, 500, 500}, []int{30, 35, 35}},
	} {
		got := share(tc.limit, tc.counts...)
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("share(%d, %v) = %v, want %v", tc.limit, tc.counts, got, tc.want)
				break
			}
		}
	}
	out, errOut := strings.Repeat("o", MaxOutputChars), strings.Repeat("e", 10)
	if n := cutAll(&out, &errOut); n != 10 || errOut != strings.Repeat("e", 10) {
		t.Errorf("cutAll: %d cut, stderr %q", n, errOut)
	}
}

func TestFileOutput(t *testing.T) {
	t.Parallel()
	small := fileOutput([]byte("hi\n"), 3)
	if small.Content != "hi\n" || small.Encoding != "utf-8" || small.Note != "" {
		t.Errorf("small text: %+v", small)
	}
	bin := fileOutput([]byte{0, 1, 2, 0xff}, 4)
	if bin.Encoding != "base64" || bin.Content != base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff}) {
		t.Errorf("binary: %+v", bin)
	}
	big := []byte(strings.Repeat("a", 4*MaxOutputChars+1))
	out := fileOutput(big, 1<<20)
	if utf8.RuneCountInString(out.Content) != MaxOutputChars || !strings.Contains(out.Note, "948576 bytes of the file were cut") {
		t.Errorf("big text: %d characters, note %q", len(out.Content), out.Note)
	}
	// A read cut inside a character is still text.
	partial := append([]byte(strings.Repeat("x", 10)), "é"[0])
	if p := fileOutput(partial, 100); p.Encoding != "utf-8" || p.Content != strings.Repeat("x", 10) {
		t.Errorf("partial: %+v", p)
	}
}

func TestDecodeContent(t *testing.T) {
	t.Parallel()
	if b, err := decodeContent("aGk=", "base64"); err != nil || string(b) != "hi" {
		t.Errorf("base64: %q %v", b, err)
	}
	if b, err := decodeContent("hi", ""); err != nil || string(b) != "hi" {
		t.Errorf("text: %q %v", b, err)
	}
	for _, tc := range [][2]string{{"!!", "base64"}, {"hi", "latin1"}, {strings.Repeat("a", MaxWriteBytes+1), ""}, {strings.Repeat("A", MaxWriteBytes/3*4+8), "base64"}} {
		if _, err := decodeContent(tc[0], tc[1]); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("decodeContent(%.10q, %q): %v, want ErrInvalidArgument", tc[0], tc[1], err)
		}
	}
}

func TestBearer(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer abc": "abc", "Basic abc": "", "Bearer": "", "Bearer  abc": "", "Bearer a b": ""} {
		got, ok := bearer(h)
		if got != want || ok != (want != "") {
			t.Errorf("bearer(%q) = %q %v, want %q", h, got, ok, want)
		}
	}
	r := httptest.NewRequest("POST", "/mcp", nil)
	r.Header.Add("Authorization", "Bearer good")
	if !tokenOK(r, "good") || tokenOK(r, "goo") {
		t.Error("tokenOK")
	}
	r.Header.Add("Authorization", "Bearer good")
	if tokenOK(r, "good") {
		t.Error("two Authorization headers pass")
	}
}

func TestLoadOrCreateToken(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "token")
	tok, created, err := LoadOrCreateToken(path)
	if err != nil || !created || len(tok) != 64 {
		t.Fatalf("create: %q %v %v", tok, created, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	again, created, err := LoadOrCreateToken(path)
	if err != nil || created || again != tok {
		t.Errorf("load: %q %v %v", again, created, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateToken(path); !errors.Is(err, ErrTokenFile) {
		t.Errorf("a file others read: %v", err)
	}
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateToken(short); !errors.Is(err, ErrTokenFile) {
		t.Errorf("a short token: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateToken(link); err == nil {
		t.Error("a symlink is followed")
	}
}

func FuzzCut(f *testing.F) {
	f.Add("héllo wörld", 3)
	f.Add("\xff\xfeabc", 2)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit %= 64
		got, n := cut(s, limit)
		limit = max(limit, 0)
		if n == 0 && got != s {
			t.Fatalf("nothing cut but %q != %q", got, s)
		}
		if n > 0 && utf8.RuneCountInString(got) > limit+len(cutNote(n)) {
			t.Fatalf("cut(%q, %d) = %q, too long", s, limit, got)
		}
	})
}

func FuzzBearer(f *testing.F) {
	f.Add("Bearer abc")
	f.Add("bearer\tx")
	f.Fuzz(func(t *testing.T, h string) {
		if tok, ok := bearer(h); ok && (tok == "" || strings.ContainsAny(tok, " \t")) {
			t.Fatalf("bearer(%q) = %q", h, tok)
		}
	})
}

func FuzzDecodeContent(f *testing.F) {
	f.Add("aGk=", "base64")
	f.Add("text", "utf-8")
	f.Fuzz(func(t *testing.T, content, encoding string) {
		b, err := decodeContent(content, encoding)
		if err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("untyped error %v", err)
		}
		if len(b) > MaxWriteBytes {
			t.Fatal("over the limit")
		}
	})
}

func FuzzFileOutput(f *testing.F) {
	f.Add([]byte("text\n"), int64(5))
	f.Add([]byte{0xe2, 0x82}, int64(10))
	f.Fuzz(func(t *testing.T, data []byte, extra int64) {
		if extra < 0 {
			extra = -extra
		}
		out := fileOutput(data, int64(len(data))+extra%1000)
		switch out.Encoding {
		case "utf-8":
			if !utf8.ValidString(out.Content) {
				t.Fatal("invalid UTF-8 as text")
			}
		case "base64":
			if _, err := base64.StdEncoding.DecodeString(out.Content); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("encoding %q", out.Encoding)
		}
	})
}
