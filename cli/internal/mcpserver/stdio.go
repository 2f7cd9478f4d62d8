package mcpserver

import (
	"context"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// quietPeriod is how long no request may be in flight before the end of
// stdin ends the session: a request read just before the end has reached
// its handler by then.
const quietPeriod = 150 * time.Millisecond

// countInFlight is the receiving middleware that counts the requests
// being handled.
func (s *Server) countInFlight(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		return next(ctx, method, req)
	}
}

// StdioTransport is MCP over r and w (newline-delimited JSON). When r
// ends, the session ends once every request read before has been
// answered (a client that pipes requests and closes its end gets every
// answer); a client that closes stdin to stop the server and then sends
// SIGTERM is not kept waiting by it.
func (s *Server) StdioTransport(r io.Reader, w io.Writer) mcp.Transport {
	return &mcp.IOTransport{Reader: &drainReader{r: r, s: s}, Writer: nopWriteCloser{w}}
}

// drainReader holds back r's end until no request is in flight.
type drainReader struct {
	r io.Reader
	s *Server
}

func (d *drainReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != io.EOF || n > 0 {
		return n, err
	}
	quiet := time.Duration(0)
	const tick = 10 * time.Millisecond
	for quiet < quietPeriod {
		time.Sleep(tick)
		if d.s.inFlight.Load() > 0 {
			quiet = 0
			continue
		}
		quiet += tick
	}
	return 0, io.EOF
}

// Close does not close r (stdin is the process's).
func (d *drainReader) Close() error { return nil }

// nopWriteCloser: stdout is not closed when the session ends.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
