package netlimit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestListenerCapsConnections(t *testing.T) {
	t.Parallel()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listener(raw, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	first, second := <-accepted, <-accepted
	// The third connection is closed by the server: a read sees EOF.
	_ = clients[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := clients[2].Read(make([]byte, 1)); err == nil {
		t.Fatal("third connection was not closed")
	}
	// Closing one frees a slot.
	first.Close()
	c4, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("slot not released")
	}
	second.Close()
}

// A file copied to an accepted connection goes through the TCP
// connection's own ReadFrom (sendfile) and arrives whole.
func TestConnReadFromFile(t *testing.T) {
	t.Parallel()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listener(raw, 2)
	defer ln.Close()
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		rf, ok := c.(io.ReaderFrom)
		if !ok {
			errc <- errors.New("accepted conn is not an io.ReaderFrom")
			return
		}
		n, err := rf.ReadFrom(io.LimitReader(f, int64(len(want))))
		if err == nil && n != int64(len(want)) {
			err = fmt.Errorf("ReadFrom copied %d bytes", n)
		}
		errc <- err
	}()
	c, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes that differ from the %d sent", len(got), len(want))
	}
}
