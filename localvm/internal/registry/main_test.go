package registry_test

import (
	"os"
	"testing"

	"github.com/rayito-dev/rayito/localvm/internal/registry/registrytest"
)

func TestMain(m *testing.M) { os.Exit(registrytest.RunWithLeakCheck(m)) }
