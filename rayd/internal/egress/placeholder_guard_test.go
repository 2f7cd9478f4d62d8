package egress

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPlainPlaceholderKeepAlive: on a transparent plain-HTTP connection,
// a later request (or a body) carrying a placeholder cuts the connection
// before its bytes reach the origin, also when the placeholder is split
// across two writes.
func TestPlainPlaceholderKeepAlive(t *testing.T) {
	for _, tc := range []struct{ name, second string }{
		{"header", "GET /two HTTP/1.1\r\nHost: plain.test\r\nX-Key: " + testPlaceholder + "\r\n\r\n"},
		{"body", "POST /two HTTP/1.1\r\nHost: plain.test\r\nContent-Length: " + strconv.Itoa(len(testPlaceholder)) + "\r\n\r\n" + testPlaceholder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := make(chan string, 10)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				hits <- r.RequestURI + " " + string(b)
				io.WriteString(w, "origin")
			}))
			defer srv.Close()
			e, dst := redirectEnv(t)
			e.route("plain.test", 80, srv.Listener.Addr().String())
			e.p.SetPolicy(allowList{"plain.test:80": true}, nil)
			e.p.SetInterceptor(newFakeInterceptor())
			setDst(dst, "192.0.2.99:80")

			c := e.dial()
			br := bufio.NewReader(c)
			io.WriteString(c, "GET /one HTTP/1.1\r\nHost: plain.test\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("first request: %v %v", resp, err)
			}
			io.Copy(io.Discard, resp.Body)
			<-hits
			// The placeholder split across two writes.
			cut := strings.Index(tc.second, testPlaceholder) + 10
			io.WriteString(c, tc.second[:cut])
			time.Sleep(20 * time.Millisecond)
			io.WriteString(c, tc.second[cut:])
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if resp, err := http.ReadResponse(br, nil); err == nil {
				t.Fatalf("the second request was answered: %d", resp.StatusCode)
			}
			select {
			case h := <-hits:
				if strings.Contains(h, testPlaceholder) {
					t.Fatalf("the origin got the placeholder: %q", h)
				}
			case <-time.After(100 * time.Millisecond):
			}
			if st := e.p.Stats(); st.Refused[ReasonPlaceholder] == 0 {
				t.Errorf("not counted: %+v", st)
			}
		})
	}
}
