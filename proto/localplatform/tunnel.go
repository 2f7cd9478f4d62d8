package localplatform

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// TunnelProtocol is the Upgrade token of the endpoint proxy's tunnels: a
// client sends one HTTP/1.1 GET with "Connection: Upgrade", "Upgrade:
// rayito-tunnel/1", the endpoint in Host and the usual x-aws-proxy-auth and
// x-aws-proxy-port headers. The proxy authorizes it as it authorizes any
// request (one token for this microVM and port; never the hooks port),
// answers 101 Switching Protocols with the same Upgrade token, and from
// then on the connection carries bytes between the client and that guest
// port, unparsed. The client speaks HTTP/1.1 to rayd inside it, without
// the x-aws-proxy-* headers (the proxy no longer strips anything). The
// proxy closes a tunnel whose token has expired once it is quiet. The AWS
// endpoints have no tunnels.
const TunnelProtocol = "rayito-tunnel/1"

// TunnelError is a refused tunnel: the proxy's status and message.
type TunnelError struct {
	Status  int    // e.g. 403 (token), 404 (endpoint), 502 (microVM or guest port)
	Message string // the proxy's {"message"}, if any
}

func (e *TunnelError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("tunnel refused: %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("tunnel refused: %d %s", e.Status, e.Message)
}

// maxTunnelAnswer bounds the refusal body OpenTunnel reads.
const maxTunnelAnswer = 4 << 10

// OpenTunnel asks the proxy at the other end of conn for a tunnel to port
// of the microVM at endpoint, with token, and returns the connection that
// carries the tunnel's bytes once the proxy has answered 101. A refusal is
// a *TunnelError; conn is closed on any error. ctx bounds the handshake.
func OpenTunnel(ctx context.Context, conn net.Conn, endpoint, token string, port int) (net.Conn, error) {
	fail := func(err error) (net.Conn, error) {
		conn.Close()
		return nil, err
	}
	if strings.ContainsAny(endpoint+token, "\r\n\x00 ") || endpoint == "" || token == "" {
		return fail(errors.New("tunnel: invalid endpoint or token"))
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := "GET / HTTP/1.1\r\nHost: " + endpoint + "\r\nConnection: Upgrade\r\nUpgrade: " + TunnelProtocol +
		"\r\nX-Aws-Proxy-Auth: " + token + "\r\nX-Aws-Proxy-Port: " + strconv.Itoa(port) + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return fail(tunnelCtxErr(ctx, err))
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		return fail(tunnelCtxErr(ctx, err))
	}
	if res.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(res.Header.Get("Upgrade"), TunnelProtocol) {
		te := &TunnelError{Status: res.StatusCode}
		if res.StatusCode == http.StatusSwitchingProtocols {
			te.Message = "unexpected upgrade"
		}
		var body struct {
			Message string `json:"message"`
		}
		if b, err := io.ReadAll(io.LimitReader(res.Body, maxTunnelAnswer)); err == nil && json.Unmarshal(b, &body) == nil {
			te.Message = body.Message
		}
		return fail(te)
	}
	if !stop() {
		return fail(ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// tunnelCtxErr prefers ctx's error when ctx ended the handshake.
func tunnelCtxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// The connection's deadline (ctx's) can fire a moment before ctx's
	// own timer does.
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return fmt.Errorf("tunnel: %w", err)
}

// bufferedConn is a conn whose first bytes were read ahead with the 101.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.r.Buffered() > 0 {
		return c.r.Read(p)
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the underlying connection when it can.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
