// Package microvmstest is a scripted fake of the AWS Lambda MicroVMs
// control plane (lambda-microvms 2025-09-09, rest-json) and of its
// endpoint proxy (the data plane), for tests, in the manner of
// net/http/httptest.
//
// A [Server] listens on 127.0.0.1 only. Its control plane answers every
// operation package microvms implements (microVMs, auth and shell tokens,
// images, versions, builds, managed images, tags) with the paths, bodies,
// errors and limits of the service, checks the SigV4 signature of every
// request, throttles each operation with a token bucket at the service's
// TPS, and can be scripted to fail ([Server.Fail]).
//
// MicroVMs are simulated (Options.Backend nil: states advance as they are
// polled with GetMicrovm) or forwarded to a backend that speaks the same
// API, such as a localvm platform (Options.Backend and
// Options.BackendEndpoint: the fake then adds what the backend lacks, image
// ARNs, signatures and TLS endpoints, and proxies each microVM's data
// plane to the backend's).
//
// Every microVM gets its own TLS listener on 127.0.0.1 (its endpoint,
// "127.0.0.1:PORT"), with a certificate for IP 127.0.0.1 signed by a test
// CA ([Server.CACertPEM]), ALPN h2 and http/1.1. It checks
// x-aws-proxy-auth and x-aws-proxy-port as the AWS proxy does and forwards
// to the backend (forwarded mode) or to Options.App (simulated mode).
//
// Images are always simulated: a build takes Options.Polls Get calls.
//
// The fake never logs; request bodies and headers are kept in memory only
// ([Server.Requests]).
//
// # Simulation
//
//   - A simulated microVM is PENDING after RunMicrovm and RUNNING once
//     Options.Polls GetMicrovm calls have seen it. TerminateMicrovm makes
//     it TERMINATING, then TERMINATED (stateReason "Success.") after Polls
//     more; SuspendMicrovm makes a RUNNING one SUSPENDING, then SUSPENDED;
//     ResumeMicrovm keeps it SUSPENDED for Polls Gets, then RUNNING. A
//     microVM past maximumDurationInSeconds (by Options.Clock) is
//     TERMINATED. Terminate, Suspend and Resume are idempotent (200 when
//     already there); Suspend of a PENDING microVM and Suspend, Resume or
//     auth tokens of a TERMINATING or TERMINATED one are ConflictException.
//     TERMINATED microVMs stay listed for 20 minutes. ListMicrovms lists
//     newest first, as localvm does.
//   - An image build is PENDING when created, IN_PROGRESS after the first
//     Get concerning the image (GetMicrovmImage, GetMicrovmImageVersion,
//     GetMicrovmImageBuild), and done after Polls: SUCCESSFUL and ACTIVE,
//     the image CREATED or UPDATED (or FAILED and CREATE_FAILED /
//     UPDATE_FAILED, see [Server.FailBuilds]). Deleting a version keeps
//     the image UPDATING (and the version DELETING) for Polls such Gets.
//     DeleteMicrovmImage removes the image at once (answering DELETING).
//   - ListMicrovmImages' nameFilter matches a substring of the name.
//
// # Not like the service
//
//   - Messages are the fake's own; only exception names, statuses and the
//     shape of the answers are meant to match.
//   - Request bodies with unknown fields are refused (ValidationException),
//     as localvm does; the service may ignore them.
//   - Forwarded microVMs keep the backend's id, and their data plane adds a
//     hop (TLS at the fake, HTTP/1.1 to the backend, which forwards to
//     the guest itself, over h2c when x-aws-proxy-force-h2 is "true").
//   - Without Options.App a simulated microVM's endpoint answers 502 to
//     authorized requests. No auto-resume, idle policy, per-VM connection
//     or bandwidth limits, WebSocket auth subprotocols, or capacity errors
//     (script them with [Server.Fail]).
//   - The data plane's x-aws-proxy-port is required (400 without it);
//     localvm defaults it to 8080.
//   - Memory quotas are not counted; image, version and concurrent-build
//     quotas are (100, 50, 5 or 10 in the four large regions).
package microvmstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// Defaults of Options.
const (
	DefaultRegion          = "us-east-1"
	DefaultAccountID       = "123456789012"
	DefaultAccessKeyID     = "AKIDRAYITOTEST"
	DefaultSecretAccessKey = "rayito-test-secret"
	DefaultPolls           = 2
)

