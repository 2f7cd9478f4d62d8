package gateway

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// refusedPaths are raw request paths CheckPath must refuse.
var refusedPaths = []string{
	// dot segments and their encodings
	"/.", "/..", "/%2e", "/%2E", "/%2e%2e", "/%2E%2e", "/.%2e", "/.%2e/", "/%2e./x",
	"/a/../b", "/a/./b", "/a/..", "/a/.", "/a/..%2f", "/a/%2e%2e%5c", "/%2e%2e%5cadmin",
	// semicolons
	"/v1;x", "/v1/..;/admin", "/v1/x;y=1", "/v1%3bx", "/v1/%3B",
	// encoded and raw slashes / backslashes
	"/a%2fb", "/a%2Fb", "/a%5cb", "/a%5Cb", "/a\\b", "/\\",
	// double encoding
	"/%252e%252e", "/%252f", "/a%2525", "/%25",
	// overlong and invalid UTF-8
	"/%c0%ae", "/%c0%af", "/%e0%80%ae", "/%c0%ae%c0%ae/x", "/%ff", "/%fe%ff", "/a%80", "/%ed%a0%80",
	// control characters
	"/a%00", "/%00", "/a%0a", "/a%0d", "/a%0D%0A", "/a%09", "/a%7f", "/a%1b",
	// raw non-ASCII
	"/caf\xc3\xa9", "/\xff", "/a\x80b",
	// empty segments
	"//", "/a//b", "//a", "/a//", "///",
	// not starting with '/', absolute-form, asterisk
	"", "a/b", "*", "http://example.com/a", "https:/x",
	// other characters outside the allowlist
	"/a#b", "/a b", "/a\"b", "/a<b>", "/a[b]", "/a{b}", "/a|b", "/a^b", "/a`b", "/a?b",
	// bad percent-encoding
	"/%", "/%2", "/%zz", "/a%g0",
}

var allowedPaths = []string{
	"/", "/v1/messages", "/v1/models/claude-3:generate", "/a/", "/~user/x", "/a%20b",
	"/a.b/c..d/...", "/@x/!$&'()*+,=", "/%41", "/caf%c3%a9", "/v1/messages/",
}

func TestCheckPathVectors(t *testing.T) {
	if len(refusedPaths) < 40 {
		t.Fatalf("only %d vectors", len(refusedPaths))
	}
	for _, p := range refusedPaths {
		err := CheckPath(p)
		if err == nil {
			t.Errorf("CheckPath(%q) accepted", p)
			continue
		}
		if !errors.Is(err, ErrPathNotAllowed) {
			t.Errorf("CheckPath(%q) error %v does not wrap ErrPathNotAllowed", p, err)
		}
		if len(p) > 3 && strings.Contains(err.Error(), p) {
			t.Errorf("error for %q contains the path", p)
		}
	}
	for _, p := range allowedPaths {
		if err := CheckPath(p); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", p, err)
		}
	}
}

func TestDecodePathMatchesURL(t *testing.T) {
	for _, p := range allowedPaths {
		d, err := decodePath(p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := url.PathUnescape(p)
		if err != nil || d != want {
			t.Errorf("decodePath(%q) = %q, want %q", p, d, want)
		}
		u := url.URL{Path: d, RawPath: p}
		if u.EscapedPath() != p {
			t.Errorf("EscapedPath for %q = %q", p, u.EscapedPath())
		}
	}
}

func FuzzCheckPath(f *testing.F) {
	for _, p := range refusedPaths {
		f.Add(p)
	}
	for _, p := range allowedPaths {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := CheckPath(p)
		if err != nil {
			if !errors.Is(err, ErrPathNotAllowed) {
				t.Fatalf("error does not wrap ErrPathNotAllowed: %v", err)
			}
			return
		}
		if !strings.HasPrefix(p, "/") {
			t.Fatalf("accepted %q not starting with /", p)
		}
		if p == "/" {
			return
		}
		segs := strings.Split(p[1:], "/")
		for i, s := range segs {
			if s == "" {
				if i != len(segs)-1 {
					t.Fatalf("accepted empty segment in %q", p)
				}
				continue
			}
			for j := 0; j < len(s); j++ {
				if s[j] >= 0x80 || s[j] == ';' || s[j] == '\\' {
					t.Fatalf("accepted raw byte %#x in %q", s[j], p)
				}
			}
			d, err := url.PathUnescape(s)
			if err != nil {
				t.Fatalf("accepted undecodable %q", p)
			}
			if !utf8.ValidString(d) {
				t.Fatalf("accepted invalid UTF-8 in %q", p)
			}
			if d == "." || d == ".." {
				t.Fatalf("accepted dot segment in %q", p)
			}
			for _, c := range []byte(d) {
				if c < 0x20 || c == 0x7f || c == '/' || c == '\\' || c == '%' || c == ';' {
					t.Fatalf("accepted decoded %#x in %q", c, p)
				}
			}
		}
		d, err := decodePath(p)
		if err != nil {
			t.Fatal("decodePath disagrees with CheckPath")
		}
		if want, _ := url.PathUnescape(p); want != d {
			t.Fatalf("decodePath(%q) = %q, want %q", p, d, want)
		}
	})
}
