package services

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/rayito-dev/rayito/proto/localplatform"
)

// Pre-signed transfers (see localplatform.TransferSettings): the store
// serves objects under localplatform.TransferPrefix to requests that carry
// a SigV4 pre-signed query signature made with the transfer credentials,
// which are derived from the platform's key and their expiry (written in
// their access key id), distinct from every sandbox's credentials and
// valid for transfer objects only.

// transferKeyPrefix starts every transfer credential's access key id; the
// expiry (Unix seconds, 10 digits) follows.
const transferKeyPrefix = "RAYITOXFER"

// maxPresignExpires is SigV4's limit of X-Amz-Expires (7 days).
const maxPresignExpires = 7 * 24 * 3600

// TransferCredentials are credentials that sign transfer URLs until
// now+localplatform.TransferCredentialTTL.
func (s *Services) TransferCredentials(now time.Time) aws.Credentials {
	exp := now.Add(localplatform.TransferCredentialTTL).Truncate(time.Second)
	id := transferKeyPrefix + strconv.FormatInt(exp.Unix(), 10)
	return aws.Credentials{AccessKeyID: id, SecretAccessKey: s.transferSecret(id), CanExpire: true, Expires: exp}
}

func (s *Services) transferSecret(id string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("transfer\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))[:40]
}

// Why a pre-signed request is refused.
var (
	// errSignature: not a well-formed pre-signed request signed with valid
	// transfer credentials.
	errSignature = errors.New("SignatureDoesNotMatch")
	// errExpired: the URL (or the credentials that signed it) expired.
	errExpired = errors.New("AccessDenied")
	// errDenied: not an operation on a transfer object this place serves.
	errDenied = errors.New("AccessDenied")
)

// presignedQuery are the query parameters of a pre-signed request (any
// other is refused: no sub-resource, no multipart).
var presignedQuery = map[string]bool{
	"X-Amz-Algorithm": true, "X-Amz-Credential": true, "X-Amz-Date": true, "X-Amz-Expires": true,
	"X-Amz-SignedHeaders": true, "X-Amz-Signature": true, "x-id": true,
}

// verifyPresigned checks r's pre-signed query signature, made with the
// transfer credentials, at now: SigV4 for s3 in localplatform.Region, not
// expired (the URL's X-Amz-Date+X-Amz-Expires, and the credentials'
// expiry), the signature computed again over the same method, host, path,
// query and signed headers with UNSIGNED-PAYLOAD, compared in constant
// time.
func (s *Services) verifyPresigned(r *http.Request, now time.Time) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return errSignature
	}
	for k, vs := range q {
		if !presignedQuery[k] || len(vs) != 1 {
			return errSignature
		}
	}
	if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || q.Get("X-Amz-Signature") == "" {
		return errSignature
	}
	scope := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(scope) != 5 || scope[2] != localplatform.Region || scope[3] != "s3" || scope[4] != "aws4_request" {
		return errSignature
	}
	id := scope[0]
	digits, ok := strings.CutPrefix(id, transferKeyPrefix)
	if !ok || len(digits) != 10 || strings.Trim(digits, "0123456789") != "" {
		return errSignature
	}
	credExp, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return errSignature
	}
	t, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil || scope[1] != t.Format("20060102") {
		return errSignature
	}
	expires, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || expires < 1 || expires > maxPresignExpires || strconv.Itoa(expires) != q.Get("X-Amz-Expires") {
		return errSignature
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	if len(signed) == 0 || len(signed) > 16 || !slices.Contains(signed, "host") {
		return errSignature
	}
	// As S3: every x-amz-* header is signed; never a copy (which would
	// read another object of the bucket).
	for h := range r.Header {
		lh := strings.ToLower(h)
		if lh == "x-amz-copy-source" || strings.HasPrefix(lh, "x-amz-") && !slices.Contains(signed, lh) {
			return errSignature
		}
	}
	// Signed again, then compared: a forged id has no matching secret.
	c, err := http.NewRequestWithContext(context.Background(), r.Method, "http://"+r.Host+r.URL.EscapedPath(), nil)
	if err != nil {
		return errSignature
	}
	c.Host = r.Host
	cq := make(url.Values, len(q))
	for k, vs := range q {
		if k != "X-Amz-Signature" {
			cq[k] = vs
		}
	}
	c.URL.RawQuery = cq.Encode()
	for _, h := range signed {
		if h == "host" {
			continue
		}
		vs := r.Header.Values(h)
		if len(vs) == 0 {
			return errSignature
		}
		c.Header[http.CanonicalHeaderKey(h)] = vs
	}
	creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: s.transferSecret(id)}
	u, _, err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).
		PresignHTTP(context.Background(), creds, c, "UNSIGNED-PAYLOAD", "s3", localplatform.Region, t)
	if err != nil {
		return errSignature
	}
	got, err := url.Parse(u)
	if err != nil {
		return errSignature
	}
	gq := got.Query()
	if gq.Get("X-Amz-SignedHeaders") != q.Get("X-Amz-SignedHeaders") ||
		subtle.ConstantTimeCompare([]byte(gq.Get("X-Amz-Signature")), []byte(q.Get("X-Amz-Signature"))) != 1 {
		return errSignature
	}
	// Authentic: now whether it is still valid.
	if now.Unix() > credExp || credExp > now.Add(localplatform.TransferCredentialTTL+maxSkew).Unix() {
		return errExpired
	}
	if now.Before(t.Add(-maxSkew)) || now.After(t.Add(time.Duration(expires)*time.Second)) {
		return errExpired
	}
	return nil
}

