package transfer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

// Limits and timings of transfers.
const (
	// MaxActive bounds the transfers waiting or running at once.
	MaxActive = 16
	// MaxMoving bounds those moving data at once; the others wait.
	MaxMoving = 2
	// MaxFinished is how many ended transfers are kept, each at most
	// Retention.
	MaxFinished = 64
	Retention   = 30 * time.Minute
	// MaxBytes bounds an import (S3's single object limit for a PUT).
	MaxBytes = 5 << 30
	// MinPartSize is an export's smallest part but the last.
	MinPartSize = 8 << 20
	// MaxParts bounds an export's parts.
	MaxParts = 1000
	// Import polls for the object every pollFast for fastFor, then every
	// pollSlow, until it expires.
	pollFast = time.Second
	pollSlow = 5 * time.Second
	fastFor  = 10 * time.Minute
)

// Phase is where a transfer is.
type Phase int

// The phases.
const (
	Waiting Phase = iota + 1
	Running
	Done
	Failed
	Cancelled
)

// Ended reports a final phase.
func (p Phase) Ended() bool { return p >= Done }

// The failure codes of a transfer's State.Code (besides StreamError's
// not_found, permission_denied, invalid_argument, unavailable, internal
// and cancelled).
const (
	CodeTooLarge         = "too_large"
	CodeExpired          = "expired"
	CodeChecksumMismatch = "checksum_mismatch"
	CodeDiskReserve      = "disk_reserve"
	CodeWrongRegion      = "wrong_region"
)

// State is a transfer's state, as GetTransfer and WatchTransfer show it.
type State struct {
	ID                    string
	Direction             Direction
	Phase                 Phase
	BytesDone, BytesTotal uint64
	// Probes counts an import's polls for its object.
	Probes uint32
	// Entry is the file imported or exported (when known).
	Entry     *safefs.Entry
	SHA256    string
	PartETags []string
	Duration  time.Duration
	// Code and Message say why a transfer failed (Failed, Cancelled).
	Code, Message string
}

// Signed is one pre-signed request: its URL (never logged) and the
// headers it was signed with.
type Signed struct {
	URL     string
	Headers map[string]string
}

// ImportRequest fetches an object into a file.
type ImportRequest struct {
	Object Object
	Get    Signed
	// Delete, when set, removes the object once imported.
	Delete        *Signed
	WaitForObject bool
	// ExpiresAt is when the URLs expire (zero: no wait beyond the first
	// try).
	ExpiresAt      time.Time
	MaxBytes       uint64
	ExpectedSHA256 string
	Metadata       map[string]string
	Path           string
	User           safefs.User
	Mode           os.FileMode
}

// ExportRequest uploads a file to an object, in one PUT or in parts.
type ExportRequest struct {
	Object Object
	Path   string
	User   safefs.User
	Put    *Signed
	// PartSize and Parts: a multipart upload's parts (rayd PUTs them and
	// reports their ETags; the caller completes the upload).
	PartSize uint64
	Parts    []Signed
}

// Options configure a Manager.
type Options struct {
	FS        *safefs.FS
	SandboxID func() string
	Logger    *slog.Logger
	// Platform, when set, is the local platform's store for transfers:
	// requests for its host go through its socket (see client.go).
	Platform *Platform

	// Tests only: the resolver, extra admitted addresses, trusted CAs and
	// the polling timings.
	Lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
	Allow    func(netip.Addr) bool
	RootCAs  *x509.CertPool
	PollFast time.Duration
	PollSlow time.Duration
}

// Manager runs a sandbox's transfers in the background: they outlive the
// call that started them.
type Manager struct {
	o      Options
	client *http.Client
	base   context.Context
	stop   context.CancelFunc
	moving chan struct{}

	mu sync.Mutex
	ts map[string]*xfer
}

type xfer struct {
	mu       sync.Mutex
	st       State
	changed  chan struct{}
	cancel   context.CancelFunc
	start    time.Time
	endedAt  time.Time
	lastSent time.Time
}

// New returns a Manager; Close cancels what runs.
func New(o Options) *Manager {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PollFast <= 0 {
		o.PollFast = pollFast
	}
	if o.PollSlow <= 0 {
		o.PollSlow = pollSlow
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		o:      o,
		client: newClient(clientOptions{lookup: o.Lookup, allow: o.Allow, roots: o.RootCAs, platform: o.Platform}),
		base:   ctx, stop: cancel,
		moving: make(chan struct{}, MaxMoving),
		ts:     map[string]*xfer{},
	}
}

