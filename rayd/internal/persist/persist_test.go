package persist_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rayito-dev/rayito/rayd/internal/persist"
	"github.com/rayito-dev/rayito/rayd/internal/persist/archive"
	"github.com/rayito-dev/rayito/rayd/internal/persist/persisttest"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

const (
	bucket = "rayito-test"
	uid    = 1000
)

// env is a HOME pair, the file layer, the stores and a manager.
type env struct {
	t      *testing.T
	srv    *persisttest.Server
	fs     *safefs.FS
	m      *persist.Manager
	stores persist.Stores
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: reads and writes HOME as uid 1000 (setfsuid)")
	}
	srv := persisttest.New(t, bucket)
	f, err := safefs.New(safefs.Options{Privileged: true, DiskReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv, fs: f, stores: persist.NewS3Stores(srv.Config())}
	e.m = persist.New(persist.Options{FS: f, Stores: e.stores, Producer: "rayd/test", PartSize: 5 << 20})
	return e
}

// home makes an empty HOME owned by uid 1000.
func (e *env) home() (safefs.User, string) {
	e.t.Helper()
	dir := e.t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		must(e.t, os.Chmod(d, 0o755))
	}
	h := filepath.Join(dir, "home")
	must(e.t, os.Mkdir(h, 0o750))
	must(e.t, os.Chown(h, uid, uid))
	return safefs.User{UID: uid, GID: uid, Groups: []uint32{uid}, Home: h}, h
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, home, rel string, data []byte, perm os.FileMode) {
	t.Helper()
	p := filepath.Join(home, rel)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, data, perm))
	for d := p; d != home; d = filepath.Dir(d) {
		must(t, os.Lchown(d, uid, uid))
	}
}

func req(u safefs.User, h, prefix, name string) persist.Request {
	return persist.Request{Bucket: bucket, Prefix: prefix, HasLocation: true, Name: name, User: u, Home: h}
}

