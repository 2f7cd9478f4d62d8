package handler_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/cdk/handler"
)

// TestHandlerPython runs handler_test.py (fake AWS clients: the calls of
// each custom resource, its answers, failures answered with a code only).
func TestHandlerPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the handler's own tests (handler_test.py) need it")
	}
	cmd := exec.Command(py, "-B", "-m", "unittest", "-v", "handler_test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest handler_test: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "OK") {
		t.Fatalf("no OK:\n%s", out)
	}
}

// TestSourceIsEmbedded: the embedded source is index.py's handler.
func TestSourceIsEmbedded(t *testing.T) {
	if !strings.Contains(handler.Source, "def handler(event, context") {
		t.Error("index.py's handler is not embedded")
	}
}
