package transfer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

const (
	bucket  = "rayito-transfers"
	region  = "us-test-1"
	sandbox = "microvm-1234"
)

// world is S3 at the bucket's real regional host name (resolved, for
// rayd, to a loopback TLS server it is allowed to reach in tests), an
// SDK client that presigns as a caller would, and a Manager.
type world struct {
	t        *testing.T
	srv      *httptest.Server
	backend  *s3mem.Backend
	presign  *s3.PresignClient
	client   *s3.Client
	m        *Manager
	home     string
	user     safefs.User
	requests atomic.Int64
	hook     atomic.Pointer[func(w http.ResponseWriter, r *http.Request) bool]
}

// testCA makes a CA and a server certificate for *.s3.<region>.amazonaws.com.
func testCA(t *testing.T) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"*.s3." + region + ".amazonaws.com", "*.s3.other-1.amazonaws.com"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, backend: s3mem.New()}
	if err := w.backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(w.backend, gofakes3.WithLogger(gofakes3.DiscardLog()), gofakes3.WithHostBucketBase("s3."+region+".amazonaws.com")).Server()
	pool, cert := testCA(t)
	w.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.requests.Add(1)
		if h := w.hook.Load(); h != nil && (*h)(rw, r) {
			return
		}
		faker.ServeHTTP(rw, r)
	}))
	w.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	w.srv.StartTLS()
	t.Cleanup(w.srv.Close)
	addr := netip.MustParseAddrPort(w.srv.Listener.Addr().String())
	// The SDK's own client, for the caller's side (presigning, reading,
	// completing), reaches the same server.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr.String())
		}}}
	w.client = s3.New(s3.Options{Region: region, Credentials: credentials.NewStaticCredentialsProvider("AKIDCALLER", "secret", ""), HTTPClient: hc})
	w.presign = s3.NewPresignClient(w.client)
	w.home = t.TempDir()
	w.user = safefs.User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Home: w.home}
	fsys, err := safefs.New(safefs.Options{DiskReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	w.m = New(Options{
		FS: fsys, SandboxID: func() string { return sandbox },
		Lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if strings.HasSuffix(host, ".amazonaws.com") {
				return []netip.Addr{addr.Addr()}, nil
			}
			return nil, errors.New("no such host")
		},
		// The server's port is not 443: the test dials the real one.
		Allow:    func(a netip.Addr) bool { return a == addr.Addr() },
		RootCAs:  pool,
		PollFast: 20 * time.Millisecond, PollSlow: 20 * time.Millisecond,
	})
	t.Cleanup(w.m.Close)
	// Dial the test server's port whatever the URL says (443).
	tr := w.m.client.Transport.(*http.Transport)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		h, _, _ := net.SplitHostPort(a)
		return dial(ctx, network, net.JoinHostPort(h, strconv.Itoa(int(addr.Port()))))
	}
	return w
}

func key(dir Direction, id string) string {
	return "rayito-transfer/" + sandbox + "/" + string(dir) + "/" + id
}

func (w *world) obj(k string) Object { return Object{Bucket: bucket, Key: k, Region: region} }

func (w *world) signedGet(k string) Signed {
	req, err := w.presign.PresignGetObject(w.t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)}, s3.WithPresignExpires(time.Hour))
	if err != nil {
		w.t.Fatal(err)
	}
	return Signed{URL: req.URL}
}

func (w *world) signedPut(k string) Signed {
	req, err := w.presign.PresignPutObject(w.t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)}, s3.WithPresignExpires(time.Hour))
	if err != nil {
		w.t.Fatal(err)
	}
	return Signed{URL: req.URL}
}

func (w *world) put(k string, body []byte) {
	if _, err := w.backend.PutObject(bucket, k, nil, bytes.NewReader(body), int64(len(body)), nil); err != nil {
		w.t.Fatal(err)
	}
}

// wait watches a transfer to its end.
func (w *world) wait(id string) State {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), 30*time.Second)
	defer cancel()
	var last State
	if err := w.m.Watch(ctx, id, func(s State) error { last = s; return nil }); err != nil {
		w.t.Fatalf("watch: %v (last %+v)", err, last)
	}
	return last
}