// Close cancels every transfer.
func (m *Manager) Close() { m.stop() }

// Errors of the calls (answered before any I/O).
var (
	// ErrTooMany: MaxActive transfers wait or run already.
	ErrTooMany = errors.New("transfer: too many transfers at once")
	// ErrNotFound: no such transfer (or it ended more than Retention ago).
	ErrNotFound = errors.New("transfer: no such transfer")
	// ErrInvalid: a request's field breaks a rule (its message names
	// which, never a value).
	ErrInvalid = errors.New("transfer: invalid request")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// checkHeaders admits the headers a pre-signed S3 request is signed with:
// x-amz-* (but never a credential), Content-Type, Content-MD5.
func checkHeaders(h map[string]string) error {
	if len(h) > 32 {
		return invalid("more than 32 headers")
	}
	for k, v := range h {
		lk := strings.ToLower(k)
		ok := lk == "content-type" || lk == "content-md5" || strings.HasPrefix(lk, "x-amz-") && lk != "x-amz-security-token"
		if !ok || len(v) > 1024 || strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
			return invalid("a header a pre-signed S3 request does not carry")
		}
		if strings.IndexFunc(k, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-')
		}) >= 0 {
			return invalid("a malformed header name")
		}
	}
	return nil
}

func (m *Manager) checkSigned(s Signed, o Object) error {
	if err := CheckURL(s.URL, o); err != nil {
		return err
	}
	return checkHeaders(s.Headers)
}

// StartImport checks r and starts fetching its object into its file; it
// returns the transfer's id.
func (m *Manager) StartImport(r ImportRequest) (string, error) {
	if err := CheckObject(r.Object, m.o.SandboxID(), Up); err != nil {
		return "", err
	}
	if err := m.checkSigned(r.Get, r.Object); err != nil {
		return "", err
	}
	if r.Delete != nil {
		if err := m.checkSigned(*r.Delete, r.Object); err != nil {
			return "", err
		}
	}
	if r.MaxBytes == 0 || r.MaxBytes > MaxBytes {
		r.MaxBytes = MaxBytes
	}
	if r.ExpectedSHA256 != "" && !validSHA256(r.ExpectedSHA256) {
		return "", invalid("expected_sha256 must be 64 lowercase hex characters")
	}
	if err := safefs.ValidateMetadata(r.Metadata); err != nil {
		return "", err
	}
	if _, err := m.o.FS.Resolve(r.User, r.Path); err != nil {
		return "", err
	}
	if !r.ExpiresAt.IsZero() && time.Now().After(r.ExpiresAt) {
		return "", invalid("the URLs have expired")
	}
	x, ctx, err := m.add(Up)
	if err != nil {
		return "", err
	}
	go m.runImport(ctx, x, r)
	return x.st.ID, nil
}

// StartExport checks r and starts uploading its file; it returns the
// transfer's id.
func (m *Manager) StartExport(r ExportRequest) (string, error) {
	if err := CheckObject(r.Object, m.o.SandboxID(), Down); err != nil {
		return "", err
	}
	switch {
	case r.Put != nil && len(r.Parts) == 0:
		if err := m.checkSigned(*r.Put, r.Object); err != nil {
			return "", err
		}
	case r.Put == nil && len(r.Parts) > 0:
		if r.PartSize < MinPartSize || len(r.Parts) > MaxParts {
			return "", invalid("a multipart export has parts of at least %d bytes, at most %d of them", MinPartSize, MaxParts)
		}
		for i, p := range r.Parts {
			if err := m.checkSigned(p, r.Object); err != nil {
				return "", err
			}
			if q := queryOf(p.URL); q.Get("partNumber") != strconv.Itoa(i+1) || q.Get("uploadId") == "" {
				return "", invalid("part %d's URL is not part %d of an upload", i+1, i+1)
			}
		}
	default:
		return "", invalid("an export has either a put or a multipart upload")
	}
	if _, err := m.o.FS.Resolve(r.User, r.Path); err != nil {
		return "", err
	}
	x, ctx, err := m.add(Down)
	if err != nil {
		return "", err
	}
	go m.runExport(ctx, x, r)
	return x.st.ID, nil
}