// TestCheckpointRestore: a HOME goes to the store as the format says and
// comes back in another HOME: files (one of several parts), a link,
// modes; the manifest is written last and names the archive's sha256.
func TestCheckpointRestore(t *testing.T) {
	e := newEnv(t)
	u, src := e.home()
	big := make([]byte, 12<<20) // incompressible: three 5 MiB parts
	rand.Read(big)
	write(t, src, "work/notes.md", []byte("# notes\n"), 0o600)
	write(t, src, "work/big.bin", big, 0o644)
	must(t, os.Symlink("work/notes.md", filepath.Join(src, "notes")))
	must(t, os.Lchown(filepath.Join(src, "notes"), uid, uid))

	var started, progressed atomic.Int64
	var manifestBeforeArchive atomic.Bool
	var mu sync.Mutex
	var order []string
	e.srv.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut || r.Method == http.MethodPost {
			mu.Lock()
			order = append(order, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
			mu.Unlock()
		}
		return false
	})
	r := req(u, src, "tenants/acme/", "proj")
	r.Started = func(name string, total int64) {
		if name != "proj" || total != 0 {
			t.Errorf("started %q %d", name, total)
		}
		started.Add(1)
	}
	r.Progress = func(persist.Progress) { progressed.Add(1) }
	res, err := e.m.Checkpoint(t.Context(), r)
	must(t, err)
	if started.Load() != 1 || progressed.Load() == 0 {
		t.Errorf("started %d times, progress %d times", started.Load(), progressed.Load())
	}
	if res.Counts.Files != 2 || res.Counts.Symlinks != 1 || res.Counts.Directories != 1 || res.Name != "proj" {
		t.Errorf("result %+v", res)
	}
	keys, err := e.srv.Keys(t.Context(), bucket, "")
	must(t, err)
	if strings.Join(keys, ",") != "tenants/acme/proj/home.tar.gz,tenants/acme/proj/manifest.json" {
		t.Errorf("keys %v", keys)
	}
	arch, err := e.srv.Object(t.Context(), bucket, "tenants/acme/proj/home.tar.gz")
	must(t, err)
	sum := sha256.Sum256(arch)
	if hex.EncodeToString(sum[:]) != res.SHA256 || int64(len(arch)) != res.Bytes {
		t.Errorf("archive sha256/size differ from the result")
	}
	mb, err := e.srv.Object(t.Context(), bucket, "tenants/acme/proj/manifest.json")
	must(t, err)
	man, err := archive.ParseManifest(bytes.NewReader(mb))
	must(t, err)
	if man.SHA256 != res.SHA256 || man.Size != res.Bytes || man.Files != 2 || man.Producer != "rayd/test" {
		t.Errorf("manifest %+v", man)
	}
	mu.Lock()
	last := order[len(order)-1]
	parts := 0
	for _, o := range order {
		if strings.Contains(o, "partNumber=") {
			parts++
		}
		if strings.Contains(o, "manifest.json") && o != last {
			manifestBeforeArchive.Store(true)
		}
	}
	mu.Unlock()
	if !strings.HasPrefix(last, "PUT /rayito-test/tenants/acme/proj/manifest.json") || manifestBeforeArchive.Load() {
		t.Errorf("the manifest is not written last: %v", order)
	}
	if parts != 3 {
		t.Errorf("%d parts, want 3 of 5 MiB", parts)
	}

	u2, dst := e.home()
	r = req(u2, dst, "tenants/acme", "proj")
	var total int64
	r.Started = func(_ string, n int64) { total = n }
	res2, err := e.m.Restore(t.Context(), r)
	must(t, err)
	if total != res.Bytes || res2.SHA256 != res.SHA256 || res2.Counts.Files != 2 {
		t.Errorf("restore %+v (started with %d)", res2, total)
	}
	got, err := os.ReadFile(filepath.Join(dst, "work/big.bin"))
	if err != nil || !bytes.Equal(got, big) {
		t.Errorf("big.bin: %d bytes, %v", len(got), err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "notes")); err != nil || l != "work/notes.md" {
		t.Errorf("notes -> %q, %v", l, err)
	}
	if st, err := os.Stat(filepath.Join(dst, "work/notes.md")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("notes.md: %v %v", st, err)
	}
	if n, err := e.srv.Uploads(t.Context(), bucket); err != nil || n != 0 {
		t.Errorf("%d uploads left, %v", n, err)
	}
}

// TestSmallCheckpointOnePut: an archive smaller than a part is one PUT.
func TestSmallCheckpointOnePut(t *testing.T) {
	e := newEnv(t)
	u, src := e.home()
	write(t, src, "a", []byte("a"), 0o644)
	var multipart atomic.Bool
	e.srv.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Has("uploads") {
			multipart.Store(true)
		}
		return false
	})
	_, err := e.m.Checkpoint(t.Context(), req(u, src, "p", ""))
	must(t, err)
	if multipart.Load() {
		t.Error("a multipart upload for a small archive")
	}
	keys, _ := e.srv.Keys(t.Context(), bucket, "p/")
	if strings.Join(keys, ",") != "p/default/home.tar.gz,p/default/manifest.json" {
		t.Errorf("keys %v (name default)", keys)
	}
}

// countingStores fails the test on any use: a refusal must come before
// any S3 call.
type countingStores struct{ n atomic.Int64 }

func (c *countingStores) Store(context.Context, string) (persist.Store, error) {
	c.n.Add(1)
	return nil, errors.New("no store expected")
}

