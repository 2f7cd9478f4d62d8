package localplatform

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultStateDir(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		euid int
		want string
	}{
		{map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/h"}, 0, "/x/state/rayito/localvm"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/h"}, 0, "/var/lib/rayito/localvm"},
		{map[string]string{"HOME": "/h"}, 0, "/var/lib/rayito/localvm"},
		{map[string]string{"HOME": "/h"}, 1000, "/h/.local/state/rayito/localvm"},
		{map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/h"}, 1000, "/x/rayito/localvm"},
	} {
		if got := DefaultStateDir(env(c.env), c.euid); got != c.want {
			t.Errorf("%v euid %d: %q, want %q", c.env, c.euid, got, c.want)
		}
	}
}

func TestCheckEndpoint(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:7450", "http://localhost:1", "http://[::1]:7451", "http://127.0.0.2:80/"} {
		if err := CheckEndpoint(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:7450", "https://127.0.0.1:7450", "http://10.0.0.1:7450", "http://example.com:7450",
		"http://127.0.0.1", "http://u:p@127.0.0.1:7450", "http://127.0.0.1:7450/x", "http://127.0.0.1:7450?q", "http://127.0.0.1:7450#f",
		"http://localhost.evil.com:80", "http://127.0.0.1:7450\nhttp://x"} {
		if CheckEndpoint(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRecord(t *testing.T) {
	dir := t.TempDir()
	if _, ok := ReadEndpoint(dir); ok {
		t.Fatal("a record where none was written")
	}
	if err := WriteEndpoint(dir, "http://10.1.1.1:1"); err == nil {
		t.Fatal("a non-loopback endpoint was recorded")
	}
	if err := WriteEndpoint(dir, "http://127.0.0.1:7451"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, EndpointFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record: %v %v", fi, err)
	}
	if got, ok := ReadEndpoint(dir); !ok || got != "http://127.0.0.1:7451" {
		t.Fatalf("read %q %v", got, ok)
	}
	// Another endpoint's removal leaves it; its own removes it.
	RemoveEndpoint(dir, "http://127.0.0.1:9999")
	if _, ok := ReadEndpoint(dir); !ok {
		t.Fatal("removed by another endpoint")
	}
	RemoveEndpoint(dir, "http://127.0.0.1:7451")
	if _, ok := ReadEndpoint(dir); ok {
		t.Fatal("not removed")
	}
	// Garbage, a huge file, a directory: no record.
	for _, content := range []string{"http://evil.example:80\n", strings.Repeat("x", 1000), ""} {
		os.WriteFile(filepath.Join(dir, EndpointFile), []byte(content), 0o600)
		if got, ok := ReadEndpoint(dir); ok {
			t.Errorf("%q read as %q", content, got)
		}
	}
	os.Remove(filepath.Join(dir, EndpointFile))
	os.Mkdir(filepath.Join(dir, EndpointFile), 0o700)
	if _, ok := ReadEndpoint(dir); ok {
		t.Error("a directory read as a record")
	}
}

func TestEndpoint(t *testing.T) {
	state := t.TempDir()
	e := map[string]string{"XDG_STATE_HOME": state}
	if got, rec := Endpoint(env(e), 1000); got != DefaultEndpoint || rec {
		t.Fatalf("no record: %q %v", got, rec)
	}
	dir := filepath.Join(state, "rayito", "localvm")
	os.MkdirAll(dir, 0o700)
	if err := WriteEndpoint(dir, "http://127.0.0.1:7452"); err != nil {
		t.Fatal(err)
	}
	if got, rec := Endpoint(env(e), 1000); got != "http://127.0.0.1:7452" || !rec {
		t.Fatalf("record: %q %v", got, rec)
	}
	e["RAYITO_ENDPOINT"] = "http://127.0.0.1:1/"
	if got, rec := Endpoint(env(e), 1000); got != "http://127.0.0.1:1" || rec {
		t.Fatalf("env wins: %q %v", got, rec)
	}
}

// FuzzCheckEndpoint: CheckEndpoint never panics, and what it accepts is
// plain http to a loopback host with a port.
func FuzzCheckEndpoint(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:7450", "http://[::1]:1", "http://localhost:2/", "http://u@127.0.0.1:1", "http://0x7f.1:1", "http://127.1:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckEndpoint(s) != nil {
			return
		}
		if !strings.HasPrefix(s, "http://") || strings.ContainsAny(s, "@?#\n\r ") {
			t.Fatalf("accepted %q", s)
		}
		if strings.HasSuffix(strings.TrimSuffix(s, "/"), ":0") {
			t.Fatalf("accepted port 0: %q", s)
		}
	})
}
