package health

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/logring"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

func TestLogs(t *testing.T) {
	s := New(sandbox.New(sandbox.Options{}), func() uint64 { return 0 }, nil)
	ctx := context.Background()
	call := func(start int64, limit int32) (*raydv1.LogsResponse, error) {
		r, err := s.Logs(ctx, connect.NewRequest(&raydv1.LogsRequest{StartUnixMs: start, Limit: limit}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	if r, err := call(0, 0); err != nil || len(r.Entries) != 0 {
		t.Fatalf("without a ring: %v %v", r, err)
	}
	ring := logring.New(8)
	s.SetLogs(ring)
	log := slog.New(logring.Wrap(slog.NewJSONHandler(io.Discard, nil), ring))
	log.Info("first", "sandbox", "a")
	mid := time.Now()
	time.Sleep(2 * time.Millisecond)
	log.Warn("second")
	log.Error("third")
	r, err := call(0, 0)
	if err != nil || len(r.Entries) != 3 || r.Entries[0].Message != "first" || r.Entries[0].Level != "info" || r.Entries[0].Fields["sandbox"] != "a" ||
		r.Entries[1].Level != "warn" || r.Entries[2].Level != "error" {
		t.Fatalf("all: %v %v", r, err)
	}
	if r, err := call(mid.UnixMilli()+1, 1); err != nil || len(r.Entries) != 1 || r.Entries[0].Message != "second" {
		t.Fatalf("since, limit 1: %v %v", r, err)
	}
	for _, bad := range []int32{-1, 1001} {
		if _, err := call(0, bad); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("limit %d: %v", bad, err)
		}
	}
}
