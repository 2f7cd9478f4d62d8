package telemetry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/metrics"
)

// Error classes of Status.LastErrorClass (a closed set).
const (
	ClassNetwork       = "network"        // the collector could not be reached
	ClassTimeout       = "timeout"        // no answer within 10 s
	ClassRejected      = "rejected"       // a 4xx other than 401/403: the batch is dropped
	ClassUnauthorized  = "unauthorized"   // 401 or 403: the batch is dropped
	ClassServerError   = "server_error"   // a 5xx or 429: retried
	ClassNoCredentials = "no_credentials" // the execution role's credentials could not be had
	ClassQueueFull     = "queue_full"     // the queue was full: the oldest batch was dropped
	ClassSample        = "sample"         // the sandbox could not be measured
)

// Defaults of Options.
const (
	DefaultQueue       = 64
	DefaultBackoff     = time.Second
	DefaultMaxAttempts = 5
	// RequestTimeout bounds one POST.
	RequestTimeout = 10 * time.Second
)

// Signer signs a request with the execution role's credentials (SigV4).
// Its errors mean the credentials could not be had.
type Signer interface {
	Sign(ctx context.Context, req *http.Request, body []byte) error
}

// Options configure an Exporter.
type Options struct {
	// Sample measures the sandbox (metrics.Sampler.Current).
	Sample func(context.Context) (metrics.Sample, error)
	// SandboxID is the sandbox's id ("" before /run).
	SandboxID func() string
	// Client posts the batches; nil: a client of its own.
	Client *http.Client
	// Signer serves AuthExecutionRole; nil: that auth is unsupported.
	Signer Signer
	// Queue bounds the batches waiting (DefaultQueue); Backoff is the
	// first retry's wait (doubled each time, jittered, at most the
	// interval); MaxAttempts bounds the posts of one batch.
	Queue       int
	Backoff     time.Duration
	MaxAttempts int
	Logger      *slog.Logger
}

// Status is the exporter's state: counts and a class, never the endpoint,
// the token or a payload.
type Status struct {
	Exported       uint64
	Dropped        uint64
	LastErrorClass string
}

// ErrExecutionRole: the execution role is not available in this rayd.
var ErrExecutionRole = errors.New("telemetry: the execution role cannot sign exports here")

// Exporter sends the sandbox's gauges to the configured collector. Its
// methods are safe for concurrent use.
type Exporter struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	cfg      *Config // nil: off
	gen      uint64  // bumped by each Configure: the loop restarts its timer
	queue    []batch
	nextID   uint64
	status   Status
	running  bool
	stopped  bool
	wake     chan struct{}
	flushReq chan flushReq
	quit     chan struct{}
	done     chan struct{}
}

type batch struct {
	id       uint64
	body     []byte
	attempts int
}

type flushReq struct {
	ctx  context.Context //nolint:containedctx // carried to the loop for one flush
	done chan struct{}
}

// New returns an idle exporter: Configure starts it.
func New(opts Options) *Exporter {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: RequestTimeout}
	}
	if opts.SandboxID == nil {
		opts.SandboxID = func() string { return "" }
	}
	return &Exporter{opts: opts, log: opts.Logger, wake: make(chan struct{}, 1), flushReq: make(chan flushReq),
		quit: make(chan struct{}), done: make(chan struct{})}
}

// Configure replaces the configuration (nil turns the export off; queued
// batches then go). AuthExecutionRole without a Signer is ErrExecutionRole
// and changes nothing.
func (e *Exporter) Configure(c *Config) error {
	if c != nil && c.Auth == AuthExecutionRole && e.opts.Signer == nil {
		return ErrExecutionRole
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	if c != nil {
		cc := *c
		c = &cc
	} else {
		e.queue = nil
	}
	e.cfg = c
	e.gen++
	if c != nil && !e.running {
		e.running = true
		go e.loop()
	}
	select {
	case e.wake <- struct{}{}:
	default:
	}
	if c == nil {
		e.log.Info("telemetry export off")
	} else {
		e.log.Info("telemetry export configured", "interval_s", int(c.Interval/time.Second), "auth", authName(c.Auth))
	}
	return nil
}

// Supported reports whether auth can be served.
func (e *Exporter) Supported(auth AuthKind) bool {
	return auth != AuthExecutionRole || e.opts.Signer != nil
}

// Status returns the counters.
func (e *Exporter) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status
}

// Flush takes a fresh sample and sends every queued batch, ignoring the
// backoff, until ctx ends (at /suspend: 2 s). It returns at once when the
// export is off.
func (e *Exporter) Flush(ctx context.Context) {
	e.mu.Lock()
	on := e.running && e.cfg != nil && !e.stopped
	e.mu.Unlock()
	if !on {
		return
	}
	r := flushReq{ctx: ctx, done: make(chan struct{})}
	select {
	case e.flushReq <- r:
	case <-ctx.Done():
		return
	case <-e.done:
		return
	}
	select {
	case <-r.done:
	case <-e.done:
	}
}

// Stop ends the exporter (at /terminate and when rayd stops): what is
// queued is dropped uncounted.
func (e *Exporter) Stop() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	running := e.running
	close(e.quit)
	e.mu.Unlock()
	if running {
		<-e.done
	}
}

