package envduser

import (
	"encoding/base64"
	"net/http"
	"testing"
)

func TestParse(t *testing.T) {
	b := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{b("user:"), "user", true},
		{b("root:"), "root", true},
		{b("alice:secret"), "alice", true},
		{b(":"), "", true},
		{"basic " + base64.RawStdEncoding.EncodeToString([]byte("bob:")), "bob", true},
		{"Bearer x", "", false},
		{"Basic", "", false},
		{"Basic !!!", "", false},
		{b("a b:"), "", false},
		{b("../x:"), "", false},
		{b("x\x00:"), "", false},
	} {
		got, err := Parse(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if u, err := FromHeader(http.Header{}); u != "" || err != nil {
		t.Errorf("no header: %q %v", u, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("Basic dXNlcjo=")
	f.Add("Basic cm9vdDpwdw")
	f.Add("basic  Og==")
	f.Fuzz(func(t *testing.T, v string) {
		name, err := Parse(v)
		if err != nil {
			if name != "" {
				t.Fatalf("error with a name %q", name)
			}
			return
		}
		if !Valid(name) {
			t.Fatalf("invalid name %q accepted", name)
		}
	})
}
