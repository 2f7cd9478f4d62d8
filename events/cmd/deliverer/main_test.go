package main

import (
	"context"
	"errors"
	"testing"

	"github.com/rayito-dev/rayito/events/internal/lambdaenv"
)

// TestRunNeedsConfig: without its variables the Lambda stops at once,
// naming the missing one, before any AWS call.
func TestRunNeedsConfig(t *testing.T) {
	for _, k := range []string{lambdaenv.EnvTable, lambdaenv.EnvStackKey, lambdaenv.EnvFailureQueue} {
		t.Setenv(k, "")
	}
	if err := run(context.Background()); !errors.Is(err, lambdaenv.ErrConfig) {
		t.Fatalf("%v", err)
	}
}
