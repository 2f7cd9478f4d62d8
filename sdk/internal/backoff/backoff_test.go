package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := New(time.Second, 5*time.Second)
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays %v, want %v", got, want)
		}
	}
	b.Reset()
	if d := b.Next(); d != time.Second {
		t.Fatalf("after Reset: %v", d)
	}
	for n, w := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 7: time.Minute, 100: time.Minute} {
		if d := Nth(time.Second, time.Minute, n); d != w {
			t.Errorf("Nth(%d) = %v, want %v", n, d, w)
		}
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := Sleep(ctx, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	var zero Backoff
	if err := zero.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}
