package rayito

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/sdk/internal/backoff"
)

// Pre-signed transfers (the security model's T16): a file moves between a
// sandbox and an S3 object through URLs the SDK signs with the caller's
// credentials; rayd gets the URLs with the call and keeps no credentials.
// Files.UploadURL hands out a URL anyone may PUT a file to, which the
// sandbox then imports; Files.DownloadURL exports a file and hands out a
// URL to GET it. On AWS the objects live in the bucket WithTransferBucket
// names; on the local platform in its own store (nothing to configure).
// Objects are keyed <prefix>/<sandbox id>/<up|down>/<id>: rayd refuses
// any other.

// Limits of pre-signed transfers.
const (
	// DefaultURLExpiry is how long a URL stays valid by default.
	DefaultURLExpiry = time.Hour
	// MaxURLExpiry is the longest WithURLExpiry accepted. A URL never
	// outlives the credentials that sign it (the local platform's last
	// 12 hours).
	MaxURLExpiry = 24 * time.Hour
	// DefaultTransferThreshold is the size from which Files.Write and
	// Files.Read go through S3 when a transfer bucket is set (AWS).
	DefaultTransferThreshold = 8 << 20
	// MaxSinglePutBytes is S3's limit of one PUT: larger files need a
	// multipart transfer, which the SDK does not make yet.
	MaxSinglePutBytes = 5 << 30
	// DefaultTransferPrefix is the key prefix of transfer objects.
	DefaultTransferPrefix = localplatform.TransferPrefix
)

// Errors of transfers (besides ErrChecksumMismatch, ErrDiskFull,
// ErrNotFound, ErrPermissionDenied).
var (
	// ErrTooLarge: the uploaded object is larger than WithMaxBytes.
	ErrTooLarge = errors.New("rayito: the object is larger than allowed")
	// ErrExpired: the URL expired before the object was uploaded.
	ErrExpired = errors.New("rayito: the transfer's URL expired")
	// ErrTransferCancelled: the transfer was cancelled.
	ErrTransferCancelled = errors.New("rayito: transfer cancelled")
)

// TransferError is why a transfer failed: rayd's code (too_large,
// expired, checksum_mismatch, disk_reserve, wrong_region, not_found,
// permission_denied, cancelled, unavailable, ...) and its fixed message
// (never a URL or a key). errors.Is matches ErrTooLarge, ErrExpired,
// ErrChecksumMismatch, ErrDiskFull, ErrNotFound, ErrPermissionDenied,
// ErrTransferCancelled or ErrInvalidArgument by code.
type TransferError struct {
	Code, Message string
}

func (e *TransferError) Error() string { return "rayito: transfer failed: " + e.Message }

// Is matches the sentinel of the error's code.
func (e *TransferError) Is(target error) bool {
	switch e.Code {
	case "too_large":
		return target == ErrTooLarge
	case "expired":
		return target == ErrExpired
	case "checksum_mismatch":
		return target == ErrChecksumMismatch
	case "disk_reserve":
		return target == ErrDiskFull
	case "not_found":
		return target == ErrNotFound
	case "permission_denied", "wrong_region":
		return target == ErrPermissionDenied
	case "cancelled":
		return target == ErrTransferCancelled
	case "invalid_argument":
		return target == ErrInvalidArgument
	}
	return false
}

// TransferBucket is where transfers go on AWS: an S3 bucket, its region
// ("" is the SDK's own) and the key prefix ("" is DefaultTransferPrefix).
// The caller's AWS credentials (the SDK's) sign the URLs: they need
// s3:GetObject, s3:PutObject and s3:DeleteObject on the prefix. A lifecycle
// rule that expires the prefix's objects after a day keeps the bucket
// clean of downloads and abandoned uploads.
type TransferBucket struct {
	Bucket, Region, Prefix string
}

// transferConfig is the sandbox's transfer setup.
type transferConfig struct {
	bucket    *TransferBucket
	threshold int64 // 0: DefaultTransferThreshold on AWS, never locally
}

// WithTransferBucket sets the bucket of pre-signed transfers on AWS (the
// local platform uses its own store and ignores it). With it, Files.Write
// and Files.Read of files from WithTransferThreshold up go through S3.
func WithTransferBucket(b TransferBucket) Option {
	return sandboxOption(func(c *config) { bb := b; c.xfer.bucket = &bb })
}

