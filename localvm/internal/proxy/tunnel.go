package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/activity"
	"github.com/rayito-dev/rayito/proto/localplatform"
)

// A tunnel is the local platform's connection-level data plane. The client
// sends one upgrade request (Upgrade: localplatform.TunnelProtocol), which
// ServeHTTP authorizes exactly as it authorizes any request: the endpoint,
// one token for the microVM and this port, never the hooks port. Then the
// proxy dials the guest port, answers 101 and copies bytes both ways for
// the life of the connection: the client's requests reach rayd with no
// per-request parsing, header rewriting or hand-off in between.
//
// What the guest sees is what the client sends inside the tunnel: the
// proxy adds nothing and strips nothing there, and it never sees a token
// again (the SDK sends its token only on the upgrade request).
//
// The connection's bytes count for the idle policy as they pass; a tunnel
// is not a request in flight (the SDK keeps idle tunnels in its pool).
// Bytes from the client for a microVM that is suspended and auto-resumes
// wake it first, as a request would. Once the token has expired the tunnel
// is closed as soon as it has been quiet for tunnelQuiet (a stream that
// flows past the expiry is not cut, as a request's would not be).

// tunnelQuiet is how long an expired tunnel must have been quiet before it
// is closed.
const tunnelQuiet = time.Second

// tunnelDialTimeout bounds the dial of the guest port.
const tunnelDialTimeout = 10 * time.Second

// tunnelWakeTimeout bounds the resume a tunnel's bytes wait for.
const tunnelWakeTimeout = time.Minute

// isTunnel reports whether r asks for a tunnel.
func isTunnel(r *http.Request) bool {
	return headerHas(r.Header, "Upgrade", localplatform.TunnelProtocol)
}

// headerHas reports whether one of the comma-separated tokens of header
// name is token, case-insensitively.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), token) {
				return true
			}
		}
	}
	return false
}

// tunnelRequestOK reports whether an authorized tunnel request is well
// formed: HTTP/1.1 GET with Connection: Upgrade and no body.
func tunnelRequestOK(r *http.Request) bool {
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 || r.Method != http.MethodGet {
		return false
	}
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		return false
	}
	return headerHas(r.Header, "Connection", "upgrade")
}

// tunnel dials addr, takes over the client's connection and copies bytes
// between the two until either side is done. It answers 502 itself when
// the guest cannot be dialed; once the connection is taken over, failures
// close it.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, rt *route, target Target, addr string, expiry time.Time) {
	if p.tunnels.isClosed() {
		rt.status = http.StatusBadGateway
		writeError(w, http.StatusBadGateway, "Bad gateway")
		return
	}
	dctx, cancel := context.WithTimeout(r.Context(), tunnelDialTimeout)
	guest, err := p.dial(dctx, "tcp", addr)
	cancel()
	if err != nil {
		rt.status, rt.err = http.StatusBadGateway, err.Error()
		writeError(w, http.StatusBadGateway, "Bad gateway")
		return
	}
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		guest.Close()
		rt.status, rt.err = http.StatusInternalServerError, "hijack: "+err.Error()
		writeError(w, http.StatusInternalServerError, "Internal error")
		return
	}
	t := &tunnelConn{client: client, guest: guest, target: target, meter: target.Activity(), bufs: p.tunBufs, set: &p.tunnels}
	if !p.tunnels.add(t) {
		// The proxy closed between the dial and now.
		t.close()
		return
	}
	rt.status = http.StatusSwitchingProtocols
	// The server's read and write deadlines stay on a connection taken
	// over: the tunnel has none but a bound on the 101's write, which goes
	// out before any byte of the guest can.
	_ = client.SetDeadline(time.Time{})
	_ = client.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(client, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+localplatform.TunnelProtocol+"\r\n\r\n"); err != nil {
		t.close()
		return
	}
	_ = client.SetWriteDeadline(time.Time{})
	// Bytes the client sent after its upgrade request are already in brw.
	var from io.Reader = client
	if n := brw.Reader.Buffered(); n > 0 {
		from = io.MultiReader(io.LimitReader(brw.Reader, int64(n)), client)
	}
	go t.run(from, expiry)
}