// TestBinding: a sandbox bound to a bucket and prefix refuses every other
// place before any S3 call, and uses its own when none is given.
func TestBinding(t *testing.T) {
	e := newEnv(t)
	u, h := e.home()
	cs := &countingStores{}
	m := persist.New(persist.Options{FS: e.fs, Stores: cs})
	b, err := persist.NewBinding(bucket, "tenants/acme/")
	must(t, err)
	outside := []persist.Request{
		{Bucket: "other-bucket", Prefix: "tenants/acme", HasLocation: true},
		{Bucket: bucket, Prefix: "tenants/bob", HasLocation: true},
		{Bucket: bucket, Prefix: "tenants/acme2", HasLocation: true},
		{Bucket: bucket, Prefix: "tenants", HasLocation: true, Name: "bob"},
		{Bucket: bucket, Prefix: "", HasLocation: true, Name: "tenants"},
		{Bucket: bucket, Prefix: "tenants", HasLocation: true},
	}
	for i, r := range outside {
		r.Binding, r.User, r.Home = b, u, h
		if _, err := m.Checkpoint(t.Context(), r); !errors.Is(err, persist.ErrOutsideBinding) {
			t.Errorf("checkpoint %d: %v, want ErrOutsideBinding", i, err)
		}
		if _, err := m.Restore(t.Context(), r); !errors.Is(err, persist.ErrOutsideBinding) {
			t.Errorf("restore %d: %v, want ErrOutsideBinding", i, err)
		}
	}
	if cs.n.Load() != 0 {
		t.Fatalf("%d store uses before the refusal", cs.n.Load())
	}
	// Inside: the bound place, a sub-prefix, the bound prefix as
	// prefix+name.
	inside := []persist.Request{
		{},
		{Bucket: bucket, Prefix: "tenants/acme", HasLocation: true, Name: "x"},
		{Bucket: bucket, Prefix: "tenants/acme/sub", HasLocation: true},
		{Bucket: bucket, Prefix: "tenants", HasLocation: true, Name: "acme"},
	}
	for i, r := range inside {
		r.Binding, r.User, r.Home = b, u, h
		if _, err := m.Checkpoint(t.Context(), r); err == nil || errors.Is(err, persist.ErrOutsideBinding) {
			t.Errorf("inside %d: %v, want the store's error", i, err)
		}
	}
	// Unbound: no location is an error, any location goes.
	if _, err := m.Checkpoint(t.Context(), persist.Request{User: u, Home: h}); !errors.Is(err, persist.ErrNotBound) {
		t.Errorf("unbound without a location: %v", err)
	}
	for _, bad := range []persist.Request{
		{Bucket: "A", HasLocation: true}, {Bucket: bucket, Prefix: "a//b", HasLocation: true},
		{Bucket: bucket, Prefix: "../x", HasLocation: true}, {Bucket: bucket, HasLocation: true, Name: "../x"},
		{Bucket: bucket, HasLocation: true, Name: "a/b"}, {Bucket: bucket, HasLocation: true, Region: "US EAST"},
		{Bucket: bucket, HasLocation: true, Prefix: strings.Repeat("p", 901)},
	} {
		bad.User, bad.Home = u, h
		if _, err := m.Checkpoint(t.Context(), bad); !errors.Is(err, persist.ErrInvalidLocation) {
			t.Errorf("%+v: %v, want ErrInvalidLocation", bad, err)
		}
	}
}