// MaxBodyBytes caps a control-plane request body; a larger one is a
// ValidationException.
const MaxBodyBytes = 1 << 20

// MaxClockSkew is how far X-Amz-Date may be from Options.Clock.
const MaxClockSkew = 5 * time.Minute

// ManagedImage is the name of the managed base image the fake offers
// (versions "1").
const ManagedImage = "al2023-1"

// Options configure a Server.
type Options struct {
	// Region is the signing region and the region of every ARN; default
	// "us-east-1".
	Region string
	// AccountID is the account of every ARN; default "123456789012".
	AccountID string
	// Credentials verify every control-plane request's SigV4 signature
	// (service "lambda"); default AccessKeyID "AKIDRAYITOTEST",
	// SecretAccessKey "rayito-test-secret". With a SessionToken the
	// requests must carry (and sign) it in X-Amz-Security-Token.
	Credentials aws.Credentials
	// Backend, when set, runs the microVMs: RunMicrovm, GetMicrovm,
	// ListMicrovms, TerminateMicrovm, SuspendMicrovm and ResumeMicrovm
	// are forwarded to it (for example an unsigned client of a localvm
	// platform), and the data plane proxies to BackendEndpoint. Nil:
	// microVMs are simulated.
	Backend *microvms.Client
	// BackendEndpoint is the backend's base URL (localvm's
	// http://127.0.0.1:PORT), where the data-plane proxy sends requests
	// with Host set to the backend microVM's endpoint.
	BackendEndpoint string
	// Clock dates token buckets, auth-token expiry and timestamps, and
	// is what X-Amz-Date must be within 5 minutes of (unless
	// SignatureClock is set); default time.Now.
	Clock func() time.Time
	// SignatureClock, when set, replaces Clock for the signature's date
	// check only: a test that moves Clock forward (to expire auth tokens)
	// while its client signs with the real time sets it to time.Now.
	SignatureClock func() time.Time
	// Polls is how many Get calls an image build or a simulated state
	// transition takes; default 2 (0 or less means the default).
	Polls int

	// Rates overrides the server-side token buckets, in requests per
	// second (burst = rate, at least 1) per operation; a rate <= 0 turns
	// throttling off for that operation. The defaults are the service's
	// TPS: Run 5, Resume 5, Suspend 2, Terminate 10, Get 100, List 100,
	// AuthToken 50, Shell 5, and 10 for each image, build, managed-image
	// and tag operation.
	Rates map[microvms.Operation]float64
	// App serves the data plane of simulated microVMs: a request the
	// proxy authorizes reaches it, without x-aws-proxy-* headers, and
	// the header X-Rayito-Microvm-Id names the microVM. Nil: such
	// requests answer 502, as an endpoint whose application is down.
	App http.Handler
}

// Request is one control-plane request as the fake received it.
type Request struct {
	// Op is the operation the path and method name, "" for none.
	Op       microvms.Operation
	Method   string
	Path     string // escaped, as sent
	RawQuery string
	Header   http.Header
	Body     []byte // at most MaxBodyBytes+1 bytes
	// Signed is true when the request carried a valid SigV4 signature.
	Signed bool
	// Status is the status the fake answered.
	Status int
}

// ProxyRequest is one data-plane request as a microVM's endpoint received
// it.
type ProxyRequest struct {
	MicrovmID string
	// Port is the x-aws-proxy-port value, 0 when missing or invalid.
	Port int
	// Proto is the protocol the client spoke: "HTTP/1.1" or "HTTP/2.0".
	Proto string
	Path  string
	// Status is the status answered (0 while the request is in flight).
	Status int
	// ForceH2 is true when x-aws-proxy-force-h2 was "true".
	ForceH2 bool
}

// Server is the fake service. It is safe for concurrent use.
type Server struct {
	region, account string
	creds           aws.Credentials
	signer          *v4.Signer
	clock           func() time.Time
	sigClock        func() time.Time
	polls           int
	backend         *microvms.Client
	backendURL      *url.URL
	app             http.Handler
	tls             *testCA

	ln   net.Listener
	srv  *http.Server
	url  string
	done chan struct{}

	mu        sync.Mutex
	closed    bool
	reqs      []Request
	preqs     []ProxyRequest
	fails     map[microvms.Operation][]*failure
	buckets   map[microvms.Operation]*bucket
	failBuild int
	pages     map[string]cursor

	vmSeq     uint64
	vms       map[string]*vm
	runTokens map[string]idem
	tokens    map[string]*authToken
	beTokens  map[beTokenKey]beToken

	imgSeq      uint64
	images      map[string]*image // by name
	imageTokens map[string]idem
	buildSeq    uint64

	proxies []*proxyListener
}

