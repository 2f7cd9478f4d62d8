package microvmstest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// MicrovmIDHeader names the microVM in requests the data plane hands to
// Options.App.
const MicrovmIDHeader = "X-Rayito-Microvm-Id"

// ---- Test CA ----

type testCA struct {
	pem  []byte
	pool *x509.CertPool
	leaf tls.Certificate
}

func newTestCA() (*testCA, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("microvmstest: CA key: %w", err)
	}
	now := time.Now()
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		return n
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "microvmstest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("microvmstest: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("microvmstest: endpoint key: %w", err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("microvmstest: endpoint certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &testCA{
		pem:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pool: pool,
		leaf: tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key},
	}, nil
}

// CACertPEM returns the PEM of the test CA that signs the endpoints'
// certificates.
func (s *Server) CACertPEM() []byte { return append([]byte(nil), s.tls.pem...) }

// CertPool returns a pool holding the test CA.
func (s *Server) CertPool() *x509.CertPool { return s.tls.pool.Clone() }

// TLSClientConfig returns a client configuration that trusts the
// endpoints (RootCAs: the test CA; ALPN h2 and http/1.1).
func (s *Server) TLSClientConfig() *tls.Config {
	return &tls.Config{RootCAs: s.CertPool(), MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
}

// ---- Endpoint listeners ----

type proxyListener struct {
	addr string
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	once sync.Once
}

func (p *proxyListener) close() {
	p.once.Do(func() {
		_ = p.srv.Close()
		<-p.done
	})
}

// newProxy opens the endpoint of microVM id.
func (s *Server) newProxy(id string) (*proxyListener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	p := &proxyListener{addr: ln.Addr().String(), ln: ln, done: make(chan struct{})}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveData(w, r, id) }),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{s.tls.leaf}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}},
		Protocols:         &protos,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(p.done)
		_ = p.srv.ServeTLS(ln, "", "")
	}()
	return p, nil
}

// ---- Data plane ----

func plainError(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

// parsePort reads x-aws-proxy-port: exactly one value of 1 to 5 digits
// worth 1..65535.
func parsePort(vals []string) (int, bool) {
	if len(vals) != 1 {
		return 0, false
	}
	v := strings.TrimSpace(vals[0])
	if v == "" || len(v) > 5 {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, _ := strconv.Atoi(v)
	return n, n >= 1 && n <= 65535
}

// serveData is the endpoint proxy of microVM id.
func (s *Server) serveData(w http.ResponseWriter, r *http.Request, id string) {
	rec := &statusRecorder{ResponseWriter: w}
	w = rec
	port, portOK := parsePort(r.Header.Values(microvmsapi.ProxyPortHeader))
	forceH2 := strings.TrimSpace(r.Header.Get(microvmsapi.ProxyForceH2Header)) == "true"
	s.mu.Lock()
	idx := len(s.preqs)
	s.preqs = append(s.preqs, ProxyRequest{MicrovmID: id, Port: port, Proto: r.Proto, Path: r.URL.Path, ForceH2: forceH2})
	s.mu.Unlock()
	defer func() {
		p := recover()
		s.mu.Lock()
		if idx < len(s.preqs) {
			st := rec.status
			if st == 0 {
				st = http.StatusOK
			}
			s.preqs[idx].Status = st
		}
		s.mu.Unlock()
		if p != nil {
			panic(p)
		}
	}()

	if !portOK {
		plainError(w, http.StatusBadRequest, "Bad Request: "+microvmsapi.ProxyPortHeader+" must be a port number")
		return
	}
	toks := r.Header.Values(microvmsapi.ProxyAuthHeader)
	s.mu.Lock()
	v := s.vms[id]
	var tok *authToken
	if len(toks) == 1 {
		tok = s.tokens[toks[0]]
	}
	authorized := v != nil && tok != nil && tok.microvmID == id && s.clock().Before(tok.expires) && tok.covers(port)
	var state microvmsapi.State
	var backendID, backendEndpoint string
	if v != nil {
		s.tickLocked(v, s.clock())
		state, backendID, backendEndpoint = v.pub.State, v.backendID, v.backendEndpoint
	}
	s.mu.Unlock()
	if !authorized {
		plainError(w, http.StatusForbidden, "Forbidden")
		return
	}
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-aws-proxy-") {
			r.Header.Del(k)
		}
	}

	if !s.forwarded() {
		if state != microvmsapi.StateRunning {
			plainError(w, http.StatusBadGateway, "Bad Gateway: the microVM is not running")
			return
		}
		if s.app == nil {
			plainError(w, http.StatusBadGateway, "Bad Gateway: no application answers on this port")
			return
		}
		r.Header.Set(MicrovmIDHeader, id)
		s.app.ServeHTTP(w, r)
		return
	}

	s.forwardData(w, r, v, state, backendID, backendEndpoint, port, forceH2)
}

