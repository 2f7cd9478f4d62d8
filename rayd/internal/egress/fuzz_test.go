package egress

import (
	"bytes"
	"crypto/tls"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkTarget fails unless t is what the strict checks accept.
func checkTarget(t *testing.T, tg target) {
	t.Helper()
	if tg.port == 0 {
		t.Fatalf("port 0 accepted")
	}
	if tg.isIP {
		if !tg.addr.IsValid() || tg.addr.Zone() != "" || tg.host != tg.addr.String() {
			t.Fatalf("bad IP target %+v", tg)
		}
		return
	}
	checkName(t, tg.host)
}

func checkName(t *testing.T, name string) {
	t.Helper()
	if name == "" || len(name) > MaxNameLen || strings.HasSuffix(name, ".") || strings.Contains(name, "..") || strings.HasPrefix(name, ".") {
		t.Fatalf("bad name %q", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			t.Fatalf("bad byte in name %q", name)
		}
	}
	for _, l := range strings.Split(name, ".") {
		if len(l) > maxLabelLen {
			t.Fatalf("label too long in %q", name)
		}
	}
	again, err := normalizeHost(name)
	if err != nil || again.host != name || again.isIP {
		t.Fatalf("normalizeHost not idempotent on %q", name)
	}
}

func FuzzParseConnect(f *testing.F) {
	for _, s := range []string{
		"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n",
		"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n",
		"CONNECT 192.0.2.1:80 HTTP/1.0\r\nUser-Agent: x\r\n\r\nextra",
		"CONNECT a..b:443 HTTP/1.1\r\n\r\n",
		"CONNECT a:443 HTTP/1.1\r\n X: folded\r\n\r\n",
		"CONNECT a:443 HTTP/1.1\r\nX:\x00\r\n\r\n",
		"CONNECT a:443",
		"CONNECT x.localhost:443 HTTP/1.1\r\n\r\n",
		"CONNECT LOCALHOST.:1080 HTTP/1.1\r\n\r\n",
		"CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tg, n, err := parseConnect(b)
		if err != nil {
			return
		}
		checkTarget(t, tg)
		head := b[:n]
		if n < 4 || !bytes.HasSuffix(head, []byte("\r\n\r\n")) || !bytes.HasPrefix(head, []byte("CONNECT ")) || n > MaxHeadSize {
			t.Fatalf("bad head length %d", n)
		}
		if checkHeadPrefix(head) != nil {
			t.Fatalf("controls accepted in %q", head)
		}
	})
}

func FuzzParseAbsoluteURI(f *testing.F) {
	for _, s := range []string{
		"http://allowed.test/", "http://Allowed.test:8080/a/b?c=d", "HTTP://a.test", "http://a.test?x",
		"https://a.test/", "http://u:p@a.test/", "http://[::1]:80/", "http://a.test/#frag",
		"http://a.test%2f.evil/", "http://a.test:0/", "http://127.1/", "http://a.test:/",
		"http://x.localhost/", "http://localhost:8080/", "http://[fd00:ec2::254]/", "http://169.254.169.254/latest/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := parseAbsoluteURI(s)
		if err != nil {
			return
		}
		checkTarget(t, u.t)
		if !strings.HasPrefix(u.path, "/") || strings.ContainsAny(u.path, " \t\r\n#") {
			t.Fatalf("bad path %q", u.path)
		}
		if u.authority == "" || strings.ContainsAny(u.authority, "@%/?# \r\n") {
			t.Fatalf("bad authority %q", u.authority)
		}
		if !strings.HasPrefix(strings.ToLower(s), "http://") {
			t.Fatalf("non-http scheme accepted: %q", s)
		}
		// The whole request line must also parse.
		line := "GET " + s + " HTTP/1.1\r\n\r\n"
		if _, u2, err := parseAbsoluteRequest([]byte(line)); err != nil || u2 != u {
			t.Fatalf("request line disagrees: %v", err)
		}
	})
}

