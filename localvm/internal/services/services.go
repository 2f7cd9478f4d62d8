// Package services is what the local platform gives each sandbox's rayd
// for HOME persistence, in place of what AWS gives a microVM's: an
// instance metadata service (IMDSv2) that hands out credentials, as the
// execution role's are handed out on AWS, and an S3-compatible store
// (gofakes3 over files in the platform's state directory) that accepts
// only requests signed (SigV4) with them. The platform's default bucket,
// localplatform.DefaultBucket, exists from the start.
//
// Each sandbox gets credentials of its own, derived from a key kept in
// the state directory (so that they survive a platform restart, as the
// sandboxes do) and the sandbox's id. Like infra/iam.yaml's execution
// role, they read and write objects and never delete one: DELETE of an
// object, multi-object deletes, and bucket creation, deletion and listing
// are refused (AccessDenied); aborting a multipart upload is allowed.
//
// The launcher serves Sandbox(id) on a socket only that sandbox's rayd
// reaches. Nothing here logs a key, a bucket, an object or a credential.
package services

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/spf13/afero"

	"github.com/rayito-dev/rayito/proto/localplatform"
)

// Services is the platform's store and credential issuer.
type Services struct {
	s3  http.Handler
	key []byte
	log *slog.Logger
	// dir and backend: the store's files, for SweepTransfers.
	dir     string
	backend *s3afero.MultiBucketBackend
}

// credentialTTL is how long handed-out credentials last (rayd refreshes
// them before they expire, as from AWS's metadata service).
const credentialTTL = 6 * time.Hour

// New opens the store under dir (created 0700: the objects, their
// metadata and the credentials key) and makes the default bucket.
func New(dir string, log *slog.Logger) (*Services, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	key, err := loadKey(filepath.Join(dir, "credentials.key"))
	if err != nil {
		return nil, err
	}
	backend, err := s3afero.MultiBucket(afero.NewBasePathFs(afero.NewOsFs(), dir))
	if err != nil {
		return nil, fmt.Errorf("services: store: %w", err)
	}
	if ok, err := backend.BucketExists(localplatform.DefaultBucket); err != nil {
		return nil, fmt.Errorf("services: store: %w", err)
	} else if !ok {
		if err := backend.CreateBucket(localplatform.DefaultBucket); err != nil {
			return nil, fmt.Errorf("services: store: %w", err)
		}
	}
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()), gofakes3.WithoutVersioning())
	return &Services{s3: faker.Server(), key: key, log: log, dir: dir, backend: backend}, nil
}

// loadKey reads the credentials key, or makes it (32 random bytes, 0600).
func loadKey(p string) ([]byte, error) {
	b, err := os.ReadFile(p)
	if err == nil && len(b) == 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("services: credentials key: %w", err)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, fmt.Errorf("services: credentials key: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return nil, fmt.Errorf("services: credentials key: %w", err)
	}
	return b, nil
}

// Credentials are one sandbox's: an access key id, its secret and a
// session token, as AWS's metadata service hands out a role's.
func (s *Services) Credentials(sandboxID string) aws.Credentials {
	mac := func(what string) []byte {
		m := hmac.New(sha256.New, s.key)
		m.Write([]byte(what + "\x00" + sandboxID))
		return m.Sum(nil)
	}
	return aws.Credentials{
		AccessKeyID:     "ASIALOCAL" + strings.ToUpper(hex.EncodeToString(mac("id")[:6])),
		SecretAccessKey: base64.RawStdEncoding.EncodeToString(mac("secret")[:30]),
		SessionToken:    base64.RawStdEncoding.EncodeToString(mac("token")[:24]),
	}
}

// roleName is the role the metadata service names.
const roleName = "rayito-local-execution-role"

// Sandbox is the handler of one sandbox's services: by Host, the metadata
// service (localplatform.IMDSHost) or the store (localplatform.S3Host).
func (s *Services) Sandbox(sandboxID string) http.Handler {
	creds := s.Credentials(sandboxID)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, ok := strings.Cut(host, ":"); ok {
			host = h
		}
		switch host {
		case localplatform.IMDSHost:
			s.imds(w, r, creds)
		case localplatform.S3Host:
			s.store(w, r, creds)
		case localplatform.TransferHost:
			s.sandboxTransfer(w, r, sandboxID)
		default:
			http.NotFound(w, r)
		}
	})
}

// imdsToken is the session token of the metadata service: the socket is
// the sandbox's rayd's alone, so any token it asked for will do; the
// dance is kept because rayd's client (AWS's) does IMDSv2.
const imdsToken = "rayito-local-imds"

