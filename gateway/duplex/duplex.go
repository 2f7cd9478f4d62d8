// Package duplex lets an HTTP reverse proxy stream a request body to its
// upstream while the response streams back, without ever reading that body
// after the handler has returned.
//
// A reverse proxy (httputil.ReverseProxy over an http.Transport) hands the
// incoming request's body to the transport, which reads it from a
// goroutine of its own, and may go on reading it after RoundTrip has
// returned: when the upstream failed (a refused or cut connection) or
// answered before taking the whole body. Once the handler has returned,
// net/http's HTTP/1.1 server reads the same connection again, and a second
// reader makes it panic ("invalid concurrent Body.Read call") in the
// transport's goroutine, where no handler's recover can catch it: the
// whole process dies. A transport that gives up on a body before its end
// leads to the same panic in the server's own goroutine
// (golang/go#68560): it is recovered there, but the connection is lost.
// [Forward] wraps the body so that neither can happen: when the handler
// returns, a read still in progress is cut (the request's read deadline
// is set to now) and waited for, the body is closed in the handler's
// goroutine, and every later read or close of the body by the transport
// does nothing but fail.
//
// It also enables full duplex on HTTP/1.1 (see
// http.ResponseController.EnableFullDuplex): an upstream that answers at
// once (a streaming call) or before reading the whole body (a 401 to an
// upload) gets its answer through while the client is still sending.
package duplex

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// ErrDetached is what a read of a forwarded body returns once the handler
// that forwarded it has returned.
var ErrDetached = errors.New("duplex: request body read after its handler returned")

// errPanicked is what a read returns when the server's body panicked.
var errPanicked = errors.New("duplex: request body read failed")

// cutWait bounds the wait for a read in progress when the request's read
// deadline cannot be set (a server without deadlines): the read is then
// abandoned, and every later one fails.
const cutWait = 5 * time.Second

// Forward serves r with next (a reverse proxy) in full duplex, through a
// body that is never read after Forward returns. Call it from the handler
// that received r, and let next do all the forwarding before it returns.
func Forward(w http.ResponseWriter, r *http.Request, next http.Handler) {
	rc := http.NewResponseController(w)
	if r.ProtoMajor == 1 {
		_ = rc.EnableFullDuplex()
	}
	if r.Body == nil || r.Body == http.NoBody {
		next.ServeHTTP(w, r)
		return
	}
	b := newBody(r.Body)
	defer b.detach(func() error { return rc.SetReadDeadline(time.Now()) })
	r2 := *r // shallow copy: only the body differs
	r2.Body = b
	next.ServeHTTP(w, &r2)
}

// body is a request body shared between the handler's goroutine and the
// transport's.
type body struct {
	src  io.ReadCloser
	mu   sync.Mutex
	cond *sync.Cond
	// reading: a Read of src is in progress (mu is not held during it).
	reading bool
	// done: Close was called or the handler returned; src is not read
	// again.
	done bool
}

func newBody(src io.ReadCloser) *body {
	b := &body{src: src}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// Read reads src unless the body is done. A panic of src's Read (which
// net/http raises on a misuse) becomes an error: it happens in a goroutine
// nobody else recovers.
func (b *body) Read(p []byte) (n int, err error) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return 0, ErrDetached
	}
	b.reading = true
	b.mu.Unlock()
	defer func() {
		if v := recover(); v != nil {
			n, err = 0, errPanicked
		}
		b.mu.Lock()
		b.reading = false
		b.cond.Broadcast()
		b.mu.Unlock()
	}()
	return b.src.Read(p)
}

// Close marks the body done. It leaves src alone: detach closes it in the
// handler's goroutine.
func (b *body) Close() error {
	b.mu.Lock()
	b.done = true
	b.mu.Unlock()
	return nil
}

// detach marks the body done and waits until no read of src is in
// progress, calling cut first to end one that is; then it closes src
// itself, in the handler's goroutine.
//
// That close matters: on HTTP/1.1 in full duplex, closing a body that was
// not read to its end reads the rest, and reaching the end makes the
// server start its background read of the connection. Done here, before
// the handler returns, the server stops that read before it reads the
// next request; done by the server itself after the handler (what happens
// when a transport gave up on the body before its end), the background
// read and the next request's read collide and net/http panics
// (golang/go#68560).
func (b *body) detach(cut func() error) {
	defer b.src.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = true
	if !b.reading {
		return
	}
	if err := cut(); err != nil {
		// No deadline to end the read: wait a while, then leave it.
		t := time.AfterFunc(cutWait, func() {
			b.mu.Lock()
			b.reading = false // give up waiting; done stays set
			b.cond.Broadcast()
			b.mu.Unlock()
		})
		defer t.Stop()
	}
	for b.reading {
		b.cond.Wait()
	}
}
