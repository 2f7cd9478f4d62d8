package raydtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/proc"
)

// supervisor serves every harness of the test binary: a program runs one
// supervisor at a time, because its reaper waits for every child.
var supervisor *proc.Supervisor

// Main is a test binary's TestMain: it starts the binary's child
// supervisor, runs the tests, shuts the supervisor down and exits with
// the tests' code.
func Main(m *testing.M) {
	sup, err := proc.New(proc.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "supervisor:", err)
		os.Exit(1)
	}
	supervisor = sup
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	sup.Shutdown(ctx, time.Second)
	cancel()
	os.Exit(code)
}

// Supervisor is the test binary's child supervisor (started by Main); it
// panics when the package's TestMain does not call Main.
func Supervisor() *proc.Supervisor {
	if supervisor == nil {
		panic("raydtest: no supervisor: the package's TestMain must call raydtest.Main")
	}
	return supervisor
}
