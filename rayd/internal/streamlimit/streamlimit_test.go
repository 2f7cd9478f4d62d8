package streamlimit

import (
	"errors"
	"testing"
)

func TestLimit(t *testing.T) {
	l := New(2)
	r1, err := l.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(); !errors.Is(err, ErrTooMany) {
		t.Fatalf("third: %v, want ErrTooMany", err)
	}
	if l.Open() != 2 {
		t.Fatalf("open %d", l.Open())
	}
	r1()
	r3, err := l.Acquire()
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	r2()
	r3()
	if l.Open() != 0 {
		t.Fatalf("open %d after every release", l.Open())
	}
}

func TestNoLimit(t *testing.T) {
	for _, l := range []*Limit{nil, New(0), {}} {
		for range 1000 {
			if _, err := l.Acquire(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
