package e2b

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	e2bapi "github.com/rayito-dev/rayito/e2b"
)

// The local CA (--tls): made once per domain and kept, so that a client
// trusts it once (NODE_EXTRA_CA_CERTS, the system store); the server
// certificate it signs is made at each start, in memory.
const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca-key.pem"
	// caLifetime is the local CA's validity.
	caLifetime = 5 * 365 * 24 * time.Hour
	// leafLifetime is the validity of the server certificate; it is made
	// again when less than leafRenew is left.
	leafLifetime = 90 * 24 * time.Hour
	leafRenew    = 30 * 24 * time.Hour
	maxPEMFile   = 64 << 10
)

// LocalDomain is the domain of a gateway with --tls and no --domain:
// e2b.localhost, a name every resolver that follows RFC 6761 (systemd's,
// curl's, browsers') sends to loopback, under which a wildcard
// certificate is valid (clients refuse "*.localhost", a wildcard of a
// top-level name).
const LocalDomain = "e2b.localhost"

// DefaultTLSDir is where the gateway keeps its local CAs for the
// environment getenv reads: $XDG_STATE_HOME/rayito/e2b-tls, else
// ~/.local/state/rayito/e2b-tls.
func DefaultTLSDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "rayito", "e2b-tls"), nil
	}
	home := getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return "", errors.New("cannot locate the E2B gateway's TLS directory: set HOME or XDG_STATE_HOME")
	}
	return filepath.Join(home, ".local", "state", "rayito", "e2b-tls"), nil
}

// DomainFor is the domain a gateway listening on addr reports when none
// is given: LocalDomain with the port of addr (none for 443).
func DomainFor(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "443" || port == "" {
		return LocalDomain
	}
	return LocalDomain + ":" + port
}

// domainHost is a domain without its :PORT.
func domainHost(domain string) string {
	if h, _, err := net.SplitHostPort(domain); err == nil {
		return h
	}
	return domain
}

// LocalTLS is the TLS configuration of a gateway whose certificate comes
// from its own local CA for domain (its host, without the port): the CA
// is read from dir/<host>/, or made there (the directory 0700, the key
// 0600) when it is not. The CA can only sign for the host and its
// subdomains and for loopback addresses (name constraints, which the
// clients enforce), so its key, if stolen, cannot impersonate any other
// site to those who trust it. It returns the configuration and the path
// of the CA certificate, for the clients to trust.
func LocalTLS(dir, domain string) (*tls.Config, string, error) {
	host := domainHost(domain)
	caDir := filepath.Join(dir, host)
	if err := privateDir(dir); err != nil {
		return nil, "", err
	}
	if err := privateDir(caDir); err != nil {
		return nil, "", err
	}
	ca, key, err := loadCA(caDir)
	if errors.Is(err, os.ErrNotExist) {
		ca, key, err = makeCA(caDir, host)
	}
	if err != nil {
		return nil, "", err
	}
	if !ca.PermittedDNSDomainsCritical || len(ca.PermittedDNSDomains) != 1 || ca.PermittedDNSDomains[0] != host {
		return nil, "", fmt.Errorf("%s: the CA there is not the gateway's CA for %s: remove the directory to make a new one", caDir, host)
	}
	if time.Until(ca.NotAfter) < leafLifetime {
		return nil, "", fmt.Errorf("%s: the gateway's CA expires on %s: remove the directory to make a new one (and trust the new one)", caDir, ca.NotAfter.Format(time.DateOnly))
	}
	var mu sync.Mutex
	var leaf *tls.Certificate
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			mu.Lock()
			defer mu.Unlock()
			if leaf == nil || time.Until(leaf.Leaf.NotAfter) < leafRenew {
				c, err := makeLeaf(ca, key, host)
				if err != nil {
					return nil, err
				}
				leaf = c
			}
			return leaf, nil
		},
	}
	// Made now, so that a failure is the start's, not the first client's.
	if _, err := cfg.GetCertificate(nil); err != nil {
		return nil, "", err
	}
	return cfg, filepath.Join(caDir, caCertFile), nil
}

// FileTLS is the TLS configuration of a gateway with the operator's
// certificate and key (PEM files).
func FileTLS(certFile, keyFile string) (*tls.Config, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}, Certificates: []tls.Certificate{c}}, nil
}

// privateDir makes dir (0700) or checks that it is a directory of this
// user's that nobody else may use.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		if errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
				return err
			}
			return privateDir(dir)
		}
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (a symbolic link?): refusing it", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to another user", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	keyPEM, err := readPrivate(filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, nil, err
	}
	certPEM, err := readPrivate(filepath.Join(dir, caCertFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("%s has a CA key without its certificate: remove the directory to make a new CA", dir)
		}
		return nil, nil, err
	}
	kb, _ := pem.Decode(keyPEM)
	cb, _ := pem.Decode(certPEM)
	if kb == nil || cb == nil {
		return nil, nil, fmt.Errorf("%s: the CA files are not PEM", dir)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: the CA key: %w", dir, err)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: the CA certificate: %w", dir, err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, fmt.Errorf("%s: the CA certificate and key do not belong together", dir)
	}
	return cert, key, nil
}

