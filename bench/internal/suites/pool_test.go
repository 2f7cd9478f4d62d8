package suites

import (
	"context"
	"os"
	"slices"
	"testing"
)

// The pool suite is registered; without root it says why it cannot run
// instead of failing.
func TestPoolSuite(t *testing.T) {
	if !slices.Contains(Names(), "pool") {
		t.Fatal("the pool suite is not registered")
	}
	if os.Geteuid() == 0 {
		t.Skip("as root the suite runs for real (go run ./bench -suite pool)")
	}
	r := Pool(context.Background(), &Env{})
	if r.Unavailable == "" || r.Error != "" {
		t.Fatalf("without root: %+v", r)
	}
}