func TestCheckURL(t *testing.T) {
	w := newWorld(t)
	k := key(Up, "f1")
	good := w.signedGet(k).URL
	if err := CheckURL(good, w.obj(k)); err != nil {
		t.Fatalf("the SDK's presigned URL: %v", err)
	}
	u, _ := url.Parse(good)
	with := func(f func(u *url.URL)) string {
		c := *u
		f(&c)
		return c.String()
	}
	bad := map[string]string{
		"http":             with(func(u *url.URL) { u.Scheme = "http" }),
		"other host":       with(func(u *url.URL) { u.Host = "evil.example.com" }),
		"other bucket":     with(func(u *url.URL) { u.Host = Host("other-bucket", region) }),
		"global host":      with(func(u *url.URL) { u.Host = bucket + ".s3.amazonaws.com" }),
		"IP literal":       with(func(u *url.URL) { u.Host = "127.0.0.1" }),
		"IPv6 literal":     with(func(u *url.URL) { u.Host = "[::1]" }),
		"IMDS":             with(func(u *url.URL) { u.Host = "169.254.169.254" }),
		"port":             with(func(u *url.URL) { u.Host = u.Host + ":8443" }),
		"userinfo":         with(func(u *url.URL) { u.User = url.UserPassword("a", "b") }),
		"other path":       with(func(u *url.URL) { u.Path = "/" + key(Up, "f2") }),
		"path dotdot":      with(func(u *url.URL) { u.Path = "/" + k + "/../x" }),
		"double encoded":   strings.Replace(good, "/up/", "%252Fup%252F", 1),
		"extra query":      with(func(u *url.URL) { u.RawQuery += "&redirect=https://evil" }),
		"no signature":     with(func(u *url.URL) { q := u.Query(); q.Del("X-Amz-Signature"); u.RawQuery = q.Encode() }),
		"fragment":         with(func(u *url.URL) { u.Fragment = "x" }),
		"backslash":        strings.Replace(good, "/rayito", `\rayito`, 1),
		"newline":          good + "\n",
		"too long":         good + "&X-Amz-Signature=" + strings.Repeat("a", MaxURLLen),
		"not https at all": "file:///etc/passwd",
	}
	for name, raw := range bad {
		if err := CheckURL(raw, w.obj(k)); !errors.Is(err, ErrBadURL) {
			t.Errorf("%s: %v, want ErrBadURL", name, err)
		} else if strings.Contains(err.Error(), "evil") || strings.Contains(err.Error(), k) {
			t.Errorf("%s: the error quotes the URL: %v", name, err)
		}
	}
	other := w.obj(k)
	other.Region = "other-1"
	wrong := strings.Replace(good, "s3."+region, "s3.other-1", 1)
	if err := CheckURL(wrong, other); !errors.Is(err, ErrWrongRegion) {
		t.Errorf("signed for another region: %v", err)
	}
	objs := map[string]Object{
		"dotted bucket":    {Bucket: "a.b.c", Key: k, Region: region},
		"other sandbox":    {Bucket: bucket, Key: "rayito-transfer/microvm-other/up/f", Region: region},
		"wrong direction":  {Bucket: bucket, Key: key(Down, "f"), Region: region},
		"short key":        {Bucket: bucket, Key: sandbox + "/up/f", Region: region},
		"dotdot prefix":    {Bucket: bucket, Key: "../" + sandbox + "/up/f", Region: region},
		"bad id":           {Bucket: bucket, Key: key(Up, "a b"), Region: region},
		"bad region":       {Bucket: bucket, Key: k, Region: "US_EAST"},
		"empty sandbox id": {Bucket: bucket, Key: "p//up/f", Region: region},
	}
	for name, o := range objs {
		if err := CheckObject(o, sandbox, Up); !errors.Is(err, ErrBadURL) {
			t.Errorf("%s: %v, want ErrBadURL", name, err)
		}
	}
	if err := CheckObject(w.obj(k), sandbox, Up); err != nil {
		t.Errorf("good object: %v", err)
	}
	for _, a := range []string{"127.0.0.1", "::1", "169.254.169.254", "fd00:ec2::254", "169.254.1.1", "fe80::1", "0.0.0.0", "224.0.0.1", "::ffff:127.0.0.1"} {
		if !Refused(netip.MustParseAddr(a)) {
			t.Errorf("%s is not refused", a)
		}
	}
	for _, a := range []string{"52.216.1.1", "10.0.0.1", "2600:1f18::1"} {
		if Refused(netip.MustParseAddr(a)) {
			t.Errorf("%s is refused", a)
		}
	}
}