type failure struct {
	n          int
	status     int
	exception  string
	retryAfter string
}

// idem remembers a clientToken: the fingerprint of the body it came with
// and what it made.
type idem struct {
	fingerprint string
	id          string
}

// New starts a Server on 127.0.0.1. Close it when done.
func New(opts Options) (*Server, error) {
	s := &Server{
		region:      opts.Region,
		account:     opts.AccountID,
		creds:       opts.Credentials,
		signer:      v4.NewSigner(),
		clock:       opts.Clock,
		polls:       opts.Polls,
		backend:     opts.Backend,
		app:         opts.App,
		done:        make(chan struct{}),
		fails:       map[microvms.Operation][]*failure{},
		buckets:     map[microvms.Operation]*bucket{},
		pages:       map[string]cursor{},
		vms:         map[string]*vm{},
		runTokens:   map[string]idem{},
		tokens:      map[string]*authToken{},
		beTokens:    map[beTokenKey]beToken{},
		images:      map[string]*image{},
		imageTokens: map[string]idem{},
	}
	if s.region == "" {
		s.region = DefaultRegion
	}
	if s.account == "" {
		s.account = DefaultAccountID
	}
	if s.creds.AccessKeyID == "" && s.creds.SecretAccessKey == "" {
		s.creds = aws.Credentials{AccessKeyID: DefaultAccessKeyID, SecretAccessKey: DefaultSecretAccessKey}
	}
	if s.creds.AccessKeyID == "" || s.creds.SecretAccessKey == "" {
		return nil, errors.New("microvmstest: Credentials need both AccessKeyID and SecretAccessKey")
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	s.sigClock = opts.SignatureClock
	if s.sigClock == nil {
		s.sigClock = s.clock
	}
	if s.polls <= 0 {
		s.polls = DefaultPolls
	}
	if s.backend != nil {
		if opts.BackendEndpoint == "" {
			return nil, errors.New("microvmstest: Backend needs BackendEndpoint")
		}
		u, err := url.Parse(opts.BackendEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("microvmstest: BackendEndpoint %q: want http(s)://host[:port]", opts.BackendEndpoint)
		}
		s.backendURL = u
	}
	rates := defaultRates()
	for op, r := range opts.Rates {
		rates[op] = r
	}
	now := s.clock()
	for op, r := range rates {
		if r > 0 {
			s.buckets[op] = newBucket(r, now)
		}
	}
	ca, err := newTestCA()
	if err != nil {
		return nil, err
	}
	s.tls = ca

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("microvmstest: listen: %w", err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveControl),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

func defaultRates() map[microvms.Operation]float64 {
	r := map[microvms.Operation]float64{
		microvms.OpRunMicrovm:                  5,
		microvms.OpResumeMicrovm:               5,
		microvms.OpSuspendMicrovm:              2,
		microvms.OpTerminateMicrovm:            10,
		microvms.OpGetMicrovm:                  100,
		microvms.OpListMicrovms:                100,
		microvms.OpCreateMicrovmAuthToken:      50,
		microvms.OpCreateMicrovmShellAuthToken: 5,
	}
	for _, op := range []microvms.Operation{
		microvms.OpCreateMicrovmImage, microvms.OpListMicrovmImages, microvms.OpGetMicrovmImage,
		microvms.OpUpdateMicrovmImage, microvms.OpDeleteMicrovmImage, microvms.OpListMicrovmImageVersions,
		microvms.OpGetMicrovmImageVersion, microvms.OpUpdateMicrovmImageVersion, microvms.OpDeleteMicrovmImageVersion,
		microvms.OpListMicrovmImageBuilds, microvms.OpGetMicrovmImageBuild, microvms.OpListManagedMicrovmImages,
		microvms.OpListManagedMicrovmImageVersions, microvms.OpTagResource, microvms.OpUntagResource, microvms.OpListTags,
	} {
		r[op] = 10
	}
	return r
}

// URL is the control plane's base URL, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// Region is the server's region.
func (s *Server) Region() string { return s.region }

// AccountID is the server's account.
func (s *Server) AccountID() string { return s.account }

// Credentials returns the credentials requests must be signed with.
func (s *Server) Credentials() aws.Credentials { return s.creds }

// CredentialsProvider returns a provider of [Server.Credentials].
func (s *Server) CredentialsProvider() aws.CredentialsProvider {
	c := s.creds
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return c, nil })
}

