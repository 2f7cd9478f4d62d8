// Package netlimit caps the number of connections a listener hands out at
// once. A connection over the cap is closed at accept, so a flood of idle
// connections cannot exhaust the daemon's descriptors or block accept.
package netlimit

import (
	"io"
	"net"
	"sync"
)

// Listener returns ln limited to max concurrently open connections.
func Listener(ln net.Listener, max int) net.Listener {
	return &listener{Listener: ln, sem: make(chan struct{}, max)}
}

type listener struct {
	net.Listener
	sem chan struct{}
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &conn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			_ = c.Close()
		}
	}
}

type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// ReadFrom lets net/http hand a response body that is a file (a file
// download with a Content-Length) to the connection's own ReadFrom:
// sendfile(2) on a TCP connection instead of reading the file into memory
// and writing it out again.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c.Conn}, r)
}

// writerOnly hides every method but Write (io.Copy would otherwise call
// ReadFrom again).
type writerOnly struct{ io.Writer }