// tunnelConn is one open tunnel.
type tunnelConn struct {
	client, guest net.Conn
	target        Target
	meter         *activity.Meter
	bufs          *copyBuffers
	set           *tunnelSet
	last          atomic.Int64 // when bytes last passed, in UnixNano
	closeOnce     sync.Once
}

// run copies both ways until both directions are done, and closes the tunnel
// once its token has expired and it is quiet.
func (t *tunnelConn) run(fromClient io.Reader, expiry time.Time) {
	t.last.Store(time.Now().UnixNano())
	stop := t.expireAt(expiry)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		t.copy(t.guest, fromClient, true)
	}()
	go func() {
		defer wg.Done()
		t.copy(t.client, t.guest, false)
	}()
	wg.Wait()
	t.close()
}

// copy copies src to dst, counting bytes; toGuest wakes a microVM that
// auto-resumes before its bytes go on. At src's end it half-closes dst so
// the other direction can finish; on an error it closes both.
func (t *tunnelConn) copy(dst net.Conn, src io.Reader, toGuest bool) {
	buf := t.bufs.Get()
	defer t.bufs.Put(buf)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			t.last.Store(time.Now().UnixNano())
			if toGuest && !t.target.Running() {
				if err := t.wake(); err != nil {
					t.close()
					return
				}
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				t.close()
				return
			}
			if toGuest {
				t.meter.In(n)
			} else {
				t.meter.Out(n)
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				t.close()
				return
			}
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
				return
			}
			t.close()
			return
		}
	}
}

// wake resumes a microVM that auto-resumes (Target.Wake), bounded by
// tunnelWakeTimeout; an error means it is not running and will not be.
func (t *tunnelConn) wake() error {
	ctx, cancel := context.WithTimeout(context.Background(), tunnelWakeTimeout)
	defer cancel()
	return t.target.Wake(ctx)
}

// expireAt closes the tunnel once expiry has passed and no byte has passed
// for tunnelQuiet. The returned func stops the timer.
func (t *tunnelConn) expireAt(expiry time.Time) func() {
	if expiry.IsZero() {
		return func() {}
	}
	var (
		mu    sync.Mutex
		timer *time.Timer
		done  bool
	)
	var check func()
	check = func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		quiet := time.Since(time.Unix(0, t.last.Load()))
		if quiet >= tunnelQuiet {
			done = true
			go t.close()
			return
		}
		timer = time.AfterFunc(tunnelQuiet-quiet, check)
	}
	mu.Lock()
	timer = time.AfterFunc(time.Until(expiry), check)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
		timer.Stop()
	}
}

// close closes both connections (once).
func (t *tunnelConn) close() {
	t.closeOnce.Do(func() {
		t.client.Close()
		t.guest.Close()
		t.set.remove(t)
	})
}

// tunnelSet is the proxy's open tunnels.
type tunnelSet struct {
	mu     sync.Mutex
	open   map[*tunnelConn]struct{}
	closed bool
}

// add records t; false once the set is closed.
func (s *tunnelSet) add(t *tunnelConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.open == nil {
		s.open = map[*tunnelConn]struct{}{}
	}
	s.open[t] = struct{}{}
	return true
}

func (s *tunnelSet) remove(t *tunnelConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, t)
}

// closeAll closes every open tunnel and refuses new ones.
func (s *tunnelSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	open := make([]*tunnelConn, 0, len(s.open))
	for t := range s.open {
		open = append(open, t)
	}
	s.mu.Unlock()
	for _, t := range open {
		t.close()
	}
}

// isClosed reports whether closeAll has run.
func (s *tunnelSet) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// count is the number of open tunnels.
func (s *tunnelSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}