// WithTransferThreshold sets the size from which Files.Write and
// Files.Read go through S3 (DefaultTransferThreshold on AWS with a
// transfer bucket). The local platform's direct HTTP is faster on one
// machine, so there only an explicit threshold makes them use its store.
// A negative threshold turns the automatic path off.
func WithTransferThreshold(n int64) Option {
	return sandboxOption(func(c *config) { c.xfer.threshold = n })
}

// urlConfig holds the options of UploadURL and DownloadURL.
type urlConfig struct {
	expiry   time.Duration
	maxBytes uint64
	sha256   string
}

type urlOption func(*urlConfig)

func (o urlOption) applyFile(c *fileConfig) {
	if c.url == nil {
		c.url = &urlConfig{}
	}
	o(c.url)
}

// WithURLExpiry sets how long a pre-signed URL stays valid (default
// DefaultURLExpiry, at most MaxURLExpiry). An upload's sandbox waits for
// its object that long.
func WithURLExpiry(d time.Duration) FileOption { return urlOption(func(c *urlConfig) { c.expiry = d }) }

// WithMaxBytes bounds what an upload URL's object may hold (default and
// at most MaxSinglePutBytes): a larger one fails with ErrTooLarge and
// leaves no file.
func WithMaxBytes(n uint64) FileOption { return urlOption(func(c *urlConfig) { c.maxBytes = n }) }

// WithExpectedSHA256 makes an upload fail with ErrChecksumMismatch (and
// leave no file) unless the object's sha256 is this (64 hex digits).
func WithExpectedSHA256(sum string) FileOption {
	return urlOption(func(c *urlConfig) { c.sha256 = strings.ToLower(sum) })
}

// target is where one transfer's object is and how URLs for it are made.
type target struct {
	bucket, region, prefix string
	// userBase is the object URL's base for the caller (path-style on the
	// local platform's owner port); raydBase is rayd's (the bucket's
	// regional virtual host).
	userBase, raydBase string
	creds              aws.Credentials
}

// transferTarget finds the transfer store of the sandbox's backend.
func (f *Files) transferTarget(ctx context.Context) (*target, error) {
	cfg := f.sbx.cfg
	if cfg.backend == BackendLocal {
		return localTarget(ctx, cfg)
	}
	b := cfg.xfer.bucket
	if b == nil || b.Bucket == "" {
		return nil, newError(ReasonInvalidArgument, "pre-signed transfers on AWS need a bucket (WithTransferBucket)")
	}
	if cfg.awsConfig == nil || cfg.awsConfig.Credentials == nil {
		return nil, newError(ReasonUnauthenticated, "pre-signed transfers need the AWS credentials of the SDK")
	}
	region := b.Region
	if region == "" {
		region = cfg.awsConfig.Region
	}
	prefix := strings.Trim(b.Prefix, "/")
	if prefix == "" {
		prefix = DefaultTransferPrefix
	}
	creds, err := cfg.awsConfig.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, newError(ReasonUnauthenticated, "cannot get AWS credentials to sign transfer URLs", err)
	}
	host := "https://" + b.Bucket + ".s3." + region + ".amazonaws.com"
	return &target{bucket: b.Bucket, region: region, prefix: prefix, userBase: host, raydBase: host, creds: creds}, nil
}

// maxSettings bounds the local platform's answer.
const maxSettings = 16 << 10

// localTarget asks the local platform (its owner-only route) for its
// store's URL and fresh transfer credentials.
func localTarget(ctx context.Context, cfg *config) (*target, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.endpoint, "/")+localplatform.TransferSettingsPath, nil)
	if err != nil {
		return nil, newError(ReasonInvalidArgument, "invalid local platform endpoint", err)
	}
	hc := cfg.httpClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return nil, newError(ReasonPlatformUnavailable, "no local platform at "+cfg.endpoint+"; start one with `rayito local up`", err)
		}
		return nil, fmt.Errorf("rayito: transfer settings: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusForbidden:
		return nil, newError(ReasonNotPlatformOwner, "the local platform at "+cfg.endpoint+" belongs to another user", ErrPermissionDenied)
	case http.StatusNotFound:
		return nil, newError(ReasonUnimplemented, "this local platform serves no pre-signed transfers (update it)")
	default:
		return nil, newError(ReasonInternal, "the local platform's transfer settings: "+resp.Status)
	}
	var s localplatform.TransferSettings
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxSettings)).Decode(&s); err != nil || s.StoreURL == "" || s.Bucket == "" || s.AccessKeyID == "" {
		return nil, newError(ReasonInternal, "the local platform's transfer settings are malformed")
	}
	if localplatform.CheckEndpoint(s.StoreURL) != nil {
		return nil, newError(ReasonInternal, "the local platform's store is not on a loopback address")
	}
	return &target{
		bucket: s.Bucket, region: s.Region, prefix: s.Prefix,
		userBase: strings.TrimRight(s.StoreURL, "/") + "/" + s.Bucket,
		raydBase: "https://" + s.Bucket + ".s3." + s.Region + ".amazonaws.com",
		creds:    aws.Credentials{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, CanExpire: true, Expires: s.Expiration},
	}, nil
}