// blockingStores hands out the real store, whose uploads wait on gate.
type blockingStores struct {
	persist.Stores
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (b *blockingStores) Store(ctx context.Context, region string) (persist.Store, error) {
	s, err := b.Stores.Store(ctx, region)
	return blockingStore{s, b}, err
}

type blockingStore struct {
	persist.Store
	b *blockingStores
}

func (s blockingStore) UploadPart(ctx context.Context, bucket, key, id string, n int32, body []byte) (persist.Part, error) {
	s.b.once.Do(func() { close(s.b.entered) })
	select {
	case <-s.b.gate:
	case <-ctx.Done():
		return persist.Part{}, ctx.Err()
	}
	return s.Store.UploadPart(ctx, bucket, key, id, n, body)
}

func bigHome(e *env) (safefs.User, string) {
	u, h := e.home()
	big := make([]byte, 11<<20)
	rand.Read(big)
	write(e.t, h, "big", big, 0o644)
	return u, h
}

// TestOneAtATime: a second checkpoint or restore while one runs is
// refused; the first one finishes.
func TestOneAtATime(t *testing.T) {
	e := newEnv(t)
	u, h := bigHome(e)
	bs := &blockingStores{Stores: e.stores, gate: make(chan struct{}), entered: make(chan struct{})}
	m := persist.New(persist.Options{FS: e.fs, Stores: bs, PartSize: 5 << 20})
	errc := make(chan error, 1)
	go func() { _, err := m.Checkpoint(context.Background(), req(u, h, "p", "a")); errc <- err }()
	select {
	case <-bs.entered:
	case err := <-errc:
		t.Fatalf("checkpoint ended before uploading: %v", err)
	}
	if _, err := m.Checkpoint(t.Context(), req(u, h, "p", "b")); !errors.Is(err, persist.ErrBusy) {
		t.Errorf("second checkpoint: %v, want ErrBusy", err)
	}
	if _, err := m.Restore(t.Context(), req(u, h, "p", "a")); !errors.Is(err, persist.ErrBusy) {
		t.Errorf("restore meanwhile: %v, want ErrBusy", err)
	}
	close(bs.gate)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, err := m.Restore(t.Context(), req(u, h, "p", "a")); err != nil {
		t.Errorf("restore after: %v", err)
	}
}

// TestCancelMidUpload: a checkpoint cancelled (as a /suspend cuts it)
// while its parts upload aborts the multipart upload and writes no
// manifest; an earlier checkpoint of the same place stays whole.
func TestCancelMidUpload(t *testing.T) {
	e := newEnv(t)
	u, h := bigHome(e)
	bs := &blockingStores{Stores: e.stores, gate: make(chan struct{}), entered: make(chan struct{})}
	m := persist.New(persist.Options{FS: e.fs, Stores: bs, PartSize: 5 << 20})
	errSuspending := errors.New("suspending")
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := m.Checkpoint(ctx, req(u, h, "p", "cut")); errc <- err }()
	select {
	case <-bs.entered:
	case err := <-errc:
		t.Fatalf("checkpoint ended before uploading: %v", err)
	}
	cancel(errSuspending)
	err := <-errc
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cut checkpoint: %v, want canceled", err)
	}
	keys, _ := e.srv.Keys(t.Context(), bucket, "p/cut/")
	if len(keys) != 0 {
		t.Errorf("objects left: %v", keys)
	}
	if n, err := e.srv.Uploads(t.Context(), bucket); err != nil || n != 0 {
		t.Errorf("%d multipart uploads left, %v", n, err)
	}
	// The slot is free again.
	close(bs.gate)
	if _, err := m.Checkpoint(t.Context(), req(u, h, "p", "cut")); err != nil {
		t.Errorf("checkpoint after the cut: %v", err)
	}
}

// tgz is a tar.gz of hs (a regular file's content: its size in 'x').
func tgz(t *testing.T, hs ...tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, h := range hs {
		must(t, tw.WriteHeader(&h))
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte{'x'}, int(h.Size)))
		}
	}
	must(t, tw.Close())
	must(t, zw.Close())
	return b.Bytes()
}

// plant writes archive a and a manifest for it (version, or a sha256
// that is not a's when lie) at p/name.
func (e *env) plant(name string, a []byte, version int, lie bool) {
	e.t.Helper()
	sum := sha256.Sum256(a)
	s := hex.EncodeToString(sum[:])
	if lie {
		s = strings.Repeat("0", 64)
	}
	man := &archive.Manifest{Version: version, Format: archive.Format, Archive: archive.ArchiveName, SHA256: s, Size: int64(len(a)), CreatedAt: time.Now().UTC()}
	must(e.t, e.srv.Put(e.t.Context(), bucket, "p/"+name+"/home.tar.gz", a))
	must(e.t, e.srv.Put(e.t.Context(), bucket, "p/"+name+"/manifest.json", man.Encode()))
}

func empty(t *testing.T, dir string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	must(t, err)
	if len(des) != 0 {
		t.Errorf("%d entries written: %v", len(des), des[0].Name())
	}
}

