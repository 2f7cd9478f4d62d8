package rayito

import (
	"fmt"
	"os"
	"testing"
)

// TestMain points the token store (XDG_STATE_HOME) at a temporary
// directory: tests never write to the user's real state directory.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rayito-sdk-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_STATE_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