// presign signs method on base/key for expiry from now (SigV4 query,
// UNSIGNED-PAYLOAD, the host the only signed header).
func (t *target) presign(ctx context.Context, method, base, key string, now time.Time, expiry time.Duration) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+"/"+key, nil)
	if err != nil {
		return "", err
	}
	q := req.URL.Query()
	q.Set("X-Amz-Expires", strconv.FormatInt(int64(expiry/time.Second), 10))
	req.URL.RawQuery = q.Encode()
	u, _, err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).
		PresignHTTP(ctx, t.creds, req, "UNSIGNED-PAYLOAD", "s3", t.region, now)
	return u, err
}

// transferID is a fresh object id.
func transferID(kind string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return kind + "-" + hex.EncodeToString(b[:])
}

// plan checks the URL options and the credentials' lifetime.
func (t *target) plan(c *urlConfig, now time.Time) (time.Duration, error) {
	expiry := DefaultURLExpiry
	if c != nil && c.expiry != 0 {
		expiry = c.expiry
	}
	if expiry < time.Second || expiry > MaxURLExpiry {
		return 0, newError(ReasonInvalidArgument, fmt.Sprintf("a URL's expiry is 1 s to %s", MaxURLExpiry))
	}
	expiry = expiry.Truncate(time.Second)
	if t.creds.CanExpire && now.Add(expiry).After(t.creds.Expires) {
		return 0, newError(ReasonInvalidArgument, fmt.Sprintf("the URL would outlive the credentials that sign it (they expire in %s)", t.creds.Expires.Sub(now).Truncate(time.Minute)))
	}
	return expiry, nil
}

// UploadTicket is an upload URL handed out by Files.UploadURL: whoever
// has it may PUT one file (at most the ticket's max bytes) until
// ExpiresAt; the sandbox imports it into the ticket's path, then deletes
// the object. Treat URL as a secret.
type UploadTicket struct {
	// URL, Method and Headers are the request to make (Headers may be
	// empty; send the body as is).
	URL       string
	Method    string
	Headers   map[string]string
	ExpiresAt time.Time
	// Path is the file the sandbox writes; TransferID names the import.
	Path       string
	TransferID string

	files *Files
}