// readPrivate reads a small file that must be this user's, a regular
// file and not a symbolic link (the key also 0600: checkPrivate).
func readPrivate(path string) ([]byte, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link: refusing it", path)
		}
		return nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkPrivate(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxPEMFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPEMFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxPEMFile)
	}
	return b, nil
}

func makeCA(dir, host string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Rayito"}, CommonName: "Rayito E2B gateway CA for " + host},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		// Only the domain, its subdomains and loopback.
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         []string{host},
		PermittedIPRanges:           []*net.IPNet{{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)}, {IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	// The key first: a certificate without its key is refused above, a
	// key without its certificate too, and both are written whole
	// (temp file, then rename) before use.
	if err := writePrivate(filepath.Join(dir, caKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})); err != nil {
		return nil, nil, err
	}
	if err := writePrivate(filepath.Join(dir, caCertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func writePrivate(path string, b []byte) error {
	tmp := path + ".tmp-" + strconv.Itoa(os.Getpid())
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = fh.Write(b)
	if err == nil {
		err = fh.Sync()
	}
	if err = errors.Join(err, fh.Close()); err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// makeLeaf signs a server certificate for host, *.host and loopback.
func makeLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, host string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"Rayito"}, CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{host, "*." + host},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

// Exposure is how clients reach a gateway: the domain it reports (E2B's
// `domain`: getHost and file links are <port>-<id>.<Domain>) and its
// TLS.
type Exposure struct {
	Domain string      // "": none reported (clients use their E2B_DOMAIN)
	TLS    *tls.Config // nil: plain HTTP
	CAFile string      // the local CA's certificate (--tls), for clients to trust
}

// NewExposure reads the gateway's --domain, --tls (a certificate from
// its local CA, kept under DefaultTLSDir) and --tls-cert/--tls-key (the
// operator's), for a gateway listening on addr. flag names the flags in
// errors ("" for e2b serve's, "e2b-" for local serve's).
func NewExposure(getenv func(string) string, prefix, addr, domain string, localCA bool, certFile, keyFile string) (Exposure, error) {
	var x Exposure
	if domain != "" && !e2bapi.ValidDomain(domain) {
		return x, cliutil.Usagef("--%sdomain %q: want a DNS name in lower case (letters, digits, dots, hyphens), optionally with :PORT", prefix, domain)
	}
	if (certFile == "") != (keyFile == "") {
		return x, cliutil.Usagef("--%stls-cert and --%stls-key go together", prefix, prefix)
	}
	switch {
	case localCA && certFile != "":
		return x, cliutil.Usagef("--%stls makes the gateway's own certificate: it does not take --%stls-cert", prefix, prefix)
	case certFile != "":
		if domain == "" {
			return x, cliutil.Usagef("--%stls-cert needs --%sdomain: the domain your certificate is for", prefix, prefix)
		}
		cfg, err := FileTLS(certFile, keyFile)
		if err != nil {
			return x, err
		}
		x.TLS = cfg
	case localCA:
		if domain == "" {
			domain = DomainFor(addr)
		}
		dir, err := DefaultTLSDir(getenv)
		if err != nil {
			return x, err
		}
		cfg, ca, err := LocalTLS(dir, domain)
		if err != nil {
			return x, err
		}
		x.TLS, x.CAFile = cfg, ca
	}
	x.Domain = domain
	return x, nil
}

// Env is what a client of the gateway on addr exports, as log attributes
// (never a key): E2B_DOMAIN alone when the gateway serves TLS under a
// domain (the SDKs then reach https://api.<domain> and
// https://<port>-<id>.<domain>, as on E2B), else E2B_API_URL and
// E2B_SANDBOX_URL (and E2B_DOMAIN when there is one, for getHost).
func (x Exposure) Env(addr string) []any {
	if x.TLS != nil && x.Domain != "" {
		env := []any{"E2B_DOMAIN", x.Domain}
		if x.CAFile != "" {
			env = append(env, "NODE_EXTRA_CA_CERTS", x.CAFile)
		}
		return env
	}
	scheme := "http://"
	if x.TLS != nil {
		scheme = "https://"
	}
	url := scheme + addr
	env := []any{"E2B_API_URL", url, "E2B_SANDBOX_URL", url}
	if x.Domain != "" {
		env = append(env, "E2B_DOMAIN", x.Domain)
	}
	return env
}
