package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

func TestParseFlagsMemoryEventsFD(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	cfg, err := ParseFlags(nil, getenv, io.Discard)
	if err != nil || cfg.MemoryEventsFD != -1 {
		t.Fatalf("default: %+v, %v", cfg, err)
	}
	cfg, err = ParseFlags([]string{"-memory-events-fd", "8", "-ready-fd", "7"}, getenv, io.Discard)
	if err != nil || cfg.MemoryEventsFD != 8 {
		t.Fatalf("-memory-events-fd 8: %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"-memory-events-fd", "0"},
		{"-memory-events-fd", "2"},
		{"-memory-events-fd", "-2"},
		{"-memory-events-fd", "x"},
		{"-memory-events-fd", "6", "-ready-fd", "6"},
		{"-memory-events-fd", "5", "-hooks-fd", "5"},
	} {
		if _, err := ParseFlags(bad, getenv, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The counter comes from -memory-events-fd, else /proc/vmstat on a microVM
// (no -isolation), else there is none.
func TestOOMCounter(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	path := filepath.Join(t.TempDir(), "memory.events")
	if err := os.WriteFile(path, []byte("oom 1\noom_kill 6\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	read, err := oomCounter(Config{MemoryEventsFD: fd, Isolation: "full"}, log)
	if err != nil || read == nil {
		t.Fatalf("fd: %v", err)
	}
	if n, ok := read(); !ok || n != 6 {
		t.Fatalf("fd: %d, %v", n, ok)
	}
	if _, err := oomCounter(Config{MemoryEventsFD: 1 << 20}, log); err == nil {
		t.Fatal("a closed descriptor was accepted")
	}
	if read, err := oomCounter(Config{MemoryEventsFD: -1, Isolation: "rootless"}, log); err != nil || read != nil {
		t.Fatalf("local platform without the fd: %v", err)
	}
	if _, err := os.Stat("/proc/vmstat"); err == nil {
		if read, err := oomCounter(Config{MemoryEventsFD: -1}, log); err != nil || read == nil {
			t.Fatalf("microVM: %v", err)
		}
	}
}

// Metrics and MetricsHistory answer through the API, with the token.
func TestMetricsRPC(t *testing.T) {
	h := newHarness(t)
	h.Run(nil)
	c := raydv1connect.NewHealthServiceClient(h.Client, h.APIURL, raydtest.WithToken(h.Token))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Metrics(ctx, connect.NewRequest(&raydv1.MetricsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.Msg; m.GetCpuCount() == 0 || m.GetMemTotalBytes() == 0 || m.GetTaskCount() == 0 || m.GetTimestampUnixMs() == 0 {
		t.Fatalf("Metrics: %v", m)
	}
	hist, err := c.MetricsHistory(ctx, connect.NewRequest(&raydv1.MetricsHistoryRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(hist.Msg.GetSamples()); n > 1 {
		t.Fatalf("%d samples within a few seconds of the start", n)
	}
	_, err = c.MetricsHistory(ctx, connect.NewRequest(&raydv1.MetricsHistoryRequest{StartUnixMs: 2, EndUnixMs: 1}))
	if raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("start > end: %v", err)
	}
	anon := raydv1connect.NewHealthServiceClient(h.Client, h.APIURL)
	if _, err := anon.Metrics(ctx, connect.NewRequest(&raydv1.MetricsRequest{})); raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("without the token: %v", err)
	}
}
