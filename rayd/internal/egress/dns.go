package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// DNS limits and defaults.
const (
	// MaxUDPMessage bounds a DNS message over UDP, query or answer.
	MaxUDPMessage = 4096
	// MaxTCPMessage bounds a DNS message over TCP (the 2-byte length
	// prefix allows no more).
	MaxTCPMessage = 65535
	// DefaultDNSTimeout bounds one forwarded exchange, and a TCP
	// client's idle time between queries.
	DefaultDNSTimeout = 5 * time.Second
	// DefaultDNSMaxInFlight bounds the queries being forwarded at once
	// (UDP queries beyond it are dropped, the client retries), and the
	// TCP client connections.
	DefaultDNSMaxInFlight = 64
)

// DNSOptions configure a [DNS] forwarder.
type DNSOptions struct {
	// Upstreams are the resolvers queries are forwarded to, tried in
	// order. Default: the nameservers of /etc/resolv.conf, port 53. An
	// upstream equal to the address the forwarder serves on is skipped
	// (it would loop).
	Upstreams []netip.AddrPort
	// Dial opens the connections to the upstreams ("udp" or "tcp").
	// Default: a net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Timeout bounds one exchange with the upstreams. Default
	// DefaultDNSTimeout.
	Timeout time.Duration
	// MaxInFlight bounds concurrency. Default DefaultDNSMaxInFlight.
	MaxInFlight int
	// Logger receives counts only, never names. Default slog.Default().
	Logger *slog.Logger
}

// DNSStats is a snapshot of a [DNS] forwarder's counters.
type DNSStats struct {
	Forwarded uint64 // queries answered by an upstream
	Refused   uint64 // queries answered REFUSED (denied or malformed)
	Failed    uint64 // queries answered SERVFAIL (no upstream answered)
	Dropped   uint64 // datagrams not answered (no header, a response, overload)
}

// DNS forwards the sandbox's DNS queries (port 53, redirected to it)
// for the names the policy allows, and answers the others itself.
//
// A query must parse with dnsmessage, be a standard query (QR clear,
// opcode QUERY) with exactly one question of class IN (any type), no
// answer or authority records, and a name that passes the same strict
// checks as the proxy's (letters, digits, '-', '_', at most 253 bytes).
// If the policy allows the name (NamePolicy.AllowsName when implemented,
// else AllowsHost on port 443 or 80), the query is forwarded unchanged
// to the first upstream that answers, over the same transport; the
// answer is relayed after checking its ID, QR bit and question.
// Otherwise — denied, malformed, or while no policy is set — the answer
// is REFUSED (rcode 5) with the question echoed when it could be parsed,
// and the query never leaves. Datagrams too short for a header, and
// responses, are dropped. If no upstream answers, SERVFAIL.
type DNS struct {
	opts DNSOptions
	log  *slog.Logger
	sem  chan struct{}

	policy atomic.Pointer[policyBox]

	mu      sync.Mutex
	closed  bool
	pcs     map[net.PacketConn]struct{}
	lns     map[net.Listener]struct{}
	tcp     map[net.Conn]struct{}
	tcpConn int
	wg      sync.WaitGroup

	forwarded, refused, failed, dropped atomic.Uint64
}

type policyBox struct{ p HostPolicy }

// NewDNS returns a DNS forwarder that refuses everything until
// SetPolicy.
func NewDNS(opts DNSOptions) *DNS {
	if opts.Upstreams == nil {
		opts.Upstreams = resolvConfServers("/etc/resolv.conf")
	}
	if opts.Dial == nil {
		d := &net.Dialer{}
		opts.Dial = d.DialContext
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultDNSTimeout
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultDNSMaxInFlight
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &DNS{
		opts: opts,
		log:  opts.Logger,
		sem:  make(chan struct{}, opts.MaxInFlight),
		pcs:  map[net.PacketConn]struct{}{},
		lns:  map[net.Listener]struct{}{},
		tcp:  map[net.Conn]struct{}{},
	}
}

// resolvConfServers returns the nameservers of a resolv.conf file, port
// 53.
func resolvConfServers(path string) []netip.AddrPort {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.AddrPort
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) >= 2 && fs[0] == "nameserver" {
			if a, err := netip.ParseAddr(fs[1]); err == nil {
				out = append(out, netip.AddrPortFrom(a.Unmap(), 53))
			}
		}
	}
	return out
}

// SetPolicy replaces the policy (nil: refuse every query).
func (d *DNS) SetPolicy(p HostPolicy) {
	d.policy.Store(&policyBox{p})
}

// Stats returns a snapshot of the counters.
func (d *DNS) Stats() DNSStats {
	return DNSStats{Forwarded: d.forwarded.Load(), Refused: d.refused.Load(), Failed: d.failed.Load(), Dropped: d.dropped.Load()}
}