// add registers a new transfer (WAITING), or refuses past MaxActive.
func (m *Manager) add(dir Direction) (*xfer, context.Context, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purgeLocked()
	active := 0
	for _, x := range m.ts {
		x.mu.Lock()
		if !x.st.Phase.Ended() {
			active++
		}
		x.mu.Unlock()
	}
	if active >= MaxActive {
		return nil, nil, ErrTooMany
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancel(m.base)
	x := &xfer{st: State{ID: "tr-" + hex.EncodeToString(b[:]), Direction: dir, Phase: Waiting}, changed: make(chan struct{}), cancel: cancel, start: time.Now()}
	m.ts[x.st.ID] = x
	return x, ctx, nil
}

// purgeLocked drops ended transfers past Retention, and the oldest ended
// ones beyond MaxFinished.
func (m *Manager) purgeLocked() {
	var ended []*xfer
	for id, x := range m.ts {
		x.mu.Lock()
		e, at := x.st.Phase.Ended(), x.endedAt
		x.mu.Unlock()
		if e && time.Since(at) > Retention {
			delete(m.ts, id)
		} else if e {
			ended = append(ended, x)
		}
	}
	for len(ended) > MaxFinished {
		oldest := 0
		for i, x := range ended {
			if x.endedAt.Before(ended[oldest].endedAt) {
				oldest = i
			}
		}
		delete(m.ts, ended[oldest].st.ID)
		ended = append(ended[:oldest], ended[oldest+1:]...)
	}
}

// update changes x's state and wakes its watchers (progress at most every
// 100 ms unless force).
func (x *xfer) update(f func(*State), force bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.st.Phase.Ended() {
		return
	}
	f(&x.st)
	if x.st.Phase.Ended() {
		x.endedAt = time.Now()
		x.st.Duration = x.endedAt.Sub(x.start)
		force = true
	}
	if force || time.Since(x.lastSent) >= 100*time.Millisecond {
		x.lastSent = time.Now()
		close(x.changed)
		x.changed = make(chan struct{})
	}
}

func (x *xfer) snapshot() (State, chan struct{}) {
	x.mu.Lock()
	defer x.mu.Unlock()
	st := x.st
	st.PartETags = append([]string(nil), x.st.PartETags...)
	return st, x.changed
}

func (m *Manager) get(id string) (*xfer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purgeLocked()
	x, ok := m.ts[id]
	if !ok {
		return nil, ErrNotFound
	}
	return x, nil
}

// Get returns a transfer's state.
func (m *Manager) Get(id string) (State, error) {
	x, err := m.get(id)
	if err != nil {
		return State{}, err
	}
	st, _ := x.snapshot()
	return st, nil
}

// Watch calls send with the current state, then with every change, until
// the transfer ends (its last state sent) or ctx does.
func (m *Manager) Watch(ctx context.Context, id string, send func(State) error) error {
	x, err := m.get(id)
	if err != nil {
		return err
	}
	for {
		st, changed := x.snapshot()
		if err := send(st); err != nil {
			return err
		}
		if st.Phase.Ended() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Cancel cancels a transfer (an ended one stays as it ended) and returns
// its state once it stopped.
func (m *Manager) Cancel(ctx context.Context, id string) (State, error) {
	x, err := m.get(id)
	if err != nil {
		return State{}, err
	}
	x.update(func(s *State) { s.Phase, s.Code, s.Message = Cancelled, "cancelled", "cancelled" }, true)
	x.cancel()
	st, _ := x.snapshot()
	return st, nil
}

// fail ends x with err's code and fixed message.
func (x *xfer) fail(err error) {
	code, msg := classify(err)
	x.update(func(s *State) { s.Phase, s.Code, s.Message = Failed, code, msg }, true)
}

// Failures of a transfer's work.
var (
	errTooLarge = errors.New("the object is larger than max_bytes")
	errExpired  = errors.New("the URLs expired before the object appeared")
	errChecksum = errors.New("the object's sha256 is not the expected one")
)

// httpStatusError is an unexpected answer of S3.
type httpStatusError struct{ status int }

func (e *httpStatusError) Error() string { return "S3 answered " + http.StatusText(e.status) }

// classify gives a failure its code and fixed message (never a URL, key,
// path or S3's message).
func classify(err error) (string, string) {
	var he *httpStatusError
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled", "cancelled"
	case errors.Is(err, errTooLarge):
		return CodeTooLarge, errTooLarge.Error()
	case errors.Is(err, errExpired):
		return CodeExpired, errExpired.Error()
	case errors.Is(err, errChecksum):
		return CodeChecksumMismatch, errChecksum.Error()
	case errors.Is(err, ErrWrongRegion):
		return CodeWrongRegion, "the bucket is in another region than the URL's"
	case errors.Is(err, safefs.ErrDiskReserve), errors.Is(err, safefs.ErrDiskFull):
		return CodeDiskReserve, "the sandbox's disk reserve would be reached"
	case errors.Is(err, ErrAddressRefused):
		return "permission_denied", "the bucket's host resolves to an address rayd does not reach"
	case errors.As(err, &he) && (he.status == http.StatusForbidden || he.status == http.StatusUnauthorized):
		return "permission_denied", "S3 refused the pre-signed request (expired, or not signed for this)"
	case errors.As(err, &he) && he.status == http.StatusNotFound:
		return "not_found", "no such object"
	case errors.As(err, &he):
		return "unavailable", he.Error()
	case errors.Is(err, os.ErrNotExist):
		return "not_found", "no such file or directory"
	case errors.Is(err, safefs.ErrDenied), errors.Is(err, os.ErrPermission):
		return "permission_denied", "permission denied"
	case errors.Is(err, safefs.ErrIsDir), errors.Is(err, safefs.ErrNotRegular), errors.Is(err, safefs.ErrSymlink), errors.Is(err, safefs.ErrNotDir):
		return "invalid_argument", "the path is not a regular file a transfer can read or write"
	}
	var pe *safefs.PathError
	if errors.As(err, &pe) {
		return "internal", "file operation failed"
	}
	return "unavailable", "S3 could not be reached"
}

// acquire waits for a moving slot (the transfer stays WAITING meanwhile).
func (m *Manager) acquire(ctx context.Context) (func(), error) {
	select {
	case m.moving <- struct{}{}:
		return func() { <-m.moving }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *Manager) request(ctx context.Context, method string, s Signed, body io.Reader, length int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.URL, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = length
		if length == 0 {
			// An empty file: "Content-Length: 0", never a chunked body
			// (S3 answers 411 Length Required).
			req.Body = http.NoBody
		}
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, ErrAddressRefused) {
			return nil, ErrAddressRefused
		}
		return nil, errors.New("transport") // never the URL the client's error quotes
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		resp.Body.Close()
		return nil, ErrWrongRegion // S3 redirects a request for another region's bucket; rayd never follows
	}
	if resp.StatusCode == http.StatusBadRequest && resp.Header.Get("x-amz-bucket-region") != "" {
		resp.Body.Close()
		return nil, ErrWrongRegion
	}
	return resp, nil
}

func (m *Manager) runImport(ctx context.Context, x *xfer, r ImportRequest) {
	defer x.cancel()
	var resp *http.Response
	var err error
	for first := time.Now(); ; {
		x.update(func(s *State) { s.Probes++ }, false)
		resp, err = m.request(ctx, http.MethodGet, r.Get, nil, 0)
		if err != nil {
			x.fail(err)
			return
		}
		if resp.StatusCode == http.StatusOK {
			break
		}
		resp.Body.Close()
		missing := resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden
		if !missing || !r.WaitForObject {
			x.fail(&httpStatusError{resp.StatusCode})
			return
		}
		wait := m.o.PollFast
		if time.Since(first) > fastFor {
			wait = m.o.PollSlow
		}
		if !r.ExpiresAt.IsZero() && time.Now().Add(wait).After(r.ExpiresAt) {
			x.fail(errExpired)
			return
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			x.fail(ctx.Err())
			return
		}
	}
	defer resp.Body.Close()
	if resp.ContentLength > 0 && uint64(resp.ContentLength) > r.MaxBytes {
		x.fail(errTooLarge)
		return
	}
	// The object is there: wait (WAITING) for one of the moving slots.
	release, err := m.acquire(ctx)
	if err != nil {
		x.fail(err)
		return
	}
	defer release()
	x.update(func(s *State) {
		s.Phase = Running
		if resp.ContentLength >= 0 {
			s.BytesTotal = uint64(resp.ContentLength)
		}
	}, true)
	body := &checked{r: resp.Body, max: r.MaxBytes, h: sha256.New(), want: r.ExpectedSHA256, x: x}
	e, err := m.o.FS.WriteFile(ctx, r.User, r.Path, body, r.Mode.Perm(), r.Metadata)
	if err != nil {
		if body.err != nil {
			err = body.err
		}
		x.fail(err)
		return
	}
	sum := hex.EncodeToString(body.h.Sum(nil))
	if r.Delete != nil {
		if dresp, derr := m.request(ctx, http.MethodDelete, *r.Delete, nil, 0); derr == nil {
			dresp.Body.Close()
		} else {
			m.o.Logger.Warn("transfer: the imported object was not deleted")
		}
	}
	x.update(func(s *State) { s.Phase, s.Entry, s.SHA256, s.BytesDone = Done, &e, sum, body.n }, true)
}

// checked reads an import's body: at most max bytes, hashed, and at its
// end the sha256 compared with want (a mismatch is the last Read's
// error, so the file is never put in place).
type checked struct {
	r    io.Reader
	max  uint64
	n    uint64
	h    hash.Hash
	want string
	x    *xfer
	err  error
}

func (c *checked) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n += uint64(n)
		if c.n > c.max {
			c.err = errTooLarge
			return 0, c.err
		}
		c.h.Write(p[:n])
		done := c.n
		c.x.update(func(s *State) { s.BytesDone = done }, false)
	}
	if err == io.EOF && c.want != "" && hex.EncodeToString(c.h.Sum(nil)) != c.want {
		c.err = errChecksum
		return n, c.err
	}
	if err != nil && err != io.EOF {
		c.err = errors.New("transport")
		return n, c.err
	}
	return n, err
}

