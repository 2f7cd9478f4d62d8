package runner

import (
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	all, err := resolve([]string{"all"})
	if err != nil || len(all) != 15 {
		t.Fatalf("all = %d %v", len(all), err)
	}
	some, err := resolve([]string{"exec", " pty"})
	if err != nil || len(some) != 2 || some[0].Name != "exec" || some[1].Name != "pty" {
		t.Fatalf("some = %v %v", some, err)
	}
	if _, err := resolve([]string{"nope"}); err == nil || !strings.Contains(err.Error(), "unknown suite") {
		t.Fatalf("unknown: %v", err)
	}
}
