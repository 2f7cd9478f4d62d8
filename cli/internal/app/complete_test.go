package app

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
)

// A platform that accepts connections and never answers does not hold a
// shell's Tab: completion gives up quickly, printing nothing, no error.
func TestCompletionGivesUpQuickly(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var (
		mu   sync.Mutex
		held []net.Conn
	)
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read by nobody, answered never
			mu.Unlock()
		}
	}()
	for _, args := range [][]string{
		{"sandbox", "info"},
		{"sandbox", "kill", "microvm-00000000-0000-4000-8000-000000000000"},
		{"sandbox", "git"},
	} {
		var out, errOut bytes.Buffer
		start := time.Now()
		argv := append(append([]string{"rayito", "--endpoint", "http://" + ln.Addr().String()}, args...), "--generate-shell-completion")
		code := Main(context.Background(), argv, cliutil.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: completion took %s", strings.Join(args, " "), took)
		}
		if code != 0 || out.Len() > 0 || errOut.Len() > 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 0 and nothing", strings.Join(args, " "), code, out.String(), errOut.String())
		}
	}
}
