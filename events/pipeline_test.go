package events_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/rayito-dev/rayito/events/internal/deliverer"
	"github.com/rayito-dev/rayito/events/internal/forwarder"
	"github.com/rayito-dev/rayito/events/internal/store"
	"github.com/rayito-dev/rayito/proto/events"
)

type key []byte

func (k key) StackKey(context.Context) ([]byte, error) { return k, nil }

type secret string

func (s secret) Secret(context.Context, string) (string, error) { return string(s), nil }

type resolver map[string]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
}

// TestPipeline: rayd's four signed lines for one sandbox, as a CloudWatch
// Logs subscription delivers them, go through the forwarder into the store
// and from the store's new events through the deliverer to an HTTPS
// receiver, which gets four webhooks in lifecycle order and verifies both
// signatures; a replayed subscription batch delivers nothing more.
func TestPipeline(t *testing.T) {
	ctx := context.Background()
	stackKey := bytes.Repeat([]byte("s"), 32)
	const sbx, hookSecret = "sbx-pipeline", "whsec-0123456789abcdef0123456789abcdef"
	now := time.Now()

	// rayd's lines.
	sk := events.SandboxKey(stackKey, sbx)
	var lines []string
	var want []string
	for i, typ := range []events.Type{events.Created, events.Paused, events.Resumed, events.Killed} {
		id, err := events.NewEventID()
		if err != nil {
			t.Fatal(err)
		}
		ev := events.Event{EventID: id, SandboxID: sbx, Type: typ, Generation: uint64(i + 1), OccurredAtMs: now.Add(time.Duration(i) * time.Second).UnixMilli(), ImageARN: "arn:aws:lambda:us-east-1:123456789012:microvm-image/rayito-base"}
		if typ == events.Killed {
			ev.KillReason = events.KillRequest
		}
		l, err := events.Encode(sk, ev)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l, "some other rayd output")
		want = append(want, "sandbox.lifecycle."+string(typ))
	}
	js, _ := json.Marshal(lambdaevents.CloudwatchLogsData{MessageType: "DATA_MESSAGE", LogGroup: "/rayito/rayito-base", LogStream: "rayito/" + sbx, LogEvents: func() []lambdaevents.CloudwatchLogsLogEvent {
		var out []lambdaevents.CloudwatchLogsLogEvent
		for i, l := range lines {
			out = append(out, lambdaevents.CloudwatchLogsLogEvent{ID: string(rune('a' + i)), Timestamp: now.UnixMilli(), Message: l})
		}
		return out
	}()})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(js)
	zw.Close()
	batch := lambdaevents.CloudwatchLogsEvent{AWSLogs: lambdaevents.CloudwatchLogsRawData{Data: base64.StdEncoding.EncodeToString(gz.Bytes())}}

	// A store that records the new event items, as the table's stream.
	st := &streamStore{Memory: store.NewMemory()}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	fw := &forwarder.Forwarder{Keys: key(stackKey), Store: st, Log: quiet}

	// The receiver.
	var mu sync.Mutex
	var got []string
	rc := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := events.VerifyWebhook(r.Header, body, hookSecret, "wh-1", time.Now()); err != nil {
			t.Errorf("rayito-signature: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if err := events.VerifyE2BSignature(r.Header, body, hookSecret); err != nil {
			t.Errorf("e2b-signature: %v", err)
		}
		var b deliverer.Body
		json.Unmarshal(body, &b)
		mu.Lock()
		got = append(got, b.Type)
		mu.Unlock()
	}))
	cert, pool := testCert(t)
	rc.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	rc.StartTLS()
	defer rc.Close()
	public := netip.MustParseAddr("93.184.216.34")
	dl := &deliverer.Deliverer{
		Store: st, Secrets: secret(hookSecret), RootCAs: pool, Log: quiet,
		Resolver: resolver{"hooks.example.com": public},
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			if a.Addr() != public {
				t.Fatalf("dial %s", a)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", rc.Listener.Addr().String())
		},
	}
	if err := st.PutWebhook(ctx, store.Webhook{WebhookID: "wh-1", URL: "https://hooks.example.com/rayito", SecretRef: "rayito/webhooks/wh-1", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}

	for round := 0; round < 2; round++ {
		sum, err := fw.Handle(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 && (sum.Admitted != 4 || sum.Ignored != 4) || round == 1 && sum.Rejected[forwarder.ReasonDuplicate] != 4 {
			t.Fatalf("round %d: %+v", round, sum)
		}
		if _, err := dl.Deliver(ctx, st.drain()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("received %v, want %v", got, want)
	}
}

type streamStore struct {
	*store.Memory
	mu  sync.Mutex
	new []events.Event
}

func (s *streamStore) PutEvent(ctx context.Context, ev events.Event) error {
	if err := s.Memory.PutEvent(ctx, ev); err != nil {
		return err
	}
	s.mu.Lock()
	s.new = append(s.new, ev)
	s.mu.Unlock()
	return nil
}

func (s *streamStore) drain() []events.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.new
	s.new = nil
	return out
}

func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{"hooks.example.com"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}, pool
}