// Client returns a client of the control plane signed with the server's
// credentials and region; opts apply after those.
func (s *Server) Client(opts ...microvms.Option) (*microvms.Client, error) {
	base := []microvms.Option{microvms.WithCredentials(s.CredentialsProvider()), microvms.WithRegion(s.region)}
	return microvms.New(s.url, append(base, opts...)...)
}

// SignRequest signs r (whose body is body) as a client with the server's
// credentials would, dated by Options.Clock: for tests that send raw
// requests.
func (s *Server) SignRequest(r *http.Request, body []byte) error {
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:])
	r.Header.Set("X-Amz-Content-Sha256", h)
	return s.signer.SignHTTP(r.Context(), s.creds, r, h, microvmsapi.SigningName, s.region, s.sigClock().UTC())
}

// Close closes the control plane and every endpoint listener. It is
// idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	proxies := s.proxies
	s.proxies = nil
	s.mu.Unlock()
	_ = s.srv.Close()
	<-s.done
	for _, p := range proxies {
		p.close()
	}
	if s.backend != nil {
		s.upstream().CloseIdleConnections()
	}
}

// Fail makes the next n calls of op (after their signature is checked)
// answer status with the exception name, and a Retry-After header when
// retryAfter is not empty. Calls queue: a second Fail for the same op
// applies after the first is used up.
func (s *Server) Fail(op microvms.Operation, n int, status int, exception string, retryAfter string) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[op] = append(s.fails[op], &failure{n: n, status: status, exception: exception, retryAfter: retryAfter})
}

// FailBuilds makes the next n image builds (CreateMicrovmImage,
// UpdateMicrovmImage) end FAILED.
func (s *Server) FailBuilds(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failBuild += n
}

// Requests returns every control-plane request so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// ProxyRequests returns every data-plane request so far, in order.
func (s *Server) ProxyRequests() []ProxyRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ProxyRequest(nil), s.preqs...)
}

// ImageARN is the ARN of the image name:
// arn:aws:lambda:<region>:<account>:microvm-image:<name>.
func (s *Server) ImageARN(name string) string {
	return "arn:aws:lambda:" + s.region + ":" + s.account + ":microvm-image:" + name
}

// ManagedImageARN is the ARN of a managed image:
// arn:aws:lambda:<region>:aws:microvm-image:<name>.
func (s *Server) ManagedImageARN(name string) string {
	return "arn:aws:lambda:" + s.region + ":aws:microvm-image:" + name
}

// ConnectorARN is the ARN of a managed network connector of the region.
func (s *Server) ConnectorARN(name string) string { return microvmsapi.ConnectorARN(s.region, name) }

// RoleARN is the ARN of an IAM role of the account.
func (s *Server) RoleARN(name string) string { return "arn:aws:iam::" + s.account + ":role/" + name }

// ---- Errors ----

// apiErr is an answer of the rest-json error shape.
type apiErr struct {
	status     int
	exception  string
	message    string
	retryAfter string
}

func (e *apiErr) Error() string { return e.exception + ": " + e.message }

func newErr(exception, msg string) *apiErr {
	return &apiErr{status: microvmsapi.StatusOf(exception), exception: exception, message: msg}
}

func validation(format string, args ...any) *apiErr {
	return newErr(microvmsapi.ValidationException, fmt.Sprintf(format, args...))
}

func notFound(format string, args ...any) *apiErr {
	return newErr(microvmsapi.ResourceNotFoundException, fmt.Sprintf(format, args...))
}

func conflict(format string, args ...any) *apiErr {
	return newErr(microvmsapi.ConflictException, fmt.Sprintf(format, args...))
}

func quota(format string, args ...any) *apiErr {
	return newErr(microvmsapi.ServiceQuotaExceededException, fmt.Sprintf(format, args...))
}

func internal() *apiErr {
	return newErr(microvmsapi.InternalServerException, "An internal error occurred.")
}