// FuzzCheckURL: whatever the URL, an accepted one is https to the exact
// regional host of the bucket (port 443 or none), for the object's key.
func FuzzCheckURL(f *testing.F) {
	k := key(Up, "f1")
	f.Add("https://" + Host(bucket, region) + "/" + k + "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=A%2F20260101%2F" + region + "%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=ab")
	f.Add("https://127.0.0.1/" + k)
	f.Add("https://" + Host(bucket, region) + ":443/" + k + "/..")
	f.Add("https://user@" + Host(bucket, region) + "/" + k)
	f.Fuzz(func(t *testing.T, raw string) {
		o := Object{Bucket: bucket, Key: k, Region: region}
		if err := CheckURL(raw, o); err != nil {
			if !errors.Is(err, ErrBadURL) && !errors.Is(err, ErrWrongRegion) {
				t.Fatalf("error %v", err)
			}
			return
		}
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Hostname() != Host(bucket, region) || (u.Port() != "" && u.Port() != "443") || u.User != nil {
			t.Fatalf("accepted %q", raw)
		}
		if p, err := url.PathUnescape(u.EscapedPath()); err != nil || p != "/"+k {
			t.Fatalf("accepted path of %q", raw)
		}
	})
}

func TestImport(t *testing.T) {
	w := newWorld(t)
	data := bytes.Repeat([]byte("rayito "), 100000)
	sum := sha256.Sum256(data)
	k := key(Up, "f1")
	w.put(k, data)
	id, err := w.m.StartImport(ImportRequest{Object: w.obj(k), Get: w.signedGet(k), ExpectedSHA256: hex.EncodeToString(sum[:]), Path: "in/data.txt", User: w.user, Mode: 0o640})
	if err != nil {
		t.Fatal(err)
	}
	st := w.wait(id)
	if st.Phase != Done || st.SHA256 != hex.EncodeToString(sum[:]) || st.BytesDone != uint64(len(data)) || st.Entry == nil || st.Direction != Up {
		t.Fatalf("state %+v", st)
	}
	got, err := os.ReadFile(filepath.Join(w.home, "in/data.txt"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file: %d bytes, %v", len(got), err)
	}
	if fi, _ := os.Stat(filepath.Join(w.home, "in/data.txt")); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode())
	}
	if g, err := w.m.Get(id); err != nil || g.Phase != Done {
		t.Errorf("get: %+v %v", g, err)
	}
}

