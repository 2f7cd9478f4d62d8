// Package netlimit caps the number of connections a listener hands out at
// once. A connection over the cap is closed at accept, so a flood of idle
// connections cannot exhaust the daemon's descriptors or block accept.
package netlimit

import (
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
