package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"sync"
	"time"
)

const (
	caLifetime    = 397 * 24 * time.Hour
	leafLifetime  = 30 * 24 * time.Hour
	leafRenewal   = 24 * time.Hour
	maxLeafCached = 64
)

// ca is the per-sandbox certificate authority. Its key lives in memory only.
type ca struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	pem     []byte
	now     func() time.Time
	mu      sync.Mutex
	leaves  map[string]*tls.Certificate
	leafKey *ecdsa.PrivateKey
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func newCA(now func() time.Time) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Rayito sandbox CA " + hex.EncodeToString(id[:])},
		NotBefore:             t.Add(-time.Hour),
		NotAfter:              t.Add(caLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &ca{
		cert:    cert,
		key:     key,
		pem:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		now:     now,
		leaves:  map[string]*tls.Certificate{},
		leafKey: leafKey,
	}, nil
}

// leaf returns a certificate for host signed by the CA, cached per host and
// renewed a day before it expires.
func (c *ca) leaf(host string) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.now()
	if l, ok := c.leaves[host]; ok && t.Add(leafRenewal).Before(l.Leaf.NotAfter) {
		return l, nil
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notAfter := t.Add(leafLifetime)
	if notAfter.After(c.cert.NotAfter) {
		notAfter = c.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             t.Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &c.leafKey.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	l := &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: c.leafKey, Leaf: cert}
	if len(c.leaves) >= maxLeafCached {
		clear(c.leaves)
	}
	c.leaves[host] = l
	return l, nil
}