// TransferKey checks a transfer object's key:
// localplatform.TransferPrefix/<sandbox id>/<up|down>/<id>, the sandbox id
// and the id of [A-Za-z0-9._-] (1 to 128 characters, not "." or ".."). It
// returns the sandbox id.
func TransferKey(key string) (string, bool) {
	segs := strings.Split(key, "/")
	if len(segs) != 4 || segs[0] != localplatform.TransferPrefix || (segs[2] != "up" && segs[2] != "down") {
		return "", false
	}
	if !validSegment(segs[1]) || !validSegment(segs[3]) {
		return "", false
	}
	return segs[1], true
}

func validSegment(s string) bool {
	if s == "" || len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// transferMethod: a transfer object is read, written and deleted, one
// whole object at a time.
func transferMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// serveTransfer checks r (for key, bound to sandboxID unless it is ""),
// then serves it path-style from the default bucket, without the
// signature's query.
func (s *Services) serveTransfer(w http.ResponseWriter, r *http.Request, key, sandboxID string) {
	if err := s.verifyPresigned(r, time.Now()); err != nil {
		s3Error(w, http.StatusForbidden, err.Error())
		return
	}
	sid, ok := TransferKey(key)
	if !ok || sandboxID != "" && sid != sandboxID || !transferMethod(r.Method) {
		s3Error(w, http.StatusForbidden, errDenied.Error())
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + localplatform.DefaultBucket + "/" + key
	r2.URL.RawPath = ""
	r2.URL.RawQuery = ""
	r2.RequestURI = r2.URL.RequestURI()
	s.s3.ServeHTTP(w, r2)
}

// Transfers is the owner's way to transfer objects: path-style
// (/<bucket>/<key>), pre-signed requests only. The caller checks that
// the client is the platform's owner.
func (s *Services) Transfers() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		bucket, key, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
		if bucket != localplatform.DefaultBucket || r.URL.RawPath != "" && r.URL.RawPath != p {
			s3Error(w, http.StatusForbidden, errDenied.Error())
			return
		}
		s.serveTransfer(w, r, key, "")
	})
}

// sandboxTransfer serves rayd's requests at localplatform.TransferHost
// (virtual-hosted: the path is the key), for this sandbox's objects only.
func (s *Services) sandboxTransfer(w http.ResponseWriter, r *http.Request, sandboxID string) {
	if r.URL.RawPath != "" && r.URL.RawPath != r.URL.Path {
		s3Error(w, http.StatusForbidden, errDenied.Error())
		return
	}
	s.serveTransfer(w, r, strings.TrimPrefix(r.URL.Path, "/"), sandboxID)
}

// TransferRetention is how long the platform keeps a transfer object
// after it was written: past the longest URL (24 h), with an hour's
// margin. Download objects, and uploads never imported, would otherwise
// stay in the state directory.
const TransferRetention = 25 * time.Hour

// SweepTransfers deletes the transfer objects written before now-maxAge
// and returns how many it deleted. Nothing else of the store is touched.
func (s *Services) SweepTransfers(now time.Time, maxAge time.Duration) (int, error) {
	root := filepath.Join(s.dir, "buckets", localplatform.DefaultBucket, localplatform.TransferPrefix)
	sids, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	var first error
	for _, sid := range sids {
		for _, dir := range []string{"up", "down"} {
			ents, err := os.ReadDir(filepath.Join(root, sid.Name(), dir))
			if err != nil {
				continue
			}
			for _, e := range ents {
				fi, err := e.Info()
				if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(now.Add(-maxAge)) {
					continue
				}
				key := localplatform.TransferPrefix + "/" + sid.Name() + "/" + dir + "/" + e.Name()
				if _, ok := TransferKey(key); !ok {
					continue
				}
				if _, err := s.backend.DeleteObject(localplatform.DefaultBucket, key); err != nil {
					if first == nil {
						first = err
					}
					continue
				}
				n++
			}
		}
	}
	return n, first
}
