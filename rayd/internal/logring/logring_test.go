package logring

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRing(t *testing.T) {
	var out bytes.Buffer
	r := New(3)
	log := slog.New(Wrap(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}), r))
	if From(log.Handler()) != r {
		t.Fatal("From did not find the ring")
	}
	log.Debug("not kept")
	log.With("sandbox", "a").WithGroup("g").Info("one", "k", 1, slog.Group("sub", "x", "y"))
	start := time.Now()
	log.Warn("two")
	log.Error("three")
	log.Info("four")
	if !strings.Contains(out.String(), `"msg":"one"`) {
		t.Fatal("the next handler did not get the records")
	}
	all, dropped := r.Since(time.Time{}, 100)
	if len(all) != 3 || dropped != 1 || all[0].Message != "two" || all[2].Message != "four" {
		t.Fatalf("ring %v dropped %d", all, dropped)
	}
	if got, _ := r.Since(start, 1); len(got) != 1 || got[0].Message != "two" {
		t.Fatalf("since/limit: %v", got)
	}
	r2 := New(4)
	l2 := slog.New(Wrap(slog.NewTextHandler(&out, nil), r2))
	l2.With("sandbox", "a").WithGroup("g").Info("one", "k", 1, slog.Group("sub", "x", "y"))
	e, _ := r2.Since(time.Time{}, 10)
	if f := e[0].Fields; f["sandbox"] != "a" || f["g.k"] != "1" || f["g.sub.x"] != "y" || e[0].Level != slog.LevelInfo {
		t.Fatalf("fields %v", f)
	}
}