// forwardData forwards a data request for v (in state as last seen, the
// backend's backendID at backendEndpoint) to the backend on port, with a
// token of the backend's own.
func (s *Server) forwardData(w http.ResponseWriter, r *http.Request, v *vm, state microvmsapi.State, backendID, backendEndpoint string, port int, forceH2 bool) {
	if state == microvmsapi.StateSuspended || state == microvmsapi.StateTerminated {
		// What the fake last saw; the backend decides otherwise.
		if st, e := s.liveState(r.Context(), v); e == nil {
			state = st
		}
		if state == microvmsapi.StateTerminated {
			plainError(w, http.StatusBadGateway, "Bad Gateway: the microVM is not running")
			return
		}
	}
	beTok, err := s.backendToken(r.Context(), backendID, port)
	if err != nil {
		plainError(w, http.StatusBadGateway, "Bad Gateway")
		return
	}
	key := beTokenKey{backendID, port}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(s.backendURL)
			pr.Out.Host = backendEndpoint
			pr.Out.Header.Set(microvmsapi.ProxyAuthHeader, beTok)
			pr.Out.Header.Set(microvmsapi.ProxyPortHeader, strconv.Itoa(port))
			if forceH2 {
				pr.Out.Header.Set(microvmsapi.ProxyForceH2Header, "true")
			}
		},
		Transport:     s.upstream(),
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusForbidden && resp.Header.Get("grpc-status") == "" {
				s.mu.Lock()
				if s.beTokens[key].token == beTok {
					delete(s.beTokens, key)
				}
				s.mu.Unlock()
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			plainError(w, http.StatusBadGateway, "Bad Gateway")
		},
	}
	if r.ProtoMajor == 1 {
		// As the real proxy: a backend that answers before the body is
		// all read must not have the body closed under the transport.
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	rp.ServeHTTP(w, r)
}

var (
	upstreamOnce sync.Once
	upstreamT    *http.Transport
)

// upstream is the HTTP/1.1 transport to backends.
func (s *Server) upstream() *http.Transport {
	upstreamOnce.Do(func() {
		var p http.Protocols
		p.SetHTTP1(true)
		upstreamT = &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			Protocols:           &p,
			DisableCompression:  true,
			MaxIdleConnsPerHost: 32,
			IdleConnTimeout:     30 * time.Second,
		}
	})
	return upstreamT
}

// beTokenKey keys the backend's auth tokens.
type beTokenKey struct {
	id   string
	port int
}

type beToken struct {
	token   string
	expires time.Time
}

// backendToken returns a token of the backend for its microVM id and port,
// minting one (valid 60 minutes, used for 50) when none is cached.
func (s *Server) backendToken(ctx context.Context, id string, port int) (string, error) {
	key := beTokenKey{id, port}
	now := time.Now()
	s.mu.Lock()
	t, ok := s.beTokens[key]
	s.mu.Unlock()
	if ok && now.Before(t.expires) {
		return t.token, nil
	}
	p := port
	tok, err := s.backend.CreateMicrovmAuthToken(ctx, id, &microvmsapi.CreateMicrovmAuthTokenInput{
		ExpirationInMinutes: microvmsapi.MaxAuthTokenMinutes,
		AllowedPorts:        []microvmsapi.AllowedPort{{Port: &p}},
	})
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.beTokens[key] = beToken{token: tok, expires: now.Add(50 * time.Minute)}
	s.mu.Unlock()
	return tok, nil
}