func (s *Services) imds(w http.ResponseWriter, r *http.Request, creds aws.Credentials) {
	if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
		ttl := r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds")
		if n, err := strconv.Atoi(ttl); err != nil || n < 1 || n > 21600 {
			http.Error(w, "", http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", ttl)
		io.WriteString(w, imdsToken)
		return
	}
	if r.Method != http.MethodGet || r.Header.Get("X-Aws-Ec2-Metadata-Token") != imdsToken {
		http.Error(w, "", http.StatusUnauthorized)
		return
	}
	now := time.Now().UTC()
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "/latest/meta-data/placement/region":
		io.WriteString(w, localplatform.Region)
	case "/latest/dynamic/instance-identity/document":
		_ = json.NewEncoder(w).Encode(map[string]string{"region": localplatform.Region, "accountId": "000000000000", "instanceId": "local"})
	case "/latest/meta-data/iam/security-credentials":
		io.WriteString(w, roleName)
	case "/latest/meta-data/iam/security-credentials/" + roleName:
		_ = json.NewEncoder(w).Encode(map[string]string{
			"Code": "Success", "Type": "AWS-HMAC",
			"AccessKeyId": creds.AccessKeyID, "SecretAccessKey": creds.SecretAccessKey, "Token": creds.SessionToken,
			"LastUpdated": now.Format(time.RFC3339), "Expiration": now.Add(credentialTTL).Format(time.RFC3339),
		})
	default:
		http.NotFound(w, r)
	}
}

// store checks a request's signature and what it does, then serves it.
func (s *Services) store(w http.ResponseWriter, r *http.Request, creds aws.Credentials) {
	if !verify(r, creds) {
		s3Error(w, http.StatusForbidden, "SignatureDoesNotMatch")
		return
	}
	if !allowed(r) {
		s3Error(w, http.StatusForbidden, "AccessDenied")
		return
	}
	s.s3.ServeHTTP(w, r)
}

// allowed is the execution role's policy: objects are read and written,
// never deleted; buckets are used, not made, removed or listed.
func allowed(r *http.Request) bool {
	p := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(p, "/")
	q := r.URL.Query()
	switch {
	case bucket == "":
		return false // ListBuckets
	case key == localplatform.TransferPrefix || strings.HasPrefix(key, localplatform.TransferPrefix+"/"):
		return false // transfer objects: pre-signed requests only (transfer.go)
	case key == "":
		// The bucket itself: listing (GetBucketLocation, ListObjects,
		// ListMultipartUploads) only.
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	case r.Method == http.MethodDelete:
		return q.Has("uploadId") // AbortMultipartUpload, never DeleteObject
	case r.Method == http.MethodPost:
		return q.Has("uploads") || q.Has("uploadId")
	}
	return r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodPut
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, code)
}

// maxSkew bounds the age of a signed request, as S3's 15 minutes.
const maxSkew = 15 * time.Minute

// verify checks r's SigV4 Authorization header against creds: the
// request is signed again with the same signed headers, payload hash,
// time and scope, and the signatures compared. The payload hash itself
// is the one the client declared (the socket is rayd's alone).
func verify(r *http.Request, creds aws.Credentials) bool {
	const prefix = "AWS4-HMAC-SHA256 "
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, prefix) {
		return false
	}
	fields := map[string]string{}
	for part := range strings.SplitSeq(strings.TrimPrefix(auth, prefix), ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return false
		}
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[0] != creds.AccessKeyID || scope[3] != "s3" || scope[4] != "aws4_request" {
		return false
	}
	if r.Header.Get("X-Amz-Security-Token") != creds.SessionToken {
		return false
	}
	t, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || scope[1] != t.Format("20060102") {
		return false
	}
	if d := time.Since(t); d > maxSkew || d < -maxSkew {
		return false
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return false
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	c, err := http.NewRequestWithContext(context.Background(), r.Method, r.URL.String(), nil)
	if err != nil {
		return false
	}
	c.URL.RawPath = r.URL.RawPath
	c.Host = r.Host
	c.ContentLength = r.ContentLength
	for _, h := range signed {
		switch h {
		case "host", "content-length":
		default:
			if vs := r.Header.Values(h); len(vs) > 0 {
				c.Header[http.CanonicalHeaderKey(h)] = vs
			}
		}
	}
	if err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(), creds, c, payload, "s3", scope[2], t); err != nil {
		return false
	}
	got := c.Header.Get("Authorization")
	want := fields["Signature"]
	i := strings.LastIndex(got, "Signature=")
	return i >= 0 && want != "" && subtle.ConstantTimeCompare([]byte(got[i+len("Signature="):]), []byte(want)) == 1
}