// Close closes every PacketConn and Listener given to ServeUDP and
// ServeTCP and every TCP client connection, and waits for the queries
// being answered.
func (d *DNS) Close() error {
	d.mu.Lock()
	d.closed = true
	for pc := range d.pcs {
		pc.Close()
	}
	for ln := range d.lns {
		ln.Close()
	}
	for c := range d.tcp {
		c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}

// nameAllowed applies the policy to a DNS name.
func nameAllowed(pol HostPolicy, name string) bool {
	if pol == nil {
		return false
	}
	if np, ok := pol.(NamePolicy); ok {
		return np.AllowsName(name)
	}
	return pol.AllowsHost(name, 443) || pol.AllowsHost(name, 80)
}

// dnsVerdict is the decision on one query.
type dnsVerdict struct {
	forward bool
	q       dnsmessage.Question // valid when forward
	id      uint16
	reply   []byte // the answer to send when !forward; nil = drop
}

// decide parses a query and applies the policy to it.
func decide(pol HostPolicy, msg []byte) dnsVerdict {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return dnsVerdict{}
	}
	v := dnsVerdict{id: h.ID}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		v.reply = refusedReply(h, nil)
		return v
	}
	q := qs[0]
	if h.OpCode != 0 || q.Class != dnsmessage.ClassINET {
		v.reply = refusedReply(h, &q)
		return v
	}
	if err := p.SkipAllAnswers(); err != nil {
		v.reply = refusedReply(h, &q)
		return v
	}
	if err := p.SkipAllAuthorities(); err != nil {
		v.reply = refusedReply(h, &q)
		return v
	}
	if err := p.SkipAllAdditionals(); err != nil {
		v.reply = refusedReply(h, &q)
		return v
	}
	if countRecords(msg, 6) != 0 || countRecords(msg, 8) != 0 {
		v.reply = refusedReply(h, &q)
		return v
	}
	t, err := normalizeHost(q.Name.String())
	if err != nil || !plainWireName(msg) || t.isIP || !nameAllowed(pol, t.host) {
		v.reply = refusedReply(h, &q)
		return v
	}
	v.forward, v.q = true, q
	return v
}