// defaultMessage is the message of a scripted failure.
func defaultMessage(exception string) string {
	switch exception {
	case microvmsapi.ThrottlingException:
		return "Rate exceeded"
	case microvmsapi.ServiceQuotaExceededException:
		return "You have exceeded a service quota for your account."
	case microvmsapi.InternalServerException:
		return "An internal error occurred."
	case microvmsapi.ResourceNotFoundException:
		return "The resource does not exist."
	case microvmsapi.ConflictException:
		return "The resource is in a state that does not allow the operation."
	case microvmsapi.AccessDeniedException:
		return "You are not authorized to perform this operation."
	case microvmsapi.ValidationException:
		return "The request is not valid."
	}
	return "The request failed."
}

func writeErr(w http.ResponseWriter, e *apiErr) {
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{e.message})
	h := w.Header()
	if e.exception != "" {
		h.Set(microvmsapi.ErrorTypeHeader, e.exception)
	}
	if e.retryAfter != "" {
		h.Set("Retry-After", e.retryAfter)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

func writeOK(w http.ResponseWriter, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		writeErr(w, internal())
		return http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return http.StatusOK
}

// ---- Routing ----

// call is one control-plane request being served.
type call struct {
	ctx    context.Context
	method string
	params []string // unescaped path parameters, in path order
	query  url.Values
	body   []byte
}

type handler func(s *Server, c *call) (any, *apiErr)

type route struct {
	op microvms.Operation
	h  handler
}

// routeOf names the operation of a request. For a known path with another
// method it returns no route and the allowed methods.
func routeOf(method, escapedPath string) (rt route, params []string, allow string, ok bool) {
	var prefix string
	var rest string
	switch {
	case strings.HasPrefix(escapedPath, microvmsapi.APIVersion+"/"):
		prefix, rest = microvmsapi.APIVersion, escapedPath[len(microvmsapi.APIVersion)+1:]
	case strings.HasPrefix(escapedPath, microvmsapi.TagsAPIVersion+"/tags/"):
		prefix, rest = microvmsapi.TagsAPIVersion, escapedPath[len(microvmsapi.TagsAPIVersion)+1:]
	default:
		return route{}, nil, "", false
	}
	raw := strings.Split(rest, "/")
	segs := make([]string, len(raw))
	for i, r := range raw {
		v, err := url.PathUnescape(r)
		if err != nil || v == "" {
			return route{}, nil, "", false
		}
		segs[i] = v
	}
	var set routeSet
	switch {
	case prefix == microvmsapi.TagsAPIVersion:
		set, ok = tagRoutes(segs)
	case segs[0] == "microvms":
		set, ok = microvmRoutes(segs)
	case segs[0] == "microvm-images":
		set, ok = imageRoutes(segs)
	case segs[0] == "managed-microvm-images":
		set, ok = managedImageRoutes(segs)
	}
	if !ok {
		return route{}, nil, "", false
	}
	if r, ok := set.methods[method]; ok {
		return r, set.params, "", true
	}
	return route{}, nil, set.allow, false
}

// routeSet is what a path names: its operation by method, the methods it
// allows and its path parameters.
type routeSet struct {
	methods map[string]route
	allow   string
	params  []string
}

// routes is a routeSet.
func routes(m map[string]route, allow string, params ...string) (routeSet, bool) {
	return routeSet{methods: m, allow: allow, params: params}, true
}

// tagRoutes are the operations of tags/<arn> (segs).
func tagRoutes(segs []string) (routeSet, bool) {
	if len(segs) != 2 {
		return routeSet{}, false
	}
	return routes(map[string]route{
		http.MethodPost:   {microvms.OpTagResource, (*Server).tagResource},
		http.MethodDelete: {microvms.OpUntagResource, (*Server).untagResource},
		http.MethodGet:    {microvms.OpListTags, (*Server).listTags},
	}, "DELETE, GET, POST", segs[1])
}

// microvmRoutes are the operations of microvms[/<id>[/<action>]] (segs).
func microvmRoutes(segs []string) (routeSet, bool) {
	switch len(segs) {
	case 1:
		return routes(map[string]route{
			http.MethodPost: {microvms.OpRunMicrovm, (*Server).runMicrovm},
			http.MethodGet:  {microvms.OpListMicrovms, (*Server).listMicrovms},
		}, "GET, POST")
	case 2:
		return routes(map[string]route{
			http.MethodGet:    {microvms.OpGetMicrovm, (*Server).getMicrovm},
			http.MethodDelete: {microvms.OpTerminateMicrovm, (*Server).terminateMicrovm},
		}, "DELETE, GET", segs[1])
	case 3:
		var r route
		switch segs[2] {
		case "suspend":
			r = route{microvms.OpSuspendMicrovm, (*Server).suspendMicrovm}
		case "resume":
			r = route{microvms.OpResumeMicrovm, (*Server).resumeMicrovm}
		case "auth-token":
			r = route{microvms.OpCreateMicrovmAuthToken, (*Server).createAuthToken}
		case "shell-auth-token":
			r = route{microvms.OpCreateMicrovmShellAuthToken, (*Server).createShellAuthToken}
		default:
			return routeSet{}, false
		}
		return routes(map[string]route{http.MethodPost: r}, "POST", segs[1])
	}
	return routeSet{}, false
}

// imageRoutes are the operations of microvm-images, an image, its
// versions and their builds (segs).
func imageRoutes(segs []string) (routeSet, bool) {
	n := len(segs)
	switch {
	case n == 1:
		return routes(map[string]route{
			http.MethodPost: {microvms.OpCreateMicrovmImage, (*Server).createImage},
			http.MethodGet:  {microvms.OpListMicrovmImages, (*Server).listImages},
		}, "GET, POST")
	case n == 2:
		return routes(map[string]route{
			http.MethodGet:    {microvms.OpGetMicrovmImage, (*Server).getImage},
			http.MethodPut:    {microvms.OpUpdateMicrovmImage, (*Server).updateImage},
			http.MethodDelete: {microvms.OpDeleteMicrovmImage, (*Server).deleteImage},
		}, "DELETE, GET, PUT", segs[1])
	case n == 3 && segs[2] == "versions":
		return routes(map[string]route{
			http.MethodGet: {microvms.OpListMicrovmImageVersions, (*Server).listVersions},
		}, "GET", segs[1])
	case n == 4 && segs[2] == "versions":
		return routes(map[string]route{
			http.MethodGet:    {microvms.OpGetMicrovmImageVersion, (*Server).getVersion},
			http.MethodPatch:  {microvms.OpUpdateMicrovmImageVersion, (*Server).updateVersion},
			http.MethodDelete: {microvms.OpDeleteMicrovmImageVersion, (*Server).deleteVersion},
		}, "DELETE, GET, PATCH", segs[1], segs[3])
	case n == 5 && segs[2] == "versions" && segs[4] == "builds":
		return routes(map[string]route{
			http.MethodGet: {microvms.OpListMicrovmImageBuilds, (*Server).listBuilds},
		}, "GET", segs[1], segs[3])
	case n == 6 && segs[2] == "versions" && segs[4] == "builds":
		return routes(map[string]route{
			http.MethodGet: {microvms.OpGetMicrovmImageBuild, (*Server).getBuild},
		}, "GET", segs[1], segs[3], segs[5])
	}
	return routeSet{}, false
}

// managedImageRoutes are the operations of managed-microvm-images and a
// managed image's versions (segs).
func managedImageRoutes(segs []string) (routeSet, bool) {
	switch n := len(segs); {
	case n == 1:
		return routes(map[string]route{
			http.MethodGet: {microvms.OpListManagedMicrovmImages, (*Server).listManaged},
		}, "GET")
	case n == 3 && segs[2] == "versions":
		return routes(map[string]route{
			http.MethodGet: {microvms.OpListManagedMicrovmImageVersions, (*Server).listManagedVersions},
		}, "GET", segs[1])
	}
	return routeSet{}, false
}

// unknownOperation is the exception of a path or method that names no
// operation.
const unknownOperation = "UnknownOperationException"

func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w}
	w = rec
	var idx = -1
	defer func() {
		if p := recover(); p != nil {
			if !rec.wrote {
				writeErr(w, internal())
			}
		}
		if idx >= 0 {
			s.mu.Lock()
			if idx < len(s.reqs) {
				s.reqs[idx].Status = rec.status
			}
			s.mu.Unlock()
		}
	}()
	body, readErr := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	w.Header().Set("X-Amzn-Requestid", newUUID())

	rt, params, allow, ok := routeOf(r.Method, r.URL.EscapedPath())
	var authErr *apiErr
	switch {
	case readErr != nil:
		authErr = validation("The request body could not be read.")
	case len(body) > MaxBodyBytes:
		authErr = validation("The request body exceeds %d bytes.", MaxBodyBytes)
	default:
		authErr = s.verify(r, body)
	}
	s.mu.Lock()
	idx = len(s.reqs)
	s.reqs = append(s.reqs, Request{
		Op: rt.op, Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body, Signed: authErr == nil && readErr == nil && len(body) <= MaxBodyBytes,
	})
	s.mu.Unlock()

	if authErr != nil {
		writeErr(w, authErr)
		return
	}
	if !ok {
		if allow != "" {
			w.Header().Set("Allow", allow)
			writeErr(w, &apiErr{status: http.StatusMethodNotAllowed, exception: unknownOperation, message: "The method is not allowed for this path."})
			return
		}
		writeErr(w, &apiErr{status: http.StatusNotFound, exception: unknownOperation, message: "No operation matches the request."})
		return
	}
	if e := s.scripted(rt.op); e != nil {
		writeErr(w, e)
		return
	}
	if !s.allow(rt.op) {
		e := newErr(microvmsapi.ThrottlingException, "Rate exceeded")
		e.retryAfter = "1"
		writeErr(w, e)
		return
	}
	c := &call{ctx: r.Context(), method: r.Method, params: params, query: r.URL.Query(), body: body}
	out, e := rt.h(s, c)
	if e != nil {
		writeErr(w, e)
		return
	}
	if out == nil {
		out = struct{}{}
	}
	writeOK(w, out)
}