// TestRestoreRefusals: whatever the store holds, a restore that cannot
// trust it extracts nothing: a missing manifest, another version, an
// archive whose sha256 or size is not the manifest's, a crafted archive
// whose hostile entry comes after harmless ones.
func TestRestoreRefusals(t *testing.T) {
	e := newEnv(t)
	reg := func(name string) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}
	}
	good := tgz(t, reg("first"), reg("second"))
	e.plant("v2", good, 2, false)
	e.plant("lie", good, 1, true)
	e.plant("dotdot", tgz(t, reg("harmless"), reg("../escape")), 1, false)
	e.plant("abs", tgz(t, reg("harmless"), reg("/etc/cron.d/x")), 1, false)
	e.plant("through", tgz(t, reg("harmless"), tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, reg("l/passwd")), 1, false)
	e.plant("garbage", []byte("not an archive at all"), 1, false)
	e.plant("swapped", good, 1, false)
	must(t, e.srv.Put(t.Context(), bucket, "p/swapped/home.tar.gz", tgz(t, reg("other"))))
	e.plant("missing-archive", good, 1, false)
	_, err := e.srv.Client().DeleteObject(t.Context(), deleteInput(bucket, "p/missing-archive/home.tar.gz"))
	must(t, err)
	cases := map[string]error{
		"nothing":         persist.ErrNoCheckpoint,
		"v2":              archive.ErrUnsupported,
		"lie":             archive.ErrChecksum,
		"swapped":         archive.ErrChecksum,
		"missing-archive": archive.ErrChecksum,
		"dotdot":          archive.ErrUnsafe,
		"abs":             archive.ErrUnsafe,
		"through":         archive.ErrUnsafe,
		"garbage":         archive.ErrUnsafe,
	}
	for name, want := range cases {
		u, h := e.home()
		if _, err := e.m.Restore(t.Context(), req(u, h, "p", name)); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		empty(t, h)
	}
	if _, err := os.Lstat("/etc/cron.d/x"); err == nil {
		t.Error("/etc/cron.d/x written")
	}
}

// TestCredentials: without an execution role rayd has no credentials;
// with credentials the store refuses, the call is denied; neither error
// quotes the store's message.
func TestCredentials(t *testing.T) {
	e := newEnv(t)
	u, h := e.home()
	e.srv.NoRole.Store(true)
	m := persist.New(persist.Options{FS: e.fs, Stores: persist.NewS3Stores(e.srv.Config())})
	if _, err := m.Checkpoint(t.Context(), req(u, h, "p", "")); !errors.Is(err, persist.ErrNoCredentials) {
		t.Errorf("no role: %v, want ErrNoCredentials", err)
	}
	e.srv.NoRole.Store(false)
	e.srv.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`<Error><Code>AccessDenied</Code><Message>secret bucket rayito-test key p/x</Message></Error>`))
		return true
	})
	m = persist.New(persist.Options{FS: e.fs, Stores: persist.NewS3Stores(e.srv.Config())})
	_, err := m.Restore(t.Context(), req(u, h, "p", ""))
	if !errors.Is(err, persist.ErrStorageDenied) || strings.Contains(err.Error(), "rayito-test") {
		t.Errorf("denied: %v", err)
	}
	e.srv.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusInternalServerError)
		return true
	})
	m = persist.New(persist.Options{FS: e.fs, Stores: persist.NewS3Stores(e.srv.Config())})
	if _, err := m.Restore(t.Context(), req(u, h, "p", "")); !errors.Is(err, persist.ErrStorageUnavailable) {
		t.Errorf("500: %v", err)
	}
}

// TestNameRemembered: without a name, a sandbox uses the name it last
// used, else "default".
func TestNameRemembered(t *testing.T) {
	e := newEnv(t)
	u, h := e.home()
	write(t, h, "f", []byte("1"), 0o644)
	if _, err := e.m.Restore(t.Context(), req(u, h, "p", "proj")); !errors.Is(err, persist.ErrNoCheckpoint) {
		t.Fatal(err)
	}
	res, err := e.m.Checkpoint(t.Context(), req(u, h, "p", ""))
	must(t, err)
	if res.Name != "proj" {
		t.Errorf("name %q, want the restored proj", res.Name)
	}
}

func deleteInput(b, k string) *s3.DeleteObjectInput {
	return &s3.DeleteObjectInput{Bucket: &b, Key: &k}
}
