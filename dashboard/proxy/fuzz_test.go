package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzReadRequest: any bytes through the strict reader and the body
// decoder: no panic, every refusal an ErrBadRequest (or the stream's
// EOF), and an accepted head is strict: exactly one Host, tchar names,
// values without CR, LF or NUL, one framing.
func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /x?y HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;a=b\r\nabc\r\n0\r\nT: v\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	l := Limits{MaxHeaderBytes: 512, MaxHeaders: 8, MaxBodyBytes: 1 << 12, MaxChunkedBytes: 1 << 11}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(strings.NewReader(string(data)))
		r, err := ReadRequest(br, l)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) && !errors.Is(err, io.EOF) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(r.Values("Host")) != 1 || !isToken(r.Method) || !validTarget(r.Target) {
			t.Fatalf("accepted %+v", r)
		}
		for _, fl := range r.Fields {
			if !isToken(fl.Name) || strings.ContainsAny(fl.Value, "\r\n\x00") || fl.Value != trimOWS(fl.Value) {
				t.Fatalf("accepted field %q", fl)
			}
		}
		if r.Chunked == (len(r.Values("Content-Length")) == 1) && (r.Chunked || r.ContentLength != 0) {
			t.Fatalf("ambiguous framing accepted %+v", r)
		}
		n, err := io.Copy(io.Discard, r.Body(br, l))
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Fatalf("body: untyped error %v", err)
		}
		if n > l.MaxBodyBytes || r.Chunked && n > l.MaxChunkedBytes || !r.Chunked && err == nil && n != r.ContentLength {
			t.Fatalf("body %d bytes for %+v", n, r)
		}
	})
}

// FuzzServe: any bytes a client sends, through a running Server to a
// real upstream: no panic, an answer that is empty or an HTTP/1.1 one,
// at most one request on each upstream connection (one per client
// connection: no keep-alive upstream), and never
// a port auth header other than the upstream's own.
func FuzzServe(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: localhost:PORT\r\nTransfer-Encoding: chunked\r\nX-Aws-Proxy-Auth: forged\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\nxyz",
		"GET / HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nOrigin: null\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	var (
		bad    atomic.Int64
		mu     sync.Mutex
		byConn = map[string]int{}
	)
	u := newUpstream(f, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		byConn[r.RemoteAddr]++
		if byConn[r.RemoteAddr] > 1 {
			bad.Add(1)
		}
		mu.Unlock()
		if v := r.Header.Values("X-Aws-Proxy-Auth"); len(v) != 1 || !strings.HasPrefix(v[0], "port-token-") {
			bad.Add(1)
		}
		_, _ = io.Copy(io.Discard, r.Body)
	})
	s, err := New(u, Options{HeaderTimeout: time.Second, IdleTimeout: time.Second, TunnelIdleTimeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	go func() { _ = s.Serve(context.Background()) }()
	port := []byte(strconv.Itoa(s.Port()))
	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.ReplaceAll(data, []byte("PORT"), port)
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write(data)
		_ = c.(*net.TCPConn).CloseWrite()
		ans, _ := io.ReadAll(c)
		if len(ans) > 0 && !bytes.HasPrefix(ans, []byte("HTTP/1.1 ")) {
			t.Fatalf("answer %q", ans)
		}
		if bad.Load() != 0 {
			t.Fatal("the upstream got two requests on one connection, or a port auth header not its own")
		}
	})
}