// UploadURL makes a URL to upload one file into path: the SDK signs a
// PUT for the caller and a GET (and a DELETE) for the sandbox, and rayd
// starts waiting for the object (it polls until the URL expires). Options:
// WithURLExpiry, WithMaxBytes, WithExpectedSHA256, WithUser, WithMode,
// WithMetadata. Wait on the ticket for the file.
func (f *Files) UploadURL(ctx context.Context, path string, opts ...FileOption) (*UploadTicket, error) {
	c := fileOpts(opts)
	t, err := f.transferTarget(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	expiry, err := t.plan(c.url, now)
	if err != nil {
		return nil, err
	}
	var maxBytes uint64 = MaxSinglePutBytes
	var sum string
	if c.url != nil {
		if c.url.maxBytes > 0 {
			maxBytes = min(c.url.maxBytes, MaxSinglePutBytes)
		}
		sum = c.url.sha256
		if sum != "" && (len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "") {
			return nil, newError(ReasonInvalidArgument, "an expected sha256 is 64 hex digits")
		}
	}
	key := t.prefix + "/" + f.sbx.id + "/up/" + transferID("u")
	put, err := t.presign(ctx, http.MethodPut, t.userBase, key, now, expiry)
	if err != nil {
		return nil, fmt.Errorf("rayito: upload URL: %w", err)
	}
	get, err := t.presign(ctx, http.MethodGet, t.raydBase, key, now, expiry)
	if err != nil {
		return nil, fmt.Errorf("rayito: upload URL: %w", err)
	}
	del, err := t.presign(ctx, http.MethodDelete, t.raydBase, key, now, expiry)
	if err != nil {
		return nil, fmt.Errorf("rayito: upload URL: %w", err)
	}
	expiresAt := now.Add(expiry)
	resp, err := f.sbx.dp.fs.StartImport(ctx, connect.NewRequest(&raydv1.StartImportRequest{
		Object:          &raydv1.S3Object{Bucket: t.bucket, Key: key, Region: t.region},
		Get:             &raydv1.PresignedRequest{Url: get},
		Delete:          &raydv1.PresignedRequest{Url: del},
		WaitForObject:   true,
		ExpiresAtUnixMs: expiresAt.UnixMilli(),
		MaxBytes:        maxBytes,
		ExpectedSha256:  sum,
		Metadata:        c.metadata,
		Path:            path,
		User:            c.userMsg(),
		Mode:            c.mode,
	}))
	if err != nil {
		return nil, rpcErr("upload URL", err)
	}
	return &UploadTicket{
		URL: put, Method: http.MethodPut, Headers: map[string]string{}, ExpiresAt: expiresAt,
		Path: path, TransferID: resp.Msg.GetTransferId(), files: f,
	}, nil
}

// TransferStatus is a transfer's state.
type TransferStatus struct {
	// Phase is "waiting", "running", "done", "failed" or "cancelled".
	Phase                 string
	BytesDone, BytesTotal uint64
	// Probes counts an upload's polls for its object.
	Probes uint32
	// SHA256 is the file's, once done.
	SHA256 string
	// Entry is the file written or read (when known).
	Entry *Entry
	// Err is why it failed or was cancelled (a *TransferError).
	Err error
}

// Ended reports a final phase.
func (s *TransferStatus) Ended() bool {
	return s.Phase == "done" || s.Phase == "failed" || s.Phase == "cancelled"
}

func statusOf(st *raydv1.TransferState) *TransferStatus {
	s := &TransferStatus{BytesDone: st.GetBytesDone(), BytesTotal: st.GetBytesTotal(), Probes: st.GetProbes(), SHA256: st.GetSha256(), Entry: entryOf(st.GetEntry())}
	switch st.GetPhase() {
	case raydv1.TransferPhase_TRANSFER_PHASE_WAITING:
		s.Phase = "waiting"
	case raydv1.TransferPhase_TRANSFER_PHASE_RUNNING:
		s.Phase = "running"
	case raydv1.TransferPhase_TRANSFER_PHASE_DONE:
		s.Phase = "done"
	case raydv1.TransferPhase_TRANSFER_PHASE_FAILED:
		s.Phase = "failed"
	case raydv1.TransferPhase_TRANSFER_PHASE_CANCELLED:
		s.Phase = "cancelled"
	}
	if (s.Phase == "failed" || s.Phase == "cancelled") && st.GetError() != nil {
		s.Err = &TransferError{Code: st.GetError().GetCode(), Message: st.GetError().GetMessage()}
	} else if s.Phase == "cancelled" {
		s.Err = &TransferError{Code: "cancelled", Message: "cancelled"}
	}
	return s
}

// Status returns the import's state now.
func (t *UploadTicket) Status(ctx context.Context) (*TransferStatus, error) {
	return t.files.transferStatus(ctx, t.TransferID)
}

// Cancel stops the import (the URL may still be used; nothing imports
// it) and returns its final state.
func (t *UploadTicket) Cancel(ctx context.Context) (*TransferStatus, error) {
	return t.files.cancelTransfer(ctx, t.TransferID)
}

// Wait waits until the file is imported and returns it, or returns why
// not (a *TransferError: ErrTooLarge, ErrExpired, ErrChecksumMismatch,
// ErrDiskFull, ErrTransferCancelled, ...).
func (t *UploadTicket) Wait(ctx context.Context) (*Entry, error) {
	st, err := t.files.waitTransfer(ctx, t.TransferID)
	if err != nil {
		return nil, err
	}
	return st.Entry, nil
}

func (f *Files) transferStatus(ctx context.Context, id string) (*TransferStatus, error) {
	resp, err := f.sbx.dp.fs.GetTransfer(ctx, connect.NewRequest(&raydv1.GetTransferRequest{TransferId: id}))
	if err != nil {
		return nil, rpcErr("transfer status", err)
	}
	return statusOf(resp.Msg.GetState()), nil
}

func (f *Files) cancelTransfer(ctx context.Context, id string) (*TransferStatus, error) {
	resp, err := f.sbx.dp.fs.CancelTransfer(ctx, connect.NewRequest(&raydv1.CancelTransferRequest{TransferId: id}))
	if err != nil {
		return nil, rpcErr("cancel transfer", err)
	}
	return statusOf(resp.Msg.GetState()), nil
}

// waitTransfer follows a transfer (WatchTransfer; GetTransfer when the
// stream breaks) until it ends: its state when done, else its error.
func (f *Files) waitTransfer(ctx context.Context, id string) (*TransferStatus, error) {
	for {
		stream, err := f.sbx.dp.fs.WatchTransfer(ctx, connect.NewRequest(&raydv1.WatchTransferRequest{TransferId: id}))
		if err != nil {
			return nil, rpcErr("wait for transfer", err)
		}
		for stream.Receive() {
			if st := stream.Msg().GetState(); st != nil {
				if s := statusOf(st); s.Ended() {
					stream.Close()
					return s, s.Err
				}
			}
		}
		serr := stream.Err()
		stream.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s, err := f.transferStatus(ctx, id)
		if err != nil {
			if serr != nil {
				return nil, rpcErr("wait for transfer", serr)
			}
			return nil, err
		}
		if s.Ended() {
			return s, s.Err
		}
		if err := backoff.Sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// DownloadLink is a URL to GET one exported file until ExpiresAt. Treat
// URL as a secret.
type DownloadLink struct {
	URL       string
	Size      int64
	SHA256    string
	ExpiresAt time.Time
}

// exportPutExpiry is how long rayd's PUT URL of an export is valid (it
// starts at once, or after the transfers moving before it).
const exportPutExpiry = time.Hour

// DownloadURL exports path to an object (rayd PUTs it with a URL the SDK
// signed), waits until it is there, and returns a URL to GET it.
// Options: WithURLExpiry, WithUser. Files over MaxSinglePutBytes are
// refused (multipart exports are not made by the SDK yet).
func (f *Files) DownloadURL(ctx context.Context, path string, opts ...FileOption) (*DownloadLink, error) {
	c := fileOpts(opts)
	st, err := f.Stat(ctx, path, opts...)
	if err != nil {
		return nil, err
	}
	if st.Type != "file" {
		return nil, newError(ReasonNotARegularFile, "only a regular file can be downloaded through a URL")
	}
	if st.Size > MaxSinglePutBytes {
		return nil, newError(ReasonInvalidArgument, "files over 5 GiB need a multipart transfer, which the SDK does not make yet")
	}
	t, err := f.transferTarget(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	expiry, err := t.plan(c.url, now)
	if err != nil {
		return nil, err
	}
	key := t.prefix + "/" + f.sbx.id + "/down/" + transferID("d")
	putExpiry := exportPutExpiry
	if t.creds.CanExpire {
		putExpiry = min(putExpiry, t.creds.Expires.Sub(now).Truncate(time.Second))
	}
	put, err := t.presign(ctx, http.MethodPut, t.raydBase, key, now, putExpiry)
	if err != nil {
		return nil, fmt.Errorf("rayito: download URL: %w", err)
	}
	resp, err := f.sbx.dp.fs.StartExport(ctx, connect.NewRequest(&raydv1.StartExportRequest{
		Object: &raydv1.S3Object{Bucket: t.bucket, Key: key, Region: t.region},
		Path:   path,
		User:   c.userMsg(),
		Upload: &raydv1.StartExportRequest_Put{Put: &raydv1.PresignedRequest{Url: put}},
	}))
	if err != nil {
		return nil, rpcErr("download URL", err)
	}
	done, err := f.waitTransfer(ctx, resp.Msg.GetTransferId())
	if err != nil {
		return nil, err
	}
	get, err := t.presign(ctx, http.MethodGet, t.userBase, key, now, expiry)
	if err != nil {
		return nil, fmt.Errorf("rayito: download URL: %w", err)
	}
	return &DownloadLink{URL: get, Size: int64(done.BytesTotal), SHA256: done.SHA256, ExpiresAt: now.Add(expiry)}, nil
}

// PrefersURL reports whether a file of size bytes goes through the
// transfer store when it is written with Write or read with Read: from
// WithTransferThreshold (DefaultTransferThreshold on AWS with a
// WithTransferBucket; only an explicit threshold on the local platform,
// whose direct HTTP is faster on one machine).
func (f *Files) PrefersURL(size int64) bool {
	cfg := f.sbx.cfg
	th := cfg.xfer.threshold
	switch {
	case th < 0:
		return false
	case cfg.backend == BackendLocal:
		return th > 0 && size >= th
	case cfg.xfer.bucket == nil || cfg.xfer.bucket.Bucket == "":
		return false
	case th == 0:
		th = DefaultTransferThreshold
	}
	return size >= th
}

// UploadThroughURL writes size bytes of r to path through the transfer
// store: an upload URL (bound to size bytes, and to expected if it is a
// sha256), one PUT of r to it, and the sandbox's import. Options are
// UploadURL's.
func (f *Files) UploadThroughURL(ctx context.Context, path string, r io.Reader, size int64, opts ...FileOption) (*Entry, error) {
	if size < 0 || size > MaxSinglePutBytes {
		return nil, newError(ReasonInvalidArgument, "an upload through a URL is 0 to 5 GiB")
	}
	opts = append(opts, WithMaxBytes(uint64(max(size, 1))))
	tk, err := f.UploadURL(ctx, path, opts...)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, tk.Method, tk.URL, io.LimitReader(r, size))
	if err != nil {
		_, _ = tk.Cancel(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("rayito: upload: %w", err)
	}
	req.ContentLength = size
	if size == 0 {
		req.Body = http.NoBody
	}
	resp, err := f.storeClient().Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			err = newError(ReasonStorageDenied, "the transfer store refused the upload: "+resp.Status)
		}
	} else {
		err = newError(ReasonStorageUnavailable, "the transfer store could not be reached", errors.Unwrap(err))
	}
	if err != nil {
		_, _ = tk.Cancel(context.WithoutCancel(ctx))
		return nil, err
	}
	return tk.Wait(ctx)
}

// DownloadThroughURL reads path through the transfer store: the export
// (DownloadURL) and a GET of its link. The caller closes the body.
func (f *Files) DownloadThroughURL(ctx context.Context, path string, opts ...FileOption) (io.ReadCloser, *DownloadLink, error) {
	link, err := f.DownloadURL(ctx, path, opts...)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.URL, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("rayito: download: %w", err)
	}
	resp, err := f.storeClient().Do(req)
	if err != nil {
		return nil, nil, newError(ReasonStorageUnavailable, "the transfer store could not be reached", errors.Unwrap(err))
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, nil, newError(ReasonStorageDenied, "the transfer store refused the download: "+resp.Status)
	}
	return resp.Body, link, nil
}

// storeClient is the HTTP client of the caller's requests to the store
// (never the sandbox's data plane: the store is not behind its proxy).
func (f *Files) storeClient() *http.Client {
	if hc := f.sbx.cfg.httpClient; hc != nil {
		return hc
	}
	return http.DefaultClient
}

// readThroughURL reads path through the store when its size calls for it
// (ok false: read it directly), checking the link's sha256.
func (f *Files) readThroughURL(ctx context.Context, path string, opts []FileOption) ([]byte, bool, error) {
	st, err := f.Stat(ctx, path, opts...)
	if err != nil || st.Type != "file" || !f.PrefersURL(st.Size) || st.Size > MaxSinglePutBytes {
		return nil, false, nil
	}
	body, link, err := f.DownloadThroughURL(ctx, path, opts...)
	if err != nil {
		return nil, true, err
	}
	defer body.Close()
	h := sha256.New()
	var buf bytes.Buffer
	buf.Grow(int(min(link.Size, 1<<30)) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.TeeReader(io.LimitReader(body, link.Size+1), h)); err != nil {
		return nil, true, fmt.Errorf("rayito: read: %w", err)
	}
	if int64(buf.Len()) != link.Size || hex.EncodeToString(h.Sum(nil)) != link.SHA256 {
		return nil, true, newError(ReasonChecksumMismatch, "the downloaded file does not match the sandbox's sha256")
	}
	return buf.Bytes(), true, nil
}
