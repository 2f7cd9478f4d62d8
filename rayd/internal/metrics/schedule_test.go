package metrics

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// The background schedule on synctest's fake clock: one sample per
// Interval while started, none after Stop, Current waiting its 100 ms
// window, and the loop's goroutine gone after Stop (the bubble would
// deadlock otherwise). No sleeps on the real clock.
func TestScheduleOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Options{Interval: 5 * time.Second, Processes: func() int { return 1 }, DiskPath: t.TempDir()})
		s.Start()
		time.Sleep(16 * time.Second) // ticks at 5, 10 and 15 s
		synctest.Wait()
		h, _ := s.History(0, 0, 0)
		if len(h) != 3 {
			t.Fatalf("%d samples after 16 s at a 5 s interval, want 3", len(h))
		}
		for i := 1; i < len(h); i++ {
			if d := h[i].UnixMilli - h[i-1].UnixMilli; d != 5000 {
				t.Errorf("samples %d and %d are %d ms apart, want 5000", i-1, i, d)
			}
		}
		// Current right after a background reading waits out the 100 ms
		// window, and no more.
		time.Sleep(4 * time.Second) // the next tick is at 20 s
		synctest.Wait()
		start := time.Now()
		if _, err := s.Current(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != window {
			t.Errorf("Current took %v on the fake clock right after a reading, want %v", d, window)
		}
		// 50 ms after the tick at 25 s, a cancelled Current returns at
		// once with ctx's error instead of waiting the other 50 ms.
		time.Sleep(4*time.Second + 950*time.Millisecond)
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Current(ctx); err != context.Canceled {
			t.Errorf("a cancelled Current: %v", err)
		}
		s.Stop()
		n, _ := s.History(0, 0, 0)
		time.Sleep(time.Minute)
		synctest.Wait()
		if m, _ := s.History(0, 0, 0); len(m) != len(n) {
			t.Errorf("sampling went on after Stop: %d then %d samples", len(n), len(m))
		}
	})
}