func (m *Manager) runExport(ctx context.Context, x *xfer, r ExportRequest) {
	defer x.cancel()
	release, err := m.acquire(ctx)
	if err != nil {
		x.fail(err)
		return
	}
	defer release()
	f, e, err := m.o.FS.ReadFile(ctx, r.User, r.Path)
	if err != nil {
		x.fail(err)
		return
	}
	defer f.Close()
	size := uint64(max(e.Size, 0))
	if len(r.Parts) > 0 && (size+r.PartSize-1)/r.PartSize != uint64(len(r.Parts)) && !(size == 0 && len(r.Parts) == 1) {
		x.fail(fmt.Errorf("%w: the file needs another number of parts", ErrInvalid))
		return
	}
	x.update(func(s *State) { s.Phase, s.BytesTotal, s.Entry = Running, size, &e }, true)
	h := sha256.New()
	progress := func(n int) {
		x.update(func(s *State) { s.BytesDone += uint64(n) }, false)
	}
	if r.Put != nil {
		body := &counting{r: io.TeeReader(io.LimitReader(f, int64(size)), h), fn: progress}
		resp, err := m.request(ctx, http.MethodPut, *r.Put, body, int64(size))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				err = &httpStatusError{resp.StatusCode}
			}
		}
		if err != nil {
			x.fail(err)
			return
		}
	} else {
		for i, p := range r.Parts {
			n := min(r.PartSize, size-uint64(i)*r.PartSize)
			body := &counting{r: io.TeeReader(io.LimitReader(f, int64(n)), h), fn: progress}
			resp, err := m.request(ctx, http.MethodPut, p, body, int64(n))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					err = &httpStatusError{resp.StatusCode}
				}
			}
			if err != nil {
				x.fail(err)
				return
			}
			etag := resp.Header.Get("ETag")
			x.update(func(s *State) { s.PartETags = append(s.PartETags, etag) }, true)
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))
	x.update(func(s *State) { s.Phase, s.SHA256 = Done, sum }, true)
}

// counting reports the bytes read through it.
type counting struct {
	r  io.Reader
	fn func(int)
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.fn(n)
	}
	return n, err
}

func queryOf(raw string) interface{ Get(string) string } {
	i := strings.IndexByte(raw, '?')
	if i < 0 {
		return emptyQuery{}
	}
	q, err := parseQuery(raw[i+1:])
	if err != nil {
		return emptyQuery{}
	}
	return q
}

type emptyQuery struct{}

func (emptyQuery) Get(string) string { return "" }

func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}
