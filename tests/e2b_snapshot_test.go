package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/rayito-dev/rayito/e2b"
	"github.com/rayito-dev/rayito/proto/checkpoint"
	"github.com/rayito-dev/rayito/proto/localplatform"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/spf13/afero"
)

// TestE2BSnapshotCheckpointFormat: the E2B gateway's snapshots and rayd's
// checkpoints are one format, both ways, on real sandboxes of a local
// platform. A checkpoint rayd wrote to the platform's store, copied into
// the gateway's snapshot directory, restores as an E2B snapshot (files,
// modes, links; the FIFO rayd left out stays out); a snapshot the gateway
// took, copied into the store under a persistence prefix, is restored by
// rayd on Create; one byte changed in a snapshot's archive and the
// gateway refuses it before any sandbox is made.
func TestE2BSnapshotCheckpointFormat(t *testing.T) {
	stateDir := t.TempDir()
	p := startPlatform(t, stateDir)
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	snapDir := filepath.Join(t.TempDir(), "snaps")
	key, err := e2b.NewAPIKey()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := e2b.New(ctx, e2b.Options{SDK: p.opts(), APIKeyHashes: [][32]byte{e2b.HashAPIKey(key)},
		Templates: map[string]string{"": "local"}, SnapshotDir: snapDir})
	if err != nil {
		t.Fatal(err)
	}
	url := serveE2B(t, srv)
	call := func(method, path string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(ctx, method, url+path, rd)
		req.Header.Set("X-API-KEY", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	store := func(prefix, name string) string {
		return filepath.Join(stateDir, "s3", "buckets", "rayito-local", prefix, name)
	}
	// The S3 side of a move: what `aws s3 cp` of the snapshot's two files
	// does on AWS, here a PUT of each object through the store's own
	// backend on the platform's state directory (the store answers only
	// its sandboxes' rayd).
	be, err := s3afero.MultiBucket(afero.NewBasePathFs(afero.NewOsFs(), filepath.Join(stateDir, "s3")))
	if err != nil {
		t.Fatal(err)
	}
	upload := func(from, prefix string) {
		t.Helper()
		for _, n := range []string{checkpoint.ArchiveName, checkpoint.ManifestName} {
			b, err := os.ReadFile(filepath.Join(from, n))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := be.PutObject(localplatform.DefaultBucket, prefix+"/"+n, map[string]string{}, bytes.NewReader(b), int64(len(b)), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyFiles := func(from, to string) {
		t.Helper()
		if err := os.MkdirAll(to, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{checkpoint.ArchiveName, checkpoint.ManifestName} {
			b, err := os.ReadFile(filepath.Join(from, n))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, n), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func(s *rayito.Sandbox, script string) string {
		t.Helper()
		res, err := s.Commands.Run(ctx, script)
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return res.Stdout
	}
	const probe = `cd ~ && cat work/a.txt && stat -c %a work/a.txt && readlink main && ls -A`

	// rayd → E2B.
	a, err := rayito.Create(ctx, p.opts(rayito.WithPersist(rayito.S3Prefix{Prefix: "e2b", Name: "from-rayd"}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill(ctx)
	run(a, `set -e; cd ~; mkdir -p work; echo from rayd > work/a.txt; chmod 0640 work/a.txt; ln -s work/a.txt main; mkfifo fifo`)
	want := run(a, probe)
	if strings.Contains(want, "fifo") {
		want = strings.Replace(want, "fifo\n", "", 1)
	}
	if _, err := a.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	copyFiles(store("e2b", "from-rayd"), filepath.Join(snapDir, "snap-from-rayd"))
	code, body := call("POST", "/v2/sandboxes", map[string]any{"templateID": "snap-from-rayd"})
	if code != http.StatusCreated {
		t.Fatalf("create from rayd's checkpoint: %d %s", code, body)
	}
	var made struct{ SandboxID string }
	json.Unmarshal(body, &made)
	m, err := rayito.Connect(ctx, made.SandboxID, p.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill(ctx)
	if got := run(m, probe); got != want {
		t.Fatalf("restored from rayd's checkpoint:\n%s\nwant\n%s", got, want)
	}

	// E2B → rayd.
	run(m, `set -e; cd ~; echo from e2b > work/b.txt; mkdir -p empty`)
	want = run(m, probe+` && cat work/b.txt`)
	code, body = call("POST", "/sandboxes/"+made.SandboxID+"/snapshots", map[string]string{"name": "to-rayd"})
	if code != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", code, body)
	}
	var snap struct{ SnapshotID string }
	json.Unmarshal(body, &snap)
	sd := filepath.Join(snapDir, snap.SnapshotID)
	mf, err := os.Open(filepath.Join(sd, checkpoint.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	man, err := checkpoint.ParseManifest(mf)
	mf.Close()
	arch, _ := os.ReadFile(filepath.Join(sd, checkpoint.ArchiveName))
	sum := sha256.Sum256(arch)
	if err != nil || man.SHA256 != hex.EncodeToString(sum[:]) || man.Size != int64(len(arch)) || man.Files < 2 || man.Symlinks != 1 {
		t.Fatalf("the snapshot's manifest %+v, %v", man, err)
	}
	upload(sd, "e2b/from-e2b")
	b, err := rayito.Create(ctx, p.opts(rayito.WithPersist(rayito.S3Prefix{Prefix: "e2b", Name: "from-e2b"}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Kill(ctx)
	if got := run(b, probe+` && cat work/b.txt`); got != want {
		t.Fatalf("rayd restored the E2B snapshot:\n%s\nwant\n%s", got, want)
	}

	// One byte changed: refused, no sandbox made.
	before, err := rayito.List(ctx, p.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	arch[len(arch)/2] ^= 0x40
	if err := os.WriteFile(filepath.Join(sd, checkpoint.ArchiveName), arch, 0o600); err != nil {
		t.Fatal(err)
	}
	code, body = call("POST", "/v2/sandboxes", map[string]any{"templateID": snap.SnapshotID})
	if code != http.StatusBadRequest || !strings.Contains(string(body), "checksum mismatch") || strings.Contains(string(body), snapDir) {
		t.Fatalf("a changed snapshot: %d %s", code, body)
	}
	after, err := rayito.List(ctx, p.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("a refused snapshot made a sandbox: %d sandboxes, %d before", len(after), len(before))
	}
}
