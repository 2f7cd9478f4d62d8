package templatestart

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if rt, err := Load(filepath.Join(dir, "missing.json")); rt != nil || err != nil {
		t.Fatalf("missing file: %v %v", rt, err)
	}
	if rt, err := Load(""); rt != nil || err != nil {
		t.Fatalf("no path: %v %v", rt, err)
	}
	if _, err := Load(dir); !errors.Is(err, ErrConfig) {
		t.Fatalf("a directory: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", ptemplate.MaxSpecLen+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); !errors.Is(err, ErrConfig) {
		t.Fatalf("oversized: %v", err)
	}
	good := filepath.Join(dir, "t.json")
	if err := os.WriteFile(good, []byte(`{"v":1,"name":"web","workdir":"/home/user","user":"user","start":{"cmd":"x","ready_port":8080}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := Load(good)
	if err != nil || rt.Start.ReadyPort != 8080 {
		t.Fatalf("%v %v", rt, err)
	}
}

// TestReady: no template or no port is ready at once; with a port, not
// before the start, then when the port listens, the command ended or
// MaxWait passed.
func TestReady(t *testing.T) {
	if !New(nil, nil, nil, nil).Ready() {
		t.Fatal("no template: not ready")
	}
	rt := &ptemplate.Runtime{V: 1, Name: "a", Workdir: "/", User: "user", Start: &ptemplate.Start{Cmd: "x", ReadyPort: 9}}
	now := time.Unix(1000, 0)
	listening := false
	s := New(rt, nil, nil, nil)
	s.now = func() time.Time { return now }
	s.dial = func(string) bool { return listening }
	if s.Ready() {
		t.Fatal("ready before the start")
	}
	s.started.Store(now.UnixNano())
	if s.Ready() {
		t.Fatal("ready before the port listens")
	}
	now = now.Add(MaxWait)
	if !s.Ready() {
		t.Fatal("not ready after MaxWait")
	}
	s2 := New(rt, nil, nil, nil)
	s2.dial = func(string) bool { return true }
	s2.started.Store(time.Now().UnixNano())
	if !s2.Ready() {
		t.Fatal("not ready with the port listening")
	}
}
