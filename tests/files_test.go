package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestFilesEndToEnd(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	sbx := p.create(ctx)
	defer sbx.Kill(ctx)
	f := sbx.Files
	if _, err := f.Write(ctx, "notes/a.txt", []byte("hello"), rayito.WithMetadata(map[string]string{"kind": "note"})); err != nil {
		t.Fatal(err)
	}
	got, err := f.Read(ctx, "notes/a.txt")
	if err != nil || string(got) != "hello" {
		t.Fatalf("read %q %v", got, err)
	}
	e, err := f.Stat(ctx, "notes/a.txt")
	if err != nil || e.Metadata["kind"] != "note" || e.Size != 5 {
		t.Fatalf("stat %+v %v", e, err)
	}
	// Metadata rides the file endpoint's X-Metadata headers; a value a
	// header would trim takes the RPC stream and is kept as it is.
	if _, err := f.Write(ctx, "meta/b.txt", []byte("b"), rayito.WithMetadata(map[string]string{"kind": "note", "pad": " padded "})); err != nil {
		t.Fatal(err)
	}
	if eb, err := f.Stat(ctx, "meta/b.txt"); err != nil || eb.Metadata["pad"] != " padded " || eb.Metadata["kind"] != "note" {
		t.Fatalf("stat with a padded value: %+v %v", eb, err)
	}
	if isRoot() && e.Owner != "user" && e.Owner != "1000" {
		t.Fatalf("owner %q", e.Owner)
	}
	big := make([]byte, 12<<20)
	_, _ = rand.Read(big)
	if _, err := f.Write(ctx, "big.bin", big); err != nil {
		t.Fatal(err)
	}
	rc, err := f.ReadStream(ctx, "big.bin")
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(back, big) {
		t.Fatalf("big round trip: %d bytes, %v", len(back), err)
	}
	if ok, err := f.Exists(ctx, "nope"); ok || err != nil {
		t.Fatalf("exists nope: %v %v", ok, err)
	}
	list, err := f.List(ctx, "notes", 1)
	if err != nil || len(list) != 1 || list[0].Name != "a.txt" {
		t.Fatalf("list %+v %v", list, err)
	}
	if _, err := f.Rename(ctx, "notes/a.txt", "notes/b.txt"); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(ctx, "notes", true); err != nil {
		t.Fatal(err)
	}
	// The confused-deputy refusals reach the SDK as typed errors.
	var rpc *rayito.RPCError
	for _, bad := range []string{"/etc/shadow", "/proc/1/environ", "../../etc/passwd"} {
		if _, err := f.Read(ctx, bad); !errors.As(err, &rpc) {
			t.Errorf("read %s: %v", bad, err)
		}
	}
	if _, err := sbx.Commands.Run(ctx, "ln -s /etc/shadow ~/sh"); err != nil {
		t.Fatal(err)
	}
	if data, err := f.Read(ctx, "sh"); err == nil || len(data) > 0 {
		t.Fatalf("read through a symlink to /etc/shadow: %d bytes %v", len(data), err)
	}
}

func TestCLICopy100MiB(t *testing.T) {
	env := cliEnv(t)
	state := t.TempDir()
	if r := runCLI(t, env, "local", "up", "--state-dir", state); r.code != 0 {
		t.Fatalf("local up: %+v", r)
	}
	defer runCLI(t, env, "local", "down", "--state-dir", state)
	r := runCLI(t, env, "sandbox", "create")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("create: %+v", r)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "in.bin")
	fh, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(fh, h), rand.Reader, 100<<20); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	want := h.Sum(nil)
	if r := runCLI(t, env, "sandbox", "cp", "-p", src, id+":data/in.bin"); r.code != 0 {
		t.Fatalf("cp in: %+v", r)
	}
	out := filepath.Join(dir, "out.bin")
	if r := runCLI(t, env, "sandbox", "cp", "--json", id+":data/in.bin", out); r.code != 0 || !strings.Contains(r.stdout, `"bytes": 104857600`) {
		t.Fatalf("cp out: %+v", r)
	}
	got, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	h2 := sha256.New()
	if _, err := io.Copy(h2, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h2.Sum(nil), want) {
		t.Fatal("sha256 differs after the round trip")
	}
	// A directory goes in and out recursively.
	tree := filepath.Join(dir, "tree")
	_ = os.MkdirAll(filepath.Join(tree, "sub"), 0o755)
	_ = os.WriteFile(filepath.Join(tree, "sub", "x.txt"), []byte("x"), 0o644)
	if r := runCLI(t, env, "sandbox", "cp", tree, id+":tree"); r.code != 0 {
		t.Fatalf("cp dir in: %+v", r)
	}
	back := filepath.Join(dir, "back")
	if r := runCLI(t, env, "sandbox", "cp", id+":tree", back); r.code != 0 {
		t.Fatalf("cp dir out: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(back, "sub", "x.txt")); err != nil || string(b) != "x" {
		t.Fatalf("tree round trip: %q %v", b, err)
	}
	if r := runCLI(t, env, "sandbox", "cp", "a", "b"); r.code != 2 {
		t.Fatalf("cp without a sandbox side: %+v", r)
	}
}
