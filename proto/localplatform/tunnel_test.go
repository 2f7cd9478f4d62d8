package localplatform

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fakeProxy answers one tunnel request on a pipe with answer, after
// checking the request, then writes extra.
func fakeProxy(t *testing.T, answer, extra string) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		req, err := http.ReadRequest(bufio.NewReader(server))
		if err != nil {
			return
		}
		if req.Method != "GET" || req.Host != "vm.example" || req.Header.Get("Upgrade") != TunnelProtocol ||
			req.Header.Get("Connection") != "Upgrade" || req.Header.Get("X-Aws-Proxy-Auth") != "tok" || req.Header.Get("X-Aws-Proxy-Port") != "8080" {
			io.WriteString(server, "HTTP/1.1 418 Teapot\r\nContent-Length: 0\r\n\r\n")
			return
		}
		io.WriteString(server, answer+extra)
		io.Copy(io.Discard, server)
	}()
	return client
}

func TestOpenTunnel(t *testing.T) {
	ctx := context.Background()
	conn, err := OpenTunnel(ctx, fakeProxy(t, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: rayito-tunnel/1\r\n\r\n", "greeting"), "vm.example", "tok", 8080)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := make([]byte, 8)
	if _, err := io.ReadFull(conn, b); err != nil || string(b) != "greeting" {
		t.Fatalf("bytes after the 101: %q, %v", b, err)
	}

	_, err = OpenTunnel(ctx, fakeProxy(t, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: 23\r\n\r\n{\"message\":\"Forbidden\"}", ""), "vm.example", "tok", 8080)
	var te *TunnelError
	if !errors.As(err, &te) || te.Status != 403 || te.Message != "Forbidden" || !strings.Contains(err.Error(), "403") {
		t.Fatalf("refusal: %v", err)
	}
	_, err = OpenTunnel(ctx, fakeProxy(t, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", ""), "vm.example", "tok", 8080)
	if !errors.As(err, &te) || te.Status != 101 {
		t.Fatalf("wrong upgrade: %v", err)
	}
	for _, bad := range [][2]string{{"vm.example\r\nX-Evil: 1", "tok"}, {"vm.example", "tok\r\n"}, {"", "tok"}, {"vm.example", ""}, {"vm example", "tok"}} {
		c1, c2 := net.Pipe()
		c2.Close()
		if _, err := OpenTunnel(ctx, c1, bad[0], bad[1], 8080); err == nil || errors.As(err, &te) {
			t.Errorf("OpenTunnel(%q, %q) = %v, want an input error", bad[0], bad[1], err)
		}
	}
}

// TestOpenTunnelContext: a proxy that never answers is cut by ctx.
func TestOpenTunnelContext(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	go io.Copy(io.Discard, server)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := OpenTunnel(ctx, client, "vm.example", "tok", 8080); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	client, server2 := net.Pipe()
	defer server2.Close()
	go io.Copy(io.Discard, server2)
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := OpenTunnel(ctx, client, "vm.example", "tok", 8080); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
}
