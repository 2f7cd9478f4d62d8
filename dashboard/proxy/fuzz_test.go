package proxy

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
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
