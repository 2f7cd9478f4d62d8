package quiesce

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestCloseCutsStreamsAndRefusesCalls(t *testing.T) {
	t.Parallel()
	var g Gate
	bg := context.Background()
	sctx, leaveStream, err := g.Enter(bg, Stream)
	if err != nil {
		t.Fatal(err)
	}
	uctx, leaveUnary, err := g.Enter(bg, Unary)
	if err != nil || uctx != bg {
		t.Fatalf("unary: %v", err)
	}
	if g.InFlight(Stream) != 1 || g.InFlight(Unary) != 1 {
		t.Fatal("in flight")
	}
	if n := g.Close(); n != 1 {
		t.Fatalf("cut %d", n)
	}
	if n := g.Close(); n != 0 {
		t.Fatalf("second Close cut %d", n)
	}
	select {
	case <-sctx.Done():
	default:
		t.Fatal("stream not cut")
	}
	if !Cut(sctx) || Cut(uctx) {
		t.Fatal("Cut")
	}
	for _, k := range []Kind{Unary, Stream} {
		if _, leave, err := g.Enter(bg, k); !errors.Is(err, ErrSuspending) {
			t.Fatalf("Enter(%v) while closed: %v", k, err)
		} else {
			leave()
		}
	}
	// Wait returns once the calls leave, or at the deadline.
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	if g.Wait(ctx, Unary) {
		t.Fatal("Wait returned with a call in flight")
	}
	cancel()
	done := make(chan bool)
	go func() { done <- g.Wait(bg, Unary) }()
	time.Sleep(10 * time.Millisecond)
	leaveUnary()
	leaveUnary() // idempotent
	if !<-done {
		t.Fatal("Wait")
	}
	leaveStream()
	if !g.Wait(bg, Stream) {
		t.Fatal("Wait streams")
	}
	g.Open()
	if g.Closed() {
		t.Fatal("still closed")
	}
	sctx2, leave, err := g.Enter(bg, Stream)
	if err != nil {
		t.Fatal(err)
	}
	leave()
	if Cut(sctx2) {
		t.Fatal("a stream that left was reported cut")
	}
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	var g Gate
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 300 {
				switch (i + j) % 4 {
				case 0:
					g.Close()
				case 1:
					g.Open()
				default:
					_, leave, _ := g.Enter(context.Background(), Kind((j%2)+1))
					leave()
				}
			}
		})
	}
	wg.Wait()
	g.Open()
	if !g.Wait(context.Background(), Stream) || !g.Wait(context.Background(), Unary) {
		t.Fatal("calls left behind")
	}
}