// scripted consumes a scripted failure of op, if any.
func (s *Server) scripted(op microvms.Operation) *apiErr {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.fails[op]
	if len(q) == 0 {
		return nil
	}
	f := q[0]
	f.n--
	if f.n <= 0 {
		s.fails[op] = q[1:]
	}
	status := f.status
	if status == 0 {
		status = microvmsapi.StatusOf(f.exception)
	}
	return &apiErr{status: status, exception: f.exception, message: defaultMessage(f.exception), retryAfter: f.retryAfter}
}

func (s *Server) allow(op microvms.Operation) bool {
	s.mu.Lock()
	b := s.buckets[op]
	s.mu.Unlock()
	if b == nil {
		return true
	}
	return b.allow(s.clock())
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		if !r.wrote {
			r.status, r.wrote = http.StatusOK, true
		}
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// decode reads a JSON object body (empty counts as {}) into v, refusing
// unknown fields and trailing data.
func decode(body []byte, v any) *apiErr {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return validation("SerializationException: the field %s has the wrong type.", te.Field)
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return validation("SerializationException: the request body has a field this operation does not accept.")
		default:
			return validation("SerializationException: the request body is not a valid JSON object.")
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return validation("SerializationException: the request body must hold exactly one JSON object.")
	}
	return nil
}

