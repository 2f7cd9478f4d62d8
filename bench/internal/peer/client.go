package peer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Client talks to one envd over HTTP/1.1 with keep-alive. It is safe for
// concurrent use.
type Client struct {
	base string
	user string
	hc   *http.Client
}

// NewClient returns a client for envd at base (http://host:port) that
// runs everything as user (envd's processes switch to that account).
func NewClient(base, user string) *Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &Client{base: base, user: user, hc: &http.Client{Transport: tr}}
}

// Close drops idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

func (c *Client) basicAuth() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(c.user+":"))
}

// Health is GET /health; any 2xx is healthy.
func (c *Client) Health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("envd /health: %s", resp.Status)
	}
	return nil
}

// unary calls a unary Connect JSON method and discards the answer body.
func (c *Client) unary(ctx context.Context, method string, in any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/process.Process/"+method, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Authorization", c.basicAuth())
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var e RPCError
		if json.Unmarshal(b, &e) == nil && e.Code != "" {
			return &e
		}
		return fmt.Errorf("envd %s: %s", method, resp.Status)
	}
	return nil
}

// stream is an open server stream of process events.
type stream struct {
	body io.ReadCloser
	r    *bufio.Reader
	buf  []byte
	done bool
}

// start opens a process.Process/Start stream.
func (c *Client) start(ctx context.Context, in *startRequest) (*stream, error) {
	msg, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/process.Process/Start", bytes.NewReader(appendEnvelope(nil, flagMessage, msg)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Authorization", c.basicAuth())
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		var e RPCError
		if json.Unmarshal(b, &e) == nil && e.Code != "" {
			return nil, &e
		}
		return nil, fmt.Errorf("envd Start: %s", resp.Status)
	}
	return &stream{body: resp.Body, r: bufio.NewReaderSize(resp.Body, 256<<10)}, nil
}

// next returns the next event; io.EOF after a clean end-stream envelope,
// the RPCError it carries otherwise.
func (s *stream) next() (*processEvent, error) {
	if s.done {
		return nil, io.EOF
	}
	flags, msg, err := readEnvelope(s.r, s.buf)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("envd: stream ended without an end-stream envelope")
		}
		return nil, err
	}
	if cap(msg) > cap(s.buf) {
		s.buf = msg[:0]
	}
	if flags&flagEndStream != 0 {
		s.done = true
		var end endStream
		if len(msg) > 0 {
			if err := json.Unmarshal(msg, &end); err != nil {
				return nil, fmt.Errorf("envd end-stream: %w", err)
			}
		}
		if end.Error != nil {
			return nil, end.Error
		}
		return nil, io.EOF
	}
	if flags != flagMessage {
		return nil, fmt.Errorf("envd: unexpected envelope flags %#x", flags)
	}
	return decodeEvent(msg)
}

func (s *stream) close() {
	_, _ = io.Copy(io.Discard, io.LimitReader(s.r, 1<<20))
	s.body.Close()
}

// Result is a finished process.
type Result struct {
	Pid         uint32
	End         EndEvent
	StdoutBytes int64
	StderrBytes int64
}

// Run starts cmd with args (no shell, no pty), passes stdout to onStdout
// (may be nil) and reads until the end event and the end-stream envelope.
func (c *Client) Run(ctx context.Context, cmd string, args []string, onStdout func([]byte)) (*Result, error) {
	s, err := c.start(ctx, &startRequest{Process: processConfig{Cmd: cmd, Args: args}})
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &Result{}
	sawStart, sawEnd := false, false
	for {
		ev, err := s.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, err
		}
		switch {
		case ev.Start != nil:
			if sawStart {
				return res, errors.New("envd: second start event")
			}
			sawStart, res.Pid = true, ev.Start.Pid
		case !sawStart:
			return res, errors.New("envd: first event is not start")
		case ev.Data != nil:
			res.StdoutBytes += int64(len(ev.Data.Stdout))
			res.StderrBytes += int64(len(ev.Data.Stderr))
			if onStdout != nil && len(ev.Data.Stdout) > 0 {
				onStdout(ev.Data.Stdout)
			}
		case ev.End != nil:
			sawEnd, res.End = true, *ev.End
		}
	}
	if !sawEnd {
		return res, errors.New("envd: stream ended without an end event")
	}
	if res.End.ExitCode != 0 || res.End.Error != "" {
		return res, fmt.Errorf("envd: %s exited %d (%s %s)", cmd, res.End.ExitCode, res.End.Status, res.End.Error)
	}
	return res, nil
}