func TestImportWaitsDeletesAndRefuses(t *testing.T) {
	w := newWorld(t)
	t.Run("waits for the object, then deletes it", func(t *testing.T) {
		k := key(Up, "later")
		del, err := w.presign.PresignDeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		id, err := w.m.StartImport(ImportRequest{Object: w.obj(k), Get: w.signedGet(k), Delete: &Signed{URL: del.URL}, WaitForObject: true,
			ExpiresAt: time.Now().Add(time.Minute), Path: "later.bin", User: w.user})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if st, _ := w.m.Get(id); st.Phase != Waiting || st.Probes < 2 {
			t.Errorf("while the object is missing: %+v", st)
		}
		w.put(k, []byte("arrived"))
		if st := w.wait(id); st.Phase != Done {
			t.Fatalf("state %+v", st)
		}
		if _, err := w.backend.HeadObject(bucket, k); err == nil {
			t.Error("the object was not deleted")
		}
	})
	fails := []struct {
		name, code string
		req        func(k string) ImportRequest
	}{
		{"too large", CodeTooLarge, func(k string) ImportRequest {
			w.put(k, make([]byte, 1000))
			return ImportRequest{Object: w.obj(k), Get: w.signedGet(k), MaxBytes: 999, Path: "big", User: w.user}
		}},
		{"checksum mismatch", CodeChecksumMismatch, func(k string) ImportRequest {
			w.put(k, []byte("something else"))
			return ImportRequest{Object: w.obj(k), Get: w.signedGet(k), ExpectedSHA256: strings.Repeat("0", 64), Path: "sum", User: w.user}
		}},
		{"expired", CodeExpired, func(k string) ImportRequest {
			return ImportRequest{Object: w.obj(k), Get: w.signedGet(k), WaitForObject: true, ExpiresAt: time.Now().Add(150 * time.Millisecond), Path: "never", User: w.user}
		}},
		{"missing without waiting", "not_found", func(k string) ImportRequest {
			return ImportRequest{Object: w.obj(k), Get: w.signedGet(k), Path: "missing", User: w.user}
		}},
	}
	for i, f := range fails {
		t.Run(f.name, func(t *testing.T) {
			r := f.req(key(Up, "fail"+string(rune('a'+i))))
			id, err := w.m.StartImport(r)
			if err != nil {
				t.Fatal(err)
			}
			if st := w.wait(id); st.Phase != Failed || st.Code != f.code {
				t.Fatalf("state %+v, want %s", st, f.code)
			}
			if _, err := os.Lstat(filepath.Join(w.home, r.Path)); err == nil {
				t.Error("a file was written")
			}
			des, _ := os.ReadDir(w.home)
			for _, d := range des {
				if strings.HasPrefix(d.Name(), ".rayito-tmp") {
					t.Errorf("temporary file left: %s", d.Name())
				}
			}
		})
	}
}

// TestNeverFollowsOrLeaks: a redirect is not followed (wrong_region), a
// host that resolves to a refused address is not reached, a refused URL is
// refused before any request.
func TestNeverFollowsOrLeaks(t *testing.T) {
	w := newWorld(t)
	k := key(Up, "r")
	w.put(k, []byte("x"))
	var redirected atomic.Int64
	h := func(rw http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/moved") {
			redirected.Add(1)
			return false
		}
		http.Redirect(rw, r, "https://"+Host(bucket, region)+"/moved", http.StatusTemporaryRedirect)
		return true
	}
	w.hook.Store(&h)
	id, err := w.m.StartImport(ImportRequest{Object: w.obj(k), Get: w.signedGet(k), Path: "r", User: w.user})
	if err != nil {
		t.Fatal(err)
	}
	if st := w.wait(id); st.Phase != Failed || st.Code != CodeWrongRegion || redirected.Load() != 0 {
		t.Errorf("redirect: %+v, followed %d", st, redirected.Load())
	}
	w.hook.Store(nil)

	// A resolver that answers loopback (the test's Allow admits only the
	// server's own address, 127.0.0.1: a second loopback address is
	// refused).
	m := New(Options{FS: w.m.o.FS, SandboxID: func() string { return sandbox },
		Lookup: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("169.254.169.254")}, nil
		}})
	defer m.Close()
	before := w.requests.Load()
	id, err = m.StartImport(ImportRequest{Object: w.obj(k), Get: w.signedGet(k), Path: "r2", User: w.user})
	if err != nil {
		t.Fatal(err)
	}
	var st State
	_ = m.Watch(t.Context(), id, func(s State) error { st = s; return nil })
	if st.Phase != Failed || st.Code != "permission_denied" || w.requests.Load() != before {
		t.Errorf("resolved to loopback and IMDS: %+v", st)
	}
	bad := w.signedGet(k)
	bad.URL = strings.Replace(bad.URL, Host(bucket, region), "127.0.0.1", 1)
	if _, err := w.m.StartImport(ImportRequest{Object: w.obj(k), Get: bad, Path: "r3", User: w.user}); !errors.Is(err, ErrBadURL) || w.requests.Load() != before {
		t.Errorf("an IP literal: %v", err)
	}
	hdr := w.signedGet(k)
	hdr.Headers = map[string]string{"Authorization": "AWS4 stolen"}
	if _, err := w.m.StartImport(ImportRequest{Object: w.obj(k), Get: hdr, Path: "r4", User: w.user}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an Authorization header: %v", err)
	}
}