// fingerprint identifies a request body for clientToken idempotency.
func fingerprint(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ---- SigV4 ----

const sigAlgorithm = "AWS4-HMAC-SHA256"

func authErr(exception, msg string) *apiErr {
	return &apiErr{status: http.StatusForbidden, exception: exception, message: msg}
}

const msgSignatureMismatch = "The request signature we calculated does not match the signature you provided. " +
	"Check your AWS Secret Access Key and signing method. Consult the service documentation for details."

// verify recomputes the request's SigV4 signature with the configured
// credentials and compares it in constant time.
func (s *Server) verify(r *http.Request, body []byte) *apiErr {
	const unrecognized, invalidSig = "UnrecognizedClientException", "InvalidSignatureException"
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return authErr(unrecognized, "Missing Authentication Token")
	}
	rest, ok := strings.CutPrefix(auth, sigAlgorithm+" ")
	if !ok {
		return authErr(invalidSig, "Only "+sigAlgorithm+" signatures are supported.")
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return authErr(invalidSig, "Authorization header requires Credential, SignedHeaders and Signature.")
		}
		fields[k] = v
	}
	cred, signedHeaders, sig := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	if cred == "" || signedHeaders == "" || sig == "" {
		return authErr(invalidSig, "Authorization header requires Credential, SignedHeaders and Signature.")
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 {
		return authErr(invalidSig, "Credential should be scoped to a valid region.")
	}
	if subtle.ConstantTimeCompare([]byte(scope[0]), []byte(s.creds.AccessKeyID)) != 1 {
		return authErr(unrecognized, "The security token included in the request is invalid.")
	}
	amzDate := r.Header.Get("X-Amz-Date")
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return authErr(invalidSig, "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	now := s.sigClock().UTC()
	if d := now.Sub(t); d > MaxClockSkew || d < -MaxClockSkew {
		const f = "20060102T150405Z"
		if d > 0 {
			return authErr(invalidSig, "Signature expired: "+amzDate+" is now earlier than "+now.Add(-MaxClockSkew).Format(f)+" ("+now.Format(f)+" - 5 min.)")
		}
		return authErr(invalidSig, "Signature not yet current: "+amzDate+" is still later than "+now.Add(MaxClockSkew).Format(f)+" ("+now.Format(f)+" + 5 min.)")
	}
	switch {
	case scope[1] != amzDate[:8]:
		return authErr(invalidSig, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP.")
	case scope[2] != s.region:
		return authErr(invalidSig, "Credential should be scoped to a valid region.")
	case scope[3] != microvmsapi.SigningName:
		return authErr(invalidSig, "Credential should be scoped to correct service: '"+microvmsapi.SigningName+"'.")
	case scope[4] != "aws4_request":
		return authErr(invalidSig, "Credential should be scoped with a valid terminator: 'aws4_request'.")
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		return authErr(invalidSig, "The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	if s.creds.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") == "" {
		return authErr(unrecognized, "The security token included in the request is invalid.")
	}

	// The same request, with only the headers the client signed.
	vr, err := http.NewRequestWithContext(context.Background(), r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return authErr(invalidSig, msgSignatureMismatch)
	}
	vr.Host = r.Host
	for _, name := range strings.Split(signedHeaders, ";") {
		switch name {
		case "host":
		case "content-length":
			vr.ContentLength = int64(len(body))
		default:
			vals := r.Header.Values(name)
			if len(vals) == 0 {
				return authErr(invalidSig, msgSignatureMismatch)
			}
			vr.Header[textproto.CanonicalMIMEHeaderKey(name)] = vals
		}
	}
	if err := s.signer.SignHTTP(context.Background(), s.creds, vr, payloadHash, microvmsapi.SigningName, s.region, t); err != nil {
		return authErr(invalidSig, msgSignatureMismatch)
	}
	want := vr.Header.Get("Authorization")
	wantSigned, wantSig := "", ""
	for _, part := range strings.Split(strings.TrimPrefix(want, sigAlgorithm+" "), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "SignedHeaders":
			wantSigned = v
		case "Signature":
			wantSig = v
		}
	}
	okSigned := subtle.ConstantTimeCompare([]byte(wantSigned), []byte(signedHeaders))
	okSig := subtle.ConstantTimeCompare([]byte(wantSig), []byte(sig))
	if okSigned&okSig != 1 {
		return authErr(invalidSig, msgSignatureMismatch)
	}
	return nil
}

// ---- Throttling ----

type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate float64, now time.Time) *bucket {
	burst := math.Max(1, math.Ceil(rate))
	return &bucket{rate: rate, burst: burst, tokens: burst, last: now}
}

func (b *bucket) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(b.burst, b.tokens+el*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// ---- Pagination ----

// cursor continues a listing: the listing it belongs to and how far it
// got.
type cursor struct {
	listing string
	after   uint64
}

// newPageToken stores a cursor under a fresh opaque token.
func (s *Server) newPageTokenLocked(listing string, after uint64) string {
	tok := randomToken(24)
	s.pages[tok] = cursor{listing: listing, after: after}
	return tok
}

// pageParams reads maxResults and nextToken for the listing (an op and
// its filters); after is 0 for the first page.
func (s *Server) pageParams(c *call, listing string) (max int, after uint64, e *apiErr) {
	max = microvmsapi.MaxListResults
	if c.query.Has(microvmsapi.QueryMaxResults) {
		n, err := strconv.Atoi(c.query.Get(microvmsapi.QueryMaxResults))
		if err != nil || n < 1 || n > microvmsapi.MaxListResults {
			return 0, 0, validation("1 validation error detected: Value at 'maxResults' failed to satisfy constraint: Member must have value between 1 and %d", microvmsapi.MaxListResults)
		}
		max = n
	}
	if c.query.Has(microvmsapi.QueryNextToken) {
		s.mu.Lock()
		cur, ok := s.pages[c.query.Get(microvmsapi.QueryNextToken)]
		s.mu.Unlock()
		if !ok || cur.listing != listing {
			return 0, 0, validation("The nextToken is not valid.")
		}
		after = cur.after
	}
	return max, after, nil
}

// ---- Helpers ----

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func ptrTime(t time.Time) *time.Time { return &t }

func ts(t time.Time) *microvmsapi.Timestamp { return &microvmsapi.Timestamp{Time: t} }