// Pty is a process on a terminal started through envd.
type Pty struct {
	c      *Client
	pid    uint32
	s      *stream
	cancel context.CancelFunc
	out    chan []byte
	wg     sync.WaitGroup
	err    error // the reader's final error, valid after out is closed
}

// StartPty starts cmd with args on a cols×rows terminal. Output arrives on
// Output until the process ends.
func (c *Client) StartPty(ctx context.Context, cmd string, args []string, cols, rows uint32) (*Pty, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s, err := c.start(sctx, &startRequest{Process: processConfig{Cmd: cmd, Args: args}, Pty: &ptyConfig{Size: ptySize{Cols: cols, Rows: rows}}})
	if err != nil {
		cancel()
		return nil, err
	}
	ev, err := s.next()
	if err == nil && ev.Start == nil {
		err = errors.New("envd: first event is not start")
	}
	if err != nil {
		cancel()
		s.body.Close()
		return nil, err
	}
	p := &Pty{c: c, pid: ev.Start.Pid, s: s, cancel: cancel, out: make(chan []byte, 1024)}
	p.wg.Add(1)
	go p.read()
	return p, nil
}

func (p *Pty) read() {
	defer p.wg.Done()
	defer close(p.out)
	for {
		ev, err := p.s.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.err = err
			}
			return
		}
		if ev.Data != nil && len(ev.Data.Pty) > 0 {
			p.out <- ev.Data.Pty
		}
	}
}

// Pid is the process id envd reported.
func (p *Pty) Pid() uint32 { return p.pid }

// Output delivers the terminal's output in order; it is closed when the
// stream ends.
func (p *Pty) Output() <-chan []byte { return p.out }

// SendInput writes data to the terminal (SendInput with input.pty).
func (p *Pty) SendInput(ctx context.Context, data []byte) error {
	return p.c.unary(ctx, "SendInput", &sendInputRequest{Process: processSelector{Pid: p.pid}, Input: processInput{Pty: data}})
}

// Kill sends SIGKILL through envd, then closes the stream. It returns the
// signal's error, if any.
func (p *Pty) Kill(ctx context.Context) error {
	err := p.c.unary(ctx, "SendSignal", &sendSignalRequest{Process: processSelector{Pid: p.pid}, Signal: "SIGNAL_SIGKILL"})
	done := make(chan struct{})
	go func() {
		for range p.out {
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	p.cancel()
	p.s.body.Close()
	p.wg.Wait()
	return err
}

func (c *Client) filesURL(path string) string {
	q := url.Values{"path": {path}, "username": {c.user}}
	return c.base + "/files?" + q.Encode()
}

// Upload writes data to path with POST /files as multipart/form-data: one
// part named "file" whose filename is the full path. The body is streamed
// with a known length.
func (c *Client) Upload(ctx context.Context, path string, data []byte) error {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("file", path); err != nil {
		return err
	}
	prefix := append([]byte(nil), head.Bytes()...)
	head.Reset()
	if err := mw.Close(); err != nil {
		return err
	}
	suffix := head.Bytes()
	body := io.MultiReader(bytes.NewReader(prefix), bytes.NewReader(data), bytes.NewReader(suffix))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.filesURL(path), body)
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(prefix) + len(data) + len(suffix))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("envd POST /files: %s", resp.Status)
	}
	var entries []struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(b, &entries); err != nil || len(entries) == 0 {
		return fmt.Errorf("envd POST /files: unexpected answer (%d bytes)", len(b))
	}
	return nil
}

// Download reads path with GET /files into w and returns the byte count.
func (c *Client) Download(ctx context.Context, path string, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.filesURL(path), nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return 0, fmt.Errorf("envd GET /files: %s", resp.Status)
	}
	return io.CopyBuffer(w, resp.Body, make([]byte, 256<<10))
}
