package e2b

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	e2bapi "github.com/rayito-dev/rayito/e2b"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestKeysRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "keys")
	if err := appendKey(path, "e2b_aa"); err != nil {
		t.Fatal(err)
	}
	if err := appendKey(path, "e2b_bb"); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == KeyEnv {
			return "e2b_cc"
		}
		return ""
	}
	keys, err := LoadKeys(env, path)
	if err != nil {
		t.Fatal(err)
	}
	want := [][32]byte{e2bapi.HashAPIKey("e2b_cc"), e2bapi.HashAPIKey("e2b_aa"), e2bapi.HashAPIKey("e2b_bb")}
	if len(keys) != 3 || keys[0] != want[0] || keys[1] != want[1] || keys[2] != want[2] {
		t.Fatalf("keys %x", keys)
	}
	if fi, _ := os.Stat(filepath.Dir(path)); fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", fi.Mode())
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:3000": true, "[::1]:3000": true, "localhost:1": true, "0.0.0.0:3000": false, ":3000": false, "10.0.0.1:80": false, "x": false} {
		if IsLoopback(addr) != want {
			t.Errorf("%s: want %v", addr, want)
		}
	}
}

func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, e2bapi.Options{SDK: []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint("http://127.0.0.1:1")},
			APIKeyHashes: [][32]byte{e2bapi.HashAPIKey("e2b_k")}}, nil)
	}()
	base := "http://" + ln.Addr().String()
	var res *http.Response
	for i := 0; i < 50; i++ {
		if res, err = http.Get(base + "/health"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("health: %v %v", res, err)
	}
	res.Body.Close()
	res, err = http.Get(base + "/v2/sandboxes")
	if err != nil || res.StatusCode != 401 {
		t.Fatalf("no key: %v %v", res, err)
	}
	res.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}

func TestDefaultSnapshotDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_STATE_HOME": "/s", "HOME": "/h"}, "/s/rayito/e2b-snapshots"},
		{map[string]string{"XDG_STATE_HOME": "rel", "HOME": "/h"}, "/h/.local/state/rayito/e2b-snapshots"},
		{map[string]string{"HOME": "/h"}, "/h/.local/state/rayito/e2b-snapshots"},
	} {
		if got, err := DefaultSnapshotDir(env(c.env)); err != nil || got != c.want {
			t.Errorf("%v: %q %v, want %q", c.env, got, err, c.want)
		}
	}
	if _, err := DefaultSnapshotDir(env(nil)); err == nil {
		t.Error("no HOME: no error")
	}
}
