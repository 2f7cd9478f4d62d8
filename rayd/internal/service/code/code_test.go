package code_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/daemon"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// cell is a collected execution stream.
type cell struct {
	id       string
	count    uint32
	stdout   string
	stderr   string
	results  []*raydv1.ExecutionResult
	err      *raydv1.ExecutionError
	timeout  *raydv1.ExecutionTimeout
	streamEr *raydv1.StreamError
	end      *raydv1.ExecutionEnd
	seqs     []uint64
	kinds    []string
}

func (c *cell) main() *raydv1.ExecutionResult {
	for _, r := range c.results {
		if r.GetIsMainResult() {
			return r
		}
	}
	return nil
}

// collectCell reads an execution stream to its end and checks its shape.
func collectCell(t *testing.T, s *connect.ServerStreamForClient[raydv1.ExecuteEvent]) *cell {
	t.Helper()
	defer s.Close()
	c := &cell{}
	for s.Receive() {
		c.add(t, s.Msg())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v (events %v)", err, c.kinds)
	}
	c.check(t)
	return c
}

func (c *cell) add(t *testing.T, ev *raydv1.ExecuteEvent) {
	t.Helper()
	if ev.GetKeepalive() != nil {
		return
	}
	if n := len(c.seqs); n > 0 && ev.GetSeq() != c.seqs[n-1]+1 {
		t.Fatalf("seq went from %d to %d", c.seqs[n-1], ev.GetSeq())
	}
	c.seqs = append(c.seqs, ev.GetSeq())
	switch e := ev.Event.(type) {
	case *raydv1.ExecuteEvent_Started:
		c.id, c.count = e.Started.GetExecutionId(), e.Started.GetExecutionCount()
		c.kinds = append(c.kinds, "started")
	case *raydv1.ExecuteEvent_Stdout:
		if e.Stdout.GetTimestampUnixNs() == 0 {
			t.Error("stdout without timestamp")
		}
		c.stdout += e.Stdout.GetText()
		c.kinds = append(c.kinds, "stdout")
	case *raydv1.ExecuteEvent_Stderr:
		c.stderr += e.Stderr.GetText()
		c.kinds = append(c.kinds, "stderr")
	case *raydv1.ExecuteEvent_Result:
		c.results = append(c.results, e.Result)
		c.kinds = append(c.kinds, "result")
	case *raydv1.ExecuteEvent_Error:
		c.err = e.Error
		c.kinds = append(c.kinds, "error")
	case *raydv1.ExecuteEvent_Timeout:
		c.timeout = e.Timeout
		c.kinds = append(c.kinds, "timeout")
	case *raydv1.ExecuteEvent_StreamError:
		c.streamEr = e.StreamError
		c.kinds = append(c.kinds, "stream_error")
	case *raydv1.ExecuteEvent_End:
		c.end = e.End
		c.kinds = append(c.kinds, "end")
	}
}

func (c *cell) check(t *testing.T) {
	t.Helper()
	if len(c.kinds) == 0 || c.kinds[0] != "started" {
		t.Fatalf("first event is not started: %v", c.kinds)
	}
	last := c.kinds[len(c.kinds)-1]
	if last != "end" && last != "stream_error" {
		t.Fatalf("last event is %s: %v", last, c.kinds)
	}
	for i, k := range c.kinds {
		if k == "error" && c.kinds[i+1] != "end" {
			t.Fatalf("error not followed by end: %v", c.kinds)
		}
	}
}

// exec runs code in the context (nil: the default Python context).
func execCell(h *daemontest.Harness, ctxID *string, src string, timeoutMs uint64) *cell {
	h.T().Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := h.Code().Execute(ctx, connect.NewRequest(&raydv1.ExecuteRequest{ContextId: ctxID, Code: src, TimeoutMs: timeoutMs}))
	if err != nil {
		h.T().Fatal(err)
	}
	return collectCell(h.T(), s)
}