func FuzzSOCKS5(f *testing.F) {
	f.Add([]byte{5, 1, 0, 5, 1, 0, 3, 12, 'a', 'l', 'l', 'o', 'w', 'e', 'd', '.', 't', 'e', 's', 't', 1, 187})
	f.Add([]byte{5, 2, 0, 2, 5, 1, 0, 1, 203, 0, 113, 10, 0, 80})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 4, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 187})
	f.Add([]byte{5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 3, 0, 0, 80})
	f.Add([]byte{4, 1, 0, 80, 127, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, _, err := parseSOCKSGreeting(b)
		if err != nil {
			return
		}
		if n < 3 || n > len(b) {
			t.Fatalf("greeting length %d", n)
		}
		tg, m, err := parseSOCKSRequest(b[n:])
		if err != nil {
			return
		}
		if m < 8 || m > len(b)-n || b[n+1] != socksCmdConnect {
			t.Fatalf("request length %d", m)
		}
		checkTarget(t, tg)
	})
}

var (
	helloOnce sync.Once
	helloSeed []byte
)

// clientHello captures a real crypto/tls ClientHello.
func clientHello(f testing.TB, name string) []byte {
	c1, c2 := net.Pipe()
	go func() {
		tls.Client(c1, &tls.Config{ServerName: name}).Handshake()
		c1.Close()
	}()
	c2.SetDeadline(time.Now().Add(2 * time.Second))
	var buf []byte
	tmp := make([]byte, 4096)
	for {
		n, err := c2.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if _, perr := parseClientHelloSNI(buf); perr != errNeedMore || err != nil {
			break
		}
	}
	c2.Close()
	return buf
}

func FuzzSNI(f *testing.F) {
	helloOnce.Do(func() { helloSeed = clientHello(f, "allowed.test") })
	if name, err := parseClientHelloSNI(helloSeed); err != nil || name != "allowed.test" {
		f.Fatalf("real ClientHello: %q %v", name, err)
	}
	f.Add(helloSeed)
	// The same hello split in two records.
	if len(helloSeed) > 5+10 {
		body := helloSeed[5:]
		split := []byte{0x16, 3, 1, 0, 10}
		split = append(split, body[:10]...)
		rest := body[10:]
		split = append(split, 0x16, 3, 1, byte(len(rest)>>8), byte(len(rest)))
		split = append(split, rest...)
		if name, err := parseClientHelloSNI(split); err != nil || name != "allowed.test" {
			f.Fatalf("split ClientHello: %q %v", name, err)
		}
		f.Add(split)
	}
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := parseClientHelloSNI(b)
		if err != nil {
			return
		}
		checkName(t, name)
		if len(b) < 5 || b[0] != tlsRecordHandshake {
			t.Fatalf("accepted a non-handshake record")
		}
	})
}

func FuzzDNSQuery(f *testing.F) {
	f.Add(dnsQuery(f, 1, "allowed.test.", dnsmessage.TypeA))
	f.Add(dnsQuery(f, 2, "denied.test.", dnsmessage.TypeAAAA))
	f.Add(dnsQuery(f, 3, "x.allowed.test.", dnsmessage.TypeTXT))
	f.Add([]byte{0, 5, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1})
	pol := allowList{"allowed.test:443": true}
	f.Fuzz(func(t *testing.T, b []byte) {
		v := decide(pol, b)
		if !v.forward {
			if v.reply != nil {
				var p dnsmessage.Parser
				h, err := p.Start(v.reply)
				if err != nil || !h.Response || h.RCode != dnsmessage.RCodeRefused {
					t.Fatalf("bad refusal %x", v.reply)
				}
				if len(b) >= 2 && h.ID != uint16(b[0])<<8|uint16(b[1]) {
					t.Fatalf("refusal ID mismatch")
				}
			}
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(b)
		if err != nil || h.Response || h.OpCode != 0 {
			t.Fatalf("forwarded a non-query")
		}
		qs, err := p.AllQuestions()
		if err != nil || len(qs) != 1 || qs[0].Class != dnsmessage.ClassINET {
			t.Fatalf("forwarded %v %v", qs, err)
		}
		name := strings.TrimSuffix(strings.ToLower(qs[0].Name.String()), ".")
		if name != "allowed.test" || !plainWireName(b) {
			t.Fatalf("forwarded a query for %q", name)
		}
	})
}