// plainWireName checks the raw name of the first question (at offset
// 12): uncompressed labels of 1-63 letters, digits, '-' or '_'. The
// dnsmessage text form does not show label boundaries, so a label
// holding a '.' would otherwise be checked as two labels.
func plainWireName(msg []byte) bool {
	off := 12
	for off < len(msg) {
		l := int(msg[off])
		off++
		if l == 0 {
			return true
		}
		if l > maxLabelLen || off+l > len(msg) {
			return false
		}
		for _, c := range msg[off : off+l] {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
		off += l
	}
	return false
}

// countRecords reads a 16-bit section count from a message header.
func countRecords(msg []byte, off int) uint16 {
	return binary.BigEndian.Uint16(msg[off : off+2])
}

// dnsReply builds an answer without records: ID, opcode and RD copied
// from the query, RA set, the question echoed when q is not nil.
func dnsReply(h dnsmessage.Header, q *dnsmessage.Question, rcode dnsmessage.RCode) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{
		ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, RCode: rcode,
	})
	if q != nil {
		if err := b.StartQuestions(); err == nil {
			if err := b.Question(*q); err != nil {
				return dnsReply(h, nil, rcode)
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

func refusedReply(h dnsmessage.Header, q *dnsmessage.Question) []byte {
	return dnsReply(h, q, dnsmessage.RCodeRefused)
}

// answer returns the bytes to send back for msg (nil: nothing), and
// counts.
func (d *DNS) answer(ctx context.Context, msg []byte, network string, self net.Addr) []byte {
	var pol HostPolicy
	if b := d.policy.Load(); b != nil {
		pol = b.p
	}
	v := decide(pol, msg)
	if !v.forward {
		if v.reply == nil {
			d.dropped.Add(1)
		} else {
			d.refused.Add(1)
		}
		return v.reply
	}
	resp, err := d.exchange(ctx, msg, v, network, self)
	if err != nil {
		d.failed.Add(1)
		var p dnsmessage.Parser
		h, _ := p.Start(msg)
		return dnsReply(h, &v.q, dnsmessage.RCodeServerFailure)
	}
	d.forwarded.Add(1)
	return resp
}

var errDNSExchange = errors.New("egress: dns exchange failed")

// isSelf reports whether upstream is the address the forwarder serves
// on (a loop).
func isSelf(up netip.AddrPort, self net.Addr) bool {
	var ap netip.AddrPort
	switch a := self.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		return false
	}
	sa := ap.Addr().Unmap()
	if ap.Port() != up.Port() {
		return false
	}
	if sa == up.Addr().Unmap() {
		return true
	}
	// Listening on the wildcard address: any loopback upstream on the
	// same port is this forwarder.
	return sa.IsUnspecified() && up.Addr().Unmap().IsLoopback()
}

// exchange forwards msg to the upstreams in order, each given an equal
// share of the timeout, and returns the first valid answer.
func (d *DNS) exchange(ctx context.Context, msg []byte, v dnsVerdict, network string, self net.Addr) ([]byte, error) {
	var ups []netip.AddrPort
	for _, u := range d.opts.Upstreams {
		if !isSelf(u, self) {
			ups = append(ups, u)
		}
	}
	if len(ups) == 0 {
		return nil, errDNSExchange
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	share := d.opts.Timeout / time.Duration(len(ups))
	for _, u := range ups {
		if ctx.Err() != nil {
			break
		}
		actx, acancel := context.WithTimeout(ctx, share)
		resp, err := d.exchangeOne(actx, u, msg, network)
		acancel()
		if err == nil && validAnswer(resp, v) {
			return resp, nil
		}
	}
	return nil, errDNSExchange
}

// validAnswer checks that resp answers the query: same ID, QR set, and
// the same single question (or none, as some servers send with errors).
func validAnswer(resp []byte, v dnsVerdict) bool {
	var p dnsmessage.Parser
	h, err := p.Start(resp)
	if err != nil || !h.Response || h.ID != v.id {
		return false
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) > 1 {
		return false
	}
	if len(qs) == 1 {
		q := qs[0]
		return q.Type == v.q.Type && q.Class == v.q.Class && strings.EqualFold(q.Name.String(), v.q.Name.String())
	}
	return h.RCode != dnsmessage.RCodeSuccess
}

func (d *DNS) exchangeOne(ctx context.Context, up netip.AddrPort, msg []byte, network string) ([]byte, error) {
	c, err := d.opts.Dial(ctx, network, up.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if network == "udp" {
		if _, err := c.Write(msg); err != nil {
			return nil, err
		}
		buf := make([]byte, MaxUDPMessage+1)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return nil, err
			}
			if n > MaxUDPMessage {
				return nil, errDNSExchange
			}
			var p dnsmessage.Parser
			if h, err := p.Start(buf[:n]); err == nil && h.Response {
				return append([]byte(nil), buf[:n]...), nil
			}
			// Not an answer: keep waiting until the deadline.
		}
	}
	if err := writeTCPMessage(c, msg); err != nil {
		return nil, err
	}
	return readTCPMessage(c)
}

func writeTCPMessage(w io.Writer, msg []byte) error {
	if len(msg) > MaxTCPMessage {
		return errDNSExchange
	}
	b := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(b, uint16(len(msg)))
	copy(b[2:], msg)
	_, err := w.Write(b)
	return err
}

func readTCPMessage(r io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n < 12 {
		return nil, errDNSExchange
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// ServeUDP answers the queries received on pc until it is closed (by
// the caller or Close), then returns nil. Datagrams longer than
// MaxUDPMessage are dropped.
func (d *DNS) ServeUDP(pc net.PacketConn) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		pc.Close()
		return ErrClosed
	}
	d.pcs[pc] = struct{}{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.pcs, pc)
		d.mu.Unlock()
	}()
	self := pc.LocalAddr()
	buf := make([]byte, MaxUDPMessage+1)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || d.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if n > MaxUDPMessage || n < 12 {
			d.dropped.Add(1)
			continue
		}
		select {
		case d.sem <- struct{}{}:
		default:
			d.dropped.Add(1)
			continue
		}
		msg := append([]byte(nil), buf[:n]...)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer func() { <-d.sem }()
			if resp := d.answer(context.Background(), msg, "udp", self); resp != nil {
				pc.WriteTo(resp, from)
			}
		}()
	}
}

func (d *DNS) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// ServeTCP answers length-prefixed queries on the connections accepted
// from ln until it is closed (by the caller or Close), then returns nil.
// Each connection may carry several queries, answered in order; it is
// closed after Timeout without a query, or on a malformed frame.
func (d *DNS) ServeTCP(ln net.Listener) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	d.lns[ln] = struct{}{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.lns, ln)
		d.mu.Unlock()
	}()
	self := ln.Addr()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || d.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		d.mu.Lock()
		if d.closed || d.tcpConn >= d.opts.MaxInFlight {
			d.mu.Unlock()
			c.Close()
			d.dropped.Add(1)
			continue
		}
		d.tcpConn++
		d.tcp[c] = struct{}{}
		d.wg.Add(1)
		d.mu.Unlock()
		go d.serveTCPConn(c, self)
	}
}

func (d *DNS) serveTCPConn(c net.Conn, self net.Addr) {
	defer d.wg.Done()
	defer func() {
		d.mu.Lock()
		d.tcpConn--
		delete(d.tcp, c)
		d.mu.Unlock()
		c.Close()
	}()
	for {
		c.SetReadDeadline(time.Now().Add(d.opts.Timeout))
		msg, err := readTCPMessage(c)
		if err != nil {
			return
		}
		d.sem <- struct{}{}
		resp := d.answer(context.Background(), msg, "tcp", self)
		<-d.sem
		if resp == nil {
			return
		}
		c.SetWriteDeadline(time.Now().Add(d.opts.Timeout))
		if err := writeTCPMessage(c, resp); err != nil {
			return
		}
	}
}
