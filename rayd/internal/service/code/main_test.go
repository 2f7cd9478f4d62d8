package code_test

import (
	"testing"

	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// TestMain starts the test binary's child supervisor (raydtest.Main):
// the harnesses of the package's tests share it.
func TestMain(m *testing.M) { raydtest.Main(m) }
