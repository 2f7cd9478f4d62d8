package keepalive

import (
	"errors"
	"sync"
	"testing"
	"time"
)

type msg struct{ keepalive bool }

func TestKeepaliveAfterSilence(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []msg
	send := func(m *msg) error { mu.Lock(); got = append(got, *m); mu.Unlock(); return nil }
	s := Start(20*time.Millisecond, send, func() *msg { return &msg{keepalive: true} })
	if err := s.Send(&msg{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Stop()
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 3 || got[0].keepalive || !got[1].keepalive || !got[2].keepalive {
		t.Fatalf("got %+v, want a message then keepalives", got)
	}
}

func TestSendErrorSticks(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	calls := 0
	s := Start(time.Hour, func(*msg) error { calls++; return boom }, func() *msg { return &msg{} })
	defer s.Stop()
	if err := s.Send(&msg{}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := s.Send(&msg{}); !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err %v calls %d", err, calls)
	}
}
