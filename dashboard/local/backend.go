package local

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// backend is what the dashboard asks of the platform. sdkBackend is the
// real one; the package's tests count calls through a stand-in.
type backend interface {
	list(ctx context.Context) ([]Sandbox, error)
	logs(ctx context.Context, id string) (lines []string, truncated bool, err error)
	events(ctx context.Context, id string) ([]Event, error)
	kill(ctx context.Context, id string) error
	pause(ctx context.Context, id string) error
	resume(ctx context.Context, id string) error
	setTimeout(ctx context.Context, id string, d time.Duration) error
}

// Sandbox is what the API says of a sandbox: no token, env, payload or
// endpoint exists in it.
type Sandbox struct {
	ID        string            `json:"id"`
	State     string            `json:"state"`
	Template  string            `json:"template"`
	StartedAt *time.Time        `json:"started_at,omitempty"`
	AgeSecs   int64             `json:"age_seconds"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CPUs      int               `json:"cpus,omitempty"`
	MemBytes  uint64            `json:"memory_bytes,omitempty"`
	Metrics   []Sample          `json:"metrics,omitempty"`
}

// Sample is one metrics sample of the sparkline.
type Sample struct {
	UnixMs     int64   `json:"t"`
	CPUPercent float64 `json:"cpu"`
	MemUsed    uint64  `json:"mem_used"`
	MemTotal   uint64  `json:"mem_total"`
}

// Event is one lifecycle event.
type Event struct {
	SandboxID  string    `json:"sandbox_id"`
	Type       string    `json:"type"`
	KillReason string    `json:"kill_reason,omitempty"`
	Generation uint64    `json:"generation"`
	OccurredAt time.Time `json:"occurred_at"`
}

// errNoLogs: this platform keeps no logs the dashboard can read (AWS).
var errNoLogs = errors.New("no logs here")

// errReadRole: another account's read role does not allow this.
var errReadRole = errors.New("not in the read role")

// Bounds of what one page load asks of the platform.
const (
	// detailLimit is how many running sandboxes get metadata and
	// metrics (the newest).
	detailLimit = 50
	// detailTimeout bounds those calls, per sandbox.
	detailTimeout = 3 * time.Second
	// sparkPoints is the sparkline's samples (of the last 10 minutes).
	sparkPoints = 30
	// maxLogBytes is the tail of a sandbox's log the page gets.
	maxLogBytes = 256 << 10
	// eventsLimit is how many events the page gets.
	eventsLimit = 50
)

type sdkBackend struct {
	opts    []rayito.Option
	logFile func(id string) string
	now     func() time.Time
	// listOnly: another account's read role (no tokens, logs or
	// events there).
	listOnly bool
}

func (b *sdkBackend) list(ctx context.Context) ([]Sandbox, error) {
	infos, err := rayito.List(ctx, b.opts...)
	if err != nil {
		return nil, err
	}
	now := b.now()
	out := make([]Sandbox, len(infos))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	running := 0
	for i, in := range infos {
		s := Sandbox{ID: in.ID, State: in.State, Template: in.Template}
		if !in.StartedAt.IsZero() {
			t := in.StartedAt
			s.StartedAt = &t
			s.AgeSecs = int64(now.Sub(t) / time.Second)
		}
		out[i] = s
		if b.listOnly || in.State != "RUNNING" || running >= detailLimit {
			continue
		}
		running++
		wg.Add(1)
		go func(s *Sandbox) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			b.details(ctx, s)
		}(&out[i])
	}
	wg.Wait()
	return out, nil
}

// details adds what the sandbox's daemon says: metadata, size and the
// last 10 minutes of metrics. A sandbox whose token this machine does not
// hold, or that does not answer in time, keeps the platform's facts only.
func (b *sdkBackend) details(ctx context.Context, s *Sandbox) {
	ctx, cancel := context.WithTimeout(ctx, detailTimeout)
	defer cancel()
	sbx, err := rayito.Connect(ctx, s.ID, b.opts...)
	if err != nil {
		return
	}
	if info, err := sbx.Info(ctx); err == nil {
		s.Metadata = info.Metadata
		s.CPUs = info.CPUCount
		s.MemBytes = info.MemoryLimit
		if s.MemBytes == 0 {
			s.MemBytes = info.MemoryBytes
		}
	}
	hist, err := sbx.MetricsHistory(ctx, b.now().Add(-10*time.Minute), time.Time{}, sparkPoints)
	if err != nil {
		return
	}
	for _, m := range hist {
		s.Metrics = append(s.Metrics, Sample{UnixMs: m.Time.UnixMilli(), CPUPercent: m.CPUPercent, MemUsed: m.MemUsed, MemTotal: m.MemTotal})
	}
}

// logs is the tail of the sandbox's log file as `rayito sandbox logs`
// reads it (the local platform's state directory).
func (b *sdkBackend) logs(ctx context.Context, id string) ([]string, bool, error) {
	if b.listOnly {
		return nil, false, errReadRole
	}
	if b.logFile == nil {
		return nil, false, errNoLogs
	}
	f, err := os.Open(b.logFile(id))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, rayito.ErrNotFound
		}
		return nil, false, err
	}
	defer f.Close()
	return tail(f, maxLogBytes)
}

func (b *sdkBackend) events(ctx context.Context, id string) ([]Event, error) {
	if b.listOnly {
		return nil, errReadRole
	}
	evs, err := rayito.GetEvents(ctx, rayito.EventsQuery{SandboxID: id, Limit: eventsLimit}, b.opts...)
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(evs))
	for _, e := range evs {
		out = append(out, Event{SandboxID: e.SandboxID, Type: string(e.Type), KillReason: e.KillReason, Generation: e.Generation, OccurredAt: e.OccurredAt})
	}
	return out, nil
}

func (b *sdkBackend) kill(ctx context.Context, id string) error {
	return rayito.Kill(ctx, id, b.opts...)
}

func (b *sdkBackend) pause(ctx context.Context, id string) error {
	return rayito.Pause(ctx, id, b.opts...)
}

func (b *sdkBackend) resume(ctx context.Context, id string) error {
	return rayito.Resume(ctx, id, b.opts...)
}

func (b *sdkBackend) setTimeout(ctx context.Context, id string, d time.Duration) error {
	sbx, err := rayito.Connect(ctx, id, b.opts...)
	if err != nil {
		return err
	}
	_, err = sbx.SetTimeout(ctx, d)
	return err
}

// tail reads the last max bytes of f as lines (the first, cut, dropped
// when the file is longer).
func tail(f *os.File, max int64) ([]string, bool, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	truncated := st.Size() > max
	if truncated {
		if _, err := f.Seek(st.Size()-max, io.SeekStart); err != nil {
			return nil, false, err
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, false, err
	}
	lines := splitLines(string(data))
	if truncated && len(lines) > 0 {
		lines = lines[1:]
	}
	return lines, truncated, nil
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}