func TestCodeBasics(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	start := time.Now()
	c := execCell(h, nil, "1+1", 0)
	t.Logf("first cell (lazy start) took %v", time.Since(start))
	if r := c.main(); r == nil || r.GetText() != "2" {
		t.Fatalf("1+1: results %v, events %v", c.results, c.kinds)
	}
	if c.count == 0 {
		t.Error("execution_count is 0")
	}
	start = time.Now()
	execCell(h, nil, "x = 21", 0)
	t.Logf("warm cell took %v", time.Since(start))
	c = execCell(h, nil, "print('hi'); x*2", 0)
	if c.stdout != "hi\n" || c.main().GetText() != "42" {
		t.Fatalf("print plus result: stdout %q results %v", c.stdout, c.results)
	}
	c = execCell(h, nil, "def f():\n    raise ValueError('boom')\nf()", 0)
	if c.err == nil || c.err.GetName() != "ValueError" || c.err.GetValue() != "boom" || !strings.Contains(c.err.GetTraceback(), "raise ValueError") {
		t.Fatalf("error: %v (events %v)", c.err, c.kinds)
	}
	if strings.Contains(c.err.GetTraceback(), "\x1b[") {
		t.Error("traceback keeps ANSI escapes")
	}
	if !h.Health().GetKernelReady() {
		t.Error("kernel_ready is false with a running default kernel")
	}
}

// TestCodeEagerKernel: with -kernel-start eager the default kernel starts
// right after /run and kernel_ready turns true once it answered; the
// first cell then finds it warm. It logs the numbers behind the choice.
func TestCodeEagerKernel(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.NewWith(t, func(c *daemon.Config) { c.EagerKernel = true })
	if h.Health().GetKernelReady() {
		t.Fatal("kernel_ready before /run")
	}
	start := time.Now()
	h.Run(nil)
	for !h.Health().GetKernelReady() {
		if time.Since(start) > 60*time.Second {
			t.Fatal("kernel_ready never turned true")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ready := time.Since(start)
	cellStart := time.Now()
	c := execCell(h, nil, "1+1", 0)
	if c.main().GetText() != "2" {
		t.Fatalf("1+1: %v", c.kinds)
	}
	t.Logf("eager: /run -> kernel_ready %v; first cell then %v", ready, time.Since(cellStart))
}

// TestCodeLazyKernelReady: lazily, kernel_ready is true after /run (the
// kernel starts on first use) and the first cell pays the start.
func TestCodeLazyKernelReady(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	if h.Health().GetKernelReady() {
		t.Fatal("kernel_ready before /run")
	}
	h.Run(nil)
	if !h.Health().GetKernelReady() {
		t.Fatal("lazy kernel_ready false after /run")
	}
	start := time.Now()
	execCell(h, nil, "1+1", 0)
	t.Logf("lazy: first cell after /run %v", time.Since(start))
}

// TestCodeSpeed logs a warm cell's round trip and the streaming rate of
// 3 MB of prints from one cell (numbers for bench's runcode suite).
func TestCodeSpeed(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.New(t)
	h.Run(nil)
	execCell(h, nil, "1", 0)
	var ds []time.Duration
	for range 30 {
		start := time.Now()
		if c := execCell(h, nil, "1+1", 0); c.main().GetText() != "2" {
			t.Fatal(c.kinds)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	start := time.Now()
	c := execCell(h, nil, "import sys\nline = 'x' * 999 + '\\n'\nfor _ in range(3000):\n    sys.stdout.write(line)\n", 0)
	el := time.Since(start)
	if len(c.stdout) != 3000*1000 {
		t.Fatalf("got %d bytes of stdout", len(c.stdout))
	}
	t.Logf("warm 1+1: p50 %v, min %v; 3 MB of prints in %v (%.0f MB/s, %d events)", ds[len(ds)/2], ds[0], el, 3/el.Seconds(), len(c.kinds))
}
