package suites

import (
	"testing"

	"github.com/rayito-dev/rayito/bench/internal/harness"
)

func TestAddResult(t *testing.T) {
	e := &Env{}
	if len(e.TakeResults()) != 0 {
		t.Fatal("results before any was added")
	}
	e.AddResult(harness.Result{Suite: PrebootedSuite})
	if got := e.TakeResults(); len(got) != 1 || got[0].Suite != PrebootedSuite {
		t.Fatalf("TakeResults = %+v", got)
	}
	if len(e.TakeResults()) != 0 {
		t.Fatal("TakeResults returned a result twice")
	}
}
