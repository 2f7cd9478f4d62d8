package proc

import (
	"errors"
	"testing"
)

// At most MaxSubscribers subscriptions follow one process; one more is
// ErrTooManySubscribers, and closing one frees its place.
func TestMaxSubscribers(t *testing.T) {
	t.Parallel()
	s := newTestSupervisor(t, Options{})
	p := start(t, s, sh("sleep 30"))
	t.Cleanup(func() { _ = p.Signal(9) })
	var subs []*Subscription
	for i := range DefaultMaxSubscribers {
		sub, err := p.Subscribe(0)
		if err != nil {
			t.Fatalf("subscriber %d: %v", i+1, err)
		}
		subs = append(subs, sub)
	}
	if _, err := p.Subscribe(0); !errors.Is(err, ErrTooManySubscribers) {
		t.Fatalf("subscriber %d: err %v, want ErrTooManySubscribers", DefaultMaxSubscribers+1, err)
	}
	subs[0].Close()
	sub, err := p.Subscribe(0)
	if err != nil {
		t.Fatalf("after a Close: %v", err)
	}
	sub.Close()
	for _, sub := range subs[1:] {
		sub.Close()
	}
}
