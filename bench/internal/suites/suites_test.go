package suites

import (
	"context"
	"errors"
	"os"
	"reflect"
	"sync/atomic"
	"testing"
)

func TestDensityLevels(t *testing.T) {
	for max, want := range map[int][]int{
		100: {10, 25, 50, 100},
		200: {10, 25, 50, 100, 150, 200},
		30:  {10, 25, 30},
		5:   {5},
		0:   nil,
	} {
		if got := densityLevels(max); !reflect.DeepEqual(got, want) {
			t.Errorf("densityLevels(%d) = %v, want %v", max, got, want)
		}
	}
}

func TestIterationCaps(t *testing.T) {
	e := &Env{Warmup: -1}
	if e.n(300) != 300 || e.warmup(10) != 10 {
		t.Fatal("defaults changed")
	}
	e.Iterations = 5
	if e.n(300) != 5 || e.n(3) != 3 || e.warmup(10) != 5 {
		t.Fatal("-iterations does not cap")
	}
	e.Warmup = 0
	if e.warmup(10) != 0 {
		t.Fatal("-warmup not applied")
	}
}

func TestSpawnParallel(t *testing.T) {
	var calls atomic.Int32
	times, fails, err := spawnParallel(context.Background(), 7, 3, 0, func(context.Context) error { calls.Add(1); return nil })
	if err != nil || len(times) != 7 || len(fails) != 0 || calls.Load() != 7 {
		t.Fatalf("times %d calls %d err %v", len(times), calls.Load(), err)
	}
	// One failure within the tolerance is retried: 10 successes, 11 calls.
	calls.Store(0)
	boom := errors.New("boom")
	times, fails, err = spawnParallel(context.Background(), 10, 2, 1, func(context.Context) error {
		if calls.Add(1) == 3 {
			return boom
		}
		return nil
	})
	if err != nil || len(times) != 10 || len(fails) != 1 || calls.Load() != 11 {
		t.Fatalf("tolerated: times %d fails %d calls %d err %v", len(times), len(fails), calls.Load(), err)
	}
	// Beyond the tolerance it gives up.
	calls.Store(0)
	_, _, err = spawnParallel(context.Background(), 50, 2, 0, func(context.Context) error {
		if calls.Add(1) == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() >= 50 {
		t.Fatalf("err %v after %d calls", err, calls.Load())
	}
}

func TestFloorCommands(t *testing.T) {
	e := &Env{}
	out, err := e.runFloor(floorCmdPlain("/bin/echo", "hi"))
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("runFloor = %q %v", out, err)
	}
	if namespaced() {
		if out, err := e.runFloor(floorCmd("bash", "-c", "echo $$")); err != nil || string(out) != "1\n" {
			t.Fatalf("namespaced bash pid = %q %v", out, err)
		}
	}
	lp, err := startLocalPty(e.Pin)
	if err != nil {
		t.Fatal(err)
	}
	defer lp.close()
	if _, err := lp.roundTrip(); err != nil {
		t.Fatal(err)
	}
}

func TestUnavailableSuites(t *testing.T) {
	if os.Geteuid() != 0 {
		if r := Egress(context.Background(), nil); r.Unavailable == "" {
			t.Fatal("egress should be unavailable without root")
		}
	}
	if len(Names()) != 15 {
		t.Fatalf("suites %v", Names())
	}
}