// loop samples every jittered interval and sends the queue, retrying with
// backoff.
func (e *Exporter) loop() {
	defer close(e.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	sampleT := time.NewTimer(time.Hour)
	retryT := time.NewTimer(time.Hour)
	sampleT.Stop()
	retryT.Stop()
	defer sampleT.Stop()
	defer retryT.Stop()
	var gen uint64
	retrying := false
	for {
		e.mu.Lock()
		cfg, g := e.cfg, e.gen
		e.mu.Unlock()
		if g != gen {
			gen = g
			if cfg != nil {
				sampleT.Reset(jitter(cfg.Interval))
			} else {
				sampleT.Stop()
			}
		}
		select {
		case <-e.quit:
			return
		case <-e.wake:
		case <-sampleT.C:
			if cfg == nil {
				continue
			}
			e.sampleInto(ctx, cfg)
			sampleT.Reset(jitter(cfg.Interval))
			if !retrying {
				retrying = e.drain(ctx, retryT, false)
			}
		case <-retryT.C:
			retrying = e.drain(ctx, retryT, false)
		case r := <-e.flushReq:
			fctx, fcancel := context.WithCancel(r.ctx)
			stop := context.AfterFunc(ctx, fcancel)
			if cfg != nil {
				e.sampleInto(fctx, cfg)
			}
			retryT.Stop()
			retrying = e.drain(fctx, retryT, true)
			stop()
			fcancel()
			close(r.done)
		}
	}
}

// sampleInto measures the sandbox and queues the batch, dropping the
// oldest when the queue is full.
func (e *Exporter) sampleInto(ctx context.Context, cfg *Config) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	s, err := e.opts.Sample(sctx)
	cancel()
	if err != nil {
		e.fail(ClassSample)
		return
	}
	body, err := encode(*cfg, e.opts.SandboxID(), s)
	if err != nil {
		e.fail(ClassSample)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queue) >= e.opts.Queue {
		e.queue = e.queue[1:]
		e.status.Dropped++
		e.status.LastErrorClass = ClassQueueFull
	}
	e.nextID++
	e.queue = append(e.queue, batch{id: e.nextID, body: body})
}

// drain posts the queued batches in order. It returns true when it
// stopped to retry later (retryT is armed); flushing, it goes on until the
// queue is empty, a batch fails or ctx ends, without arming retryT unless
// a batch is left.
func (e *Exporter) drain(ctx context.Context, retryT *time.Timer, flushing bool) bool {
	for {
		e.mu.Lock()
		cfg := e.cfg
		if len(e.queue) == 0 || cfg == nil {
			e.mu.Unlock()
			return false
		}
		b := e.queue[0]
		e.mu.Unlock()
		if ctx.Err() != nil {
			return false
		}
		class, retry := e.post(ctx, cfg, b.body)
		e.mu.Lock()
		if len(e.queue) == 0 || e.queue[0].id != b.id {
			// Reconfigured (or dropped by overflow) meanwhile.
			e.mu.Unlock()
			continue
		}
		switch {
		case class == "":
			e.queue = e.queue[1:]
			e.status.Exported++
			e.mu.Unlock()
			continue
		case !retry || e.queue[0].attempts+1 >= e.opts.MaxAttempts:
			e.queue = e.queue[1:]
			e.status.Dropped++
			e.status.LastErrorClass = class
			e.mu.Unlock()
			e.log.Warn("telemetry export: batch dropped", "err_class", class)
			continue
		}
		e.queue[0].attempts++
		n := e.queue[0].attempts
		e.status.LastErrorClass = class
		e.mu.Unlock()
		e.log.Warn("telemetry export: will retry", "err_class", class, "attempt", n)
		if flushing && ctx.Err() == nil {
			// A flush retries at once but once per batch: the budget is short.
			if n >= 2 {
				retryT.Reset(backoff(e.opts.Backoff, n, cfg.Interval))
				return true
			}
			continue
		}
		retryT.Reset(backoff(e.opts.Backoff, n, cfg.Interval))
		return true
	}
}

// post sends one batch: "" on success, else the class and whether to
// retry.
func (e *Exporter) post(ctx context.Context, cfg *Config, body []byte) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.Endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return ClassRejected, false
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("User-Agent", "rayd")
	switch cfg.Auth {
	case AuthBearer:
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	case AuthExecutionRole:
		if e.opts.Signer == nil {
			return ClassNoCredentials, false
		}
		if err := e.opts.Signer.Sign(ctx, req, body); err != nil {
			return ClassNoCredentials, true
		}
	}
	resp, err := e.opts.Client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			return ClassTimeout, true
		}
		return ClassNetwork, true
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return "", false
	case c == http.StatusUnauthorized || c == http.StatusForbidden:
		return ClassUnauthorized, false
	case c == http.StatusTooManyRequests || c >= 500:
		return ClassServerError, true
	default:
		return ClassRejected, false
	}
}

// fail records a class without a batch.
func (e *Exporter) fail(class string) {
	e.mu.Lock()
	e.status.LastErrorClass = class
	e.mu.Unlock()
	e.log.Warn("telemetry export: no sample", "err_class", class)
}

// jitter returns d ±10 %.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.9 + 0.2*rand.Float64())) //nolint:gosec // timing jitter, not a secret
}

// backoff is base·2^(n-1), at most limit, jittered.
func backoff(base time.Duration, n int, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return jitter(min(d, limit))
}

func authName(a AuthKind) string {
	if a == AuthExecutionRole {
		return "execution_role"
	}
	return "bearer"
}
