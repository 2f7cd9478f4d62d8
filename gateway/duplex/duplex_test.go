package duplex

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// closingUpstream accepts connections and closes each at once, like a
// server over its connection cap.
func closingUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// earlyUpstream answers 401 at once, without reading the request body,
// and keeps the connection open.
func earlyUpstream(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

func proxyTo(addr string) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: "http", Host: addr}) },
		FlushInterval: -1,
		Transport:     &http.Transport{DisableKeepAlives: false, MaxIdleConnsPerHost: 64},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
}

// panicWriter counts the lines net/http's server logs about a recovered
// panic ("http: panic serving ...").
type panicWriter struct {
	mu    sync.Mutex
	count int
}

func (p *panicWriter) Write(b []byte) (int, error) {
	if strings.Contains(string(b), "panic") {
		p.mu.Lock()
		p.count++
		p.mu.Unlock()
	}
	return len(b), nil
}

func (p *panicWriter) n() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// streamingCalls sends n rounds of calls from 50 clients, each call's body
// sent like a Connect stream's (a message, then the end a little later,
// chunked) over kept-alive connections, and returns the statuses seen.
func streamingCalls(t *testing.T, target string, n int) map[int]int {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 100}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		wg       sync.WaitGroup
	)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				pr, pw := io.Pipe()
				go func() {
					_, _ = pw.Write(make([]byte, 40))
					time.Sleep(time.Duration(i%3) * time.Millisecond)
					_ = pw.Close()
				}()
				res, err := client.Post(target, "application/connect+proto", pr)
				code := 0
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					code = res.StatusCode
				}
				mu.Lock()
				statuses[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return statuses
}

// Without Forward, a proxy in full duplex whose upstream fails (or answers)
// while a client is still sending makes net/http panic ("invalid
// concurrent Body.Read call"): in the server's goroutine (recovered and
// logged, the connection lost) or in the transport's (the process dies).
// With it, every request gets its answer and nothing panics.
func TestForwardUpstreamFailsMidBody(t *testing.T) {
	for _, up := range []struct {
		name string
		addr func(*testing.T) string
		want int
	}{
		{"closes", closingUpstream, http.StatusBadGateway},
		{"answers early", earlyUpstream, http.StatusUnauthorized},
	} {
		t.Run(up.name, func(t *testing.T) {
			rp := proxyTo(up.addr(t))
			panics := &panicWriter{}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				Forward(w, r, rp)
			}))
			srv.Config.ErrorLog = log.New(panics, "", 0)
			srv.Start()
			defer srv.Close()
			got := streamingCalls(t, srv.URL, 30)
			if n := panics.n(); n > 0 {
				t.Fatalf("the server logged %d panics", n)
			}
			for code, n := range got {
				if code != up.want {
					t.Fatalf("%d answers with status %d (statuses %v), want all %d", n, code, got, up.want)
				}
			}
		})
	}
}

// A body read after the handler returned fails with ErrDetached instead of
// touching the server's connection.
func TestReadAfterReturn(t *testing.T) {
	var leaked io.Reader
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Forward(w, r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			leaked = r.Body
			w.WriteHeader(http.StatusNoContent)
		}))
	}))
	defer srv.Close()
	res, err := http.Post(srv.URL, "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if _, err := leaked.Read(make([]byte, 8)); !errors.Is(err, ErrDetached) {
		t.Fatalf("read after return: %v, want ErrDetached", err)
	}
}

// A read blocked on a client that sends nothing more is cut when the
// handler returns: the handler does not hang, the read fails.
func TestDetachCutsBlockedRead(t *testing.T) {
	readErr := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Forward(w, r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			go func() {
				buf := make([]byte, 64)
				var err error
				for err == nil {
					_, err = r.Body.Read(buf)
				}
				readErr <- err
			}()
			time.Sleep(50 * time.Millisecond) // the reader is now blocked
			w.WriteHeader(http.StatusAccepted)
		}))
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A chunked body that never ends.
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d", res.StatusCode)
	}
	select {
	case err := <-readErr:
		if err == nil || err == io.EOF {
			t.Fatalf("blocked read ended with %v, want an error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked read was not cut")
	}
}

// Without a body, Forward only calls next.
func TestNoBody(t *testing.T) {
	called := false
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/", nil)
	Forward(httptest.NewRecorder(), req, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	if !called {
		t.Fatal("next not called")
	}
}
