package code

import (
	"os"
	"os/exec"
	"testing"
)

// TestPythonLauncherLeavesModulesImportable: the launcher's bootstrap
// (run without starting a kernel) loads ipykernel without debugpy and
// jedi, and a cell may still import both afterwards.
func TestPythonLauncherLeavesModulesImportable(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if exec.Command(py, "-c", pythonProbe).Run() != nil {
		t.Skip("no ipykernel for /usr/bin/python3 (install python3-ipykernel: make deps as root)")
	}
	// The launcher without its last line (which would start the kernel).
	boot := pythonLauncher[:len(pythonLauncher)-len("kernelapp.launch_new_instance()\n")]
	check := boot + "import ipykernel.debugger as d, IPython.core.completer as c, importlib.util as u\n" +
		"assert not d._is_debugpy_available and not c.JEDI_INSTALLED\n" +
		"assert 'debugpy' not in sys.modules and 'jedi' not in sys.modules\n" +
		"for m in ('debugpy', 'jedi'):\n    assert u.find_spec(m) is None or __import__(m)\n"
	if out, err := exec.Command(py, "-c", check).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}
