package keepalive

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

type msg struct{ keepalive bool }

// TestKeepaliveAfterSilence runs on synctest's fake clock: a keepalive
// goes out exactly one interval after the last message, and every
// interval of silence after that; a message pushes the next one back.
func TestKeepaliveAfterSilence(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var got []string
		epoch := time.Now()
		send := func(m *msg) error {
			kind := "msg"
			if m.keepalive {
				kind = "keepalive"
			}
			got = append(got, fmt.Sprintf("%s@%v", kind, time.Since(epoch)))
			return nil
		}
		s := Start(20*time.Millisecond, send, func() *msg { return &msg{keepalive: true} })
		step := func(d time.Duration) {
			time.Sleep(d)
			synctest.Wait()
		}
		step(15 * time.Millisecond)
		if err := s.Send(&msg{}); err != nil {
			t.Fatal(err)
		}
		step(30 * time.Millisecond) // 45 ms: keepalive at 35
		step(20 * time.Millisecond) // 65 ms: and at 55
		s.Stop()
		step(time.Second)
		want := []string{"msg@15ms", "keepalive@35ms", "keepalive@55ms"}
		if !slices.Equal(got, want) {
			t.Fatalf("sent %v, want %v", got, want)
		}
	})
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
