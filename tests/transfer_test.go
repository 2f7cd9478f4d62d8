package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/rayito-dev/rayito/proto/localplatform"
	rayito "github.com/rayito-dev/rayito/sdk"
)

func put(t *testing.T, u string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// TestPresignedTransfers, on the local platform with real rayd: an upload
// URL takes a plain HTTP PUT of random bytes and the sandbox imports them
// (sha256 checked in the sandbox; the object is deleted after); a
// download URL serves the same bytes to a plain GET; max bytes refuses a
// larger object and leaves no file; an expected sha256 that does not match
// leaves no file; Cancel ends an import; an expired URL is refused by the
// store and its import fails with ErrExpired.
func TestPresignedTransfers(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	s := p.create(ctx)
	defer s.Kill(ctx)

	data := randomBytes(t, 3<<20+17)
	tk, err := s.Files.UploadURL(ctx, "in/data.bin", rayito.WithExpectedSHA256(sum(data)))
	if err != nil {
		t.Fatal(err)
	}
	if tk.Method != http.MethodPut || !strings.HasPrefix(tk.URL, "http://127.0.0.1:") || time.Until(tk.ExpiresAt) < 59*time.Minute {
		t.Fatalf("ticket %s, expires %v", tk.Method, tk.ExpiresAt)
	}
	if st, err := tk.Status(ctx); err != nil || st.Phase != "waiting" {
		t.Fatalf("status before the PUT: %+v %v", st, err)
	}
	if code := put(t, tk.URL, data); code != http.StatusOK {
		t.Fatalf("PUT: %d", code)
	}
	e, err := tk.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e == nil || e.Size != int64(len(data)) {
		t.Fatalf("entry %+v", e)
	}
	res, err := s.Commands.Run(ctx, "sha256sum in/data.bin | cut -d' ' -f1; stat -c %U in/data.bin")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(res.Stdout); len(got) != 2 || got[0] != sum(data) {
		t.Errorf("in the sandbox: %q, want %s", res.Stdout, sum(data))
	}
	// Single use: the import deleted its object.
	if code := put(t, tk.URL, []byte("again")); code != http.StatusOK {
		t.Errorf("second PUT: %d", code)
	}
	if b, _ := s.Files.Read(ctx, "in/data.bin"); !bytes.Equal(b, data) {
		t.Error("the file changed after a second PUT")
	}

	// Download: the same bytes through a plain GET.
	link, err := s.Files.DownloadURL(ctx, "in/data.bin")
	if err != nil {
		t.Fatal(err)
	}
	if link.Size != int64(len(data)) || link.SHA256 != sum(data) {
		t.Errorf("link size %d sha %s", link.Size, link.SHA256)
	}
	resp, err := http.Get(link.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
		t.Errorf("GET: %d, %d bytes, equal %v", resp.StatusCode, len(got), bytes.Equal(got, data))
	}
	// An empty file, both ways.
	if e, err := s.Files.UploadThroughURL(ctx, "in/empty", bytes.NewReader(nil), 0); err != nil || e.Size != 0 {
		t.Errorf("empty upload: %+v %v", e, err)
	} else if body, link, err := s.Files.DownloadThroughURL(ctx, "in/empty"); err != nil || link.Size != 0 {
		t.Errorf("empty download: %+v %v", link, err)
	} else {
		body.Close()
	}
	if _, err := s.Files.DownloadURL(ctx, "in/missing"); !errors.Is(err, rayito.ErrNotFound) {
		t.Errorf("download of a missing file: %v", err)
	}

	// max bytes: too large, no file.
	tk, err = s.Files.UploadURL(ctx, "in/big.bin", rayito.WithMaxBytes(1000))
	if err != nil {
		t.Fatal(err)
	}
	if code := put(t, tk.URL, randomBytes(t, 1001)); code != http.StatusOK {
		t.Fatalf("PUT: %d", code)
	}
	if _, err := tk.Wait(ctx); !errors.Is(err, rayito.ErrTooLarge) {
		t.Errorf("over max bytes: %v", err)
	}
	if ok, _ := s.Files.Exists(ctx, "in/big.bin"); ok {
		t.Error("a file was left after too_large")
	}
	// A checksum that does not match: no file.
	tk, err = s.Files.UploadURL(ctx, "in/sum.bin", rayito.WithExpectedSHA256(sum([]byte("other"))))
	if err != nil {
		t.Fatal(err)
	}
	put(t, tk.URL, []byte("these bytes"))
	if _, err := tk.Wait(ctx); !errors.Is(err, rayito.ErrChecksumMismatch) {
		t.Errorf("checksum mismatch: %v", err)
	}
	if ok, _ := s.Files.Exists(ctx, "in/sum.bin"); ok {
		t.Error("a file was left after checksum_mismatch")
	}

	// Cancel.
	tk, err = s.Files.UploadURL(ctx, "in/cancelled.bin")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := tk.Cancel(ctx); err != nil || st.Phase != "cancelled" {
		t.Errorf("cancel: %+v %v", st, err)
	}
	if _, err := tk.Wait(ctx); !errors.Is(err, rayito.ErrTransferCancelled) {
		t.Errorf("wait after cancel: %v", err)
	}

	// Expired: the store refuses the PUT, the import fails.
	tk, err = s.Files.UploadURL(ctx, "in/late.bin", rayito.WithURLExpiry(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if code := put(t, tk.URL, []byte("late")); code != http.StatusForbidden {
		t.Errorf("PUT after expiry: %d, want 403", code)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := tk.Wait(wctx); !errors.Is(err, rayito.ErrExpired) {
		t.Errorf("expired: %v", err)
	}
	if _, err := s.Files.UploadURL(ctx, "x", rayito.WithURLExpiry(13*time.Hour)); !errors.Is(err, rayito.ErrInvalidArgument) {
		t.Errorf("a URL outliving the local credentials: %v", err)
	}
}

// TestTransferStoreRefusals: the owner's store port refuses what the
// transfer credentials may not do (a key outside the transfer prefix, a
// tampered URL), and serves only the platform's owner (another uid gets
// 403); the sandbox's own code has no route to it (the port is the host's
// loopback, not the sandbox's).
func TestTransferStoreRefusals(t *testing.T) {
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx := context.Background()
	resp, err := http.Get(p.endpoint + localplatform.TransferSettingsPath)
	if err != nil {
		t.Fatal(err)
	}
	var st localplatform.TransferSettings
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || resp.Header.Get("Cache-Control") != "no-store" || st.Bucket != localplatform.DefaultBucket || time.Until(st.Expiration) > localplatform.TransferCredentialTTL {
		t.Fatalf("settings %+v %v", st, err)
	}
	creds := aws.Credentials{AccessKeyID: st.AccessKeyID, SecretAccessKey: st.SecretAccessKey}
	sign := func(method, key string) string {
		req, _ := http.NewRequest(method, st.StoreURL+"/"+st.Bucket+"/"+key+"?X-Amz-Expires=600", nil)
		u, _, err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).
			PresignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", st.Region, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	if code := put(t, sign(http.MethodPut, "tenants/acme/proj/manifest.json"), []byte("{}")); code != http.StatusForbidden {
		t.Errorf("PUT outside the transfer prefix: %d", code)
	}
	good := sign(http.MethodPut, localplatform.TransferPrefix+"/sbx/up/x")
	if code := put(t, strings.Replace(good, "/up/x?", "/up/y?", 1), []byte("a")); code != http.StatusForbidden {
		t.Errorf("tampered PUT: %d", code)
	}
	if code := put(t, good, []byte("a")); code != http.StatusOK {
		t.Errorf("PUT: %d", code)
	}

	a := p.create(ctx)
	defer a.Kill(ctx)

	// The sandbox's code: the store's port on its loopback, and on its
	// gateway, is not the platform's.
	u, _ := url.Parse(st.StoreURL)
	script := `for h in 127.0.0.1 $(ip route 2>/dev/null | awk '/default/{print $3}'); do
curl -s -o /dev/null -w "%{http_code} " --max-time 3 "http://$h:` + u.Port() + `/` + st.Bucket + `/"; echo "rc=$?"; done`
	res, err := a.Commands.Run(ctx, script)
	if err != nil && res == nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if !strings.HasSuffix(line, "rc=7") && !strings.HasSuffix(line, "rc=28") {
			t.Errorf("the sandbox reached a store port: %q", line)
		}
	}
	t.Logf("from the sandbox: %q", res.Stdout)

	// Another uid: 403 from the store's port.
	if !isRoot() {
		t.Log("not root: the other-uid check of the store's port is skipped")
		return
	}
	get := sign(http.MethodGet, localplatform.TransferPrefix+"/sbx/up/x")
	cmd := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", get)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil || string(out) != "403" {
		t.Errorf("GET as uid 65534: %q %v, want 403", out, err)
	}
	resp, err = http.Get(get)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET as the owner: %v %v", resp.StatusCode, err)
	}
	cmd = exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", p.endpoint+localplatform.TransferSettingsPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.Output(); err != nil || string(out) != "403" {
		t.Errorf("settings as uid 65534: %q %v, want 403", out, err)
	}
}