func TestExport(t *testing.T) {
	w := newWorld(t)
	data := make([]byte, 9<<20)
	rand.Read(data)
	sum := sha256.Sum256(data)
	if err := os.WriteFile(filepath.Join(w.home, "out.bin"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	// One PUT.
	k := key(Down, "one")
	id, err := w.m.StartExport(ExportRequest{Object: w.obj(k), Path: "out.bin", User: w.user, Put: ptr(w.signedPut(k))})
	if err != nil {
		t.Fatal(err)
	}
	if st := w.wait(id); st.Phase != Done || st.SHA256 != hex.EncodeToString(sum[:]) || st.BytesDone != uint64(len(data)) || st.Direction != Down {
		t.Fatalf("state %+v", st)
	}
	obj, err := w.backend.GetObject(bucket, k, nil)
	if err != nil || obj.Size != int64(len(data)) {
		t.Fatalf("object: %v", err)
	}
	obj.Contents.Close()
	// In two parts of 8 MiB, completed by the caller with the ETags.
	k = key(Down, "parts")
	mu, err := w.client.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(k)})
	if err != nil {
		t.Fatal(err)
	}
	var parts []Signed
	for n := int32(1); n <= 2; n++ {
		p, err := w.presign.PresignUploadPart(t.Context(), &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(k), UploadId: mu.UploadId, PartNumber: aws.Int32(n)})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, Signed{URL: p.URL})
	}
	if _, err := w.m.StartExport(ExportRequest{Object: w.obj(k), Path: "out.bin", User: w.user, PartSize: 8 << 20, Parts: parts[:1]}); !errors.Is(err, ErrInvalid) && err != nil {
		t.Fatalf("one part for two: %v", err)
	}
	id, err = w.m.StartExport(ExportRequest{Object: w.obj(k), Path: "out.bin", User: w.user, PartSize: 8 << 20, Parts: parts})
	if err != nil {
		t.Fatal(err)
	}
	st := w.wait(id)
	if st.Phase != Done || len(st.PartETags) != 2 {
		t.Fatalf("state %+v", st)
	}
	var cp []types.CompletedPart
	for i, e := range st.PartETags {
		cp = append(cp, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: aws.String(e)})
	}
	if _, err := w.client.CompleteMultipartUpload(t.Context(), &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(k), UploadId: mu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: cp}}); err != nil {
		t.Fatal(err)
	}
	obj, err = w.backend.GetObject(bucket, k, nil)
	if err != nil || obj.Size != int64(len(data)) {
		t.Fatalf("object: %v", err)
	}
	obj.Contents.Close()
}

func ptr[T any](v T) *T { return &v }

func TestCancelAndLimits(t *testing.T) {
	w := newWorld(t)
	var ids []string
	for i := range MaxActive {
		k := key(Up, "wait"+string(rune('a'+i)))
		id, err := w.m.StartImport(ImportRequest{Object: w.obj(k), Get: w.signedGet(k), WaitForObject: true, ExpiresAt: time.Now().Add(time.Minute), Path: "w", User: w.user})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	k := key(Up, "one-too-many")
	if _, err := w.m.StartImport(ImportRequest{Object: w.obj(k), Get: w.signedGet(k), Path: "w", User: w.user}); !errors.Is(err, ErrTooMany) {
		t.Errorf("17th transfer: %v", err)
	}
	st, err := w.m.Cancel(t.Context(), ids[0])
	if err != nil || st.Phase != Cancelled {
		t.Fatalf("cancel: %+v %v", st, err)
	}
	if st := w.wait(ids[0]); st.Phase != Cancelled {
		t.Errorf("after cancel: %+v", st)
	}
	if _, err := w.m.StartImport(ImportRequest{Object: w.obj(k), Get: w.signedGet(k), WaitForObject: true, ExpiresAt: time.Now().Add(time.Minute), Path: "w", User: w.user}); err != nil {
		t.Errorf("after a cancel: %v", err)
	}
	if _, err := w.m.Get("tr-nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
}