// TestTransferThreshold: with WithTransferThreshold on the local platform
// (where direct HTTP is the default), Write and Read of files from the
// threshold up go through the store (a download object appears in it),
// smaller ones directly; the bytes are the same either way. It logs one
// measurement of both paths on 64 MiB.
func TestTransferThreshold(t *testing.T) {
	stateDir := t.TempDir()
	p := startPlatform(t, stateDir)
	defer p.stop(true)
	ctx := context.Background()
	s, err := rayito.Create(ctx, p.opts(rayito.WithTransferThreshold(1<<20))...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill(ctx)
	downs := filepath.Join(stateDir, "s3", "buckets", localplatform.DefaultBucket, localplatform.TransferPrefix, s.ID(), "down")
	if !s.Files.PrefersURL(1<<20) || s.Files.PrefersURL(1<<20-1) {
		t.Fatal("PrefersURL does not follow the threshold")
	}
	small := randomBytes(t, 1000)
	if _, err := s.Files.Write(ctx, "small", small); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Files.Read(ctx, "small"); err != nil || !bytes.Equal(b, small) {
		t.Fatalf("small read: %v", err)
	}
	if ents, _ := os.ReadDir(downs); len(ents) != 0 {
		t.Errorf("a small read went through the store (%d objects)", len(ents))
	}
	big := randomBytes(t, 64<<20)
	start := time.Now()
	if _, err := s.Files.Write(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	viaWrite := time.Since(start)
	start = time.Now()
	b, err := s.Files.Read(ctx, "big")
	viaRead := time.Since(start)
	if err != nil || !bytes.Equal(b, big) {
		t.Fatalf("big read: %v", err)
	}
	if ents, _ := os.ReadDir(downs); len(ents) != 1 {
		t.Errorf("the big read made %d download objects, want 1", len(ents))
	}
	d, err := rayito.Connect(ctx, s.ID(), p.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := d.Files.Write(ctx, "big2", big); err != nil {
		t.Fatal(err)
	}
	directWrite := time.Since(start)
	start = time.Now()
	if b, err := d.Files.Read(ctx, "big2"); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("direct read: %v", err)
	}
	directRead := time.Since(start)
	t.Logf("64 MiB on the local platform: write %v through the store, %v direct; read %v through the store, %v direct",
		viaWrite.Round(time.Millisecond), directWrite.Round(time.Millisecond), viaRead.Round(time.Millisecond), directRead.Round(time.Millisecond))
}
