package host

import (
	"os"
	"path/filepath"
	"strings"
)

// sitecustomize is the start-up hook Python agents get: logging at INFO
// on stderr, then the per-request INFO lines of httpx and httpcore (which
// carry full URLs, query strings included, where some APIs put a
// credential) raised to WARNING. An agent that needs those lines while it
// is debugged lowers them from its own code
// (logging.getLogger("httpx").setLevel(logging.INFO)); one that wants its
// own logging set-up calls logging.basicConfig(..., force=True). A
// sitecustomize the image already has is run first.
const sitecustomize = `# Written by rayito-agent-host: see docs/agent-host.md.
import os as _os, sys as _sys
def _rayito_previous():
    import importlib.util
    here = _os.path.dirname(_os.path.abspath(__file__))
    for p in _sys.path:
        d = _os.path.abspath(p or ".")
        f = _os.path.join(d, "sitecustomize.py")
        if d != here and _os.path.isfile(f):
            spec = importlib.util.spec_from_file_location("_rayito_previous_sitecustomize", f)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return
try:
    _rayito_previous()
except Exception:
    pass
import logging as _logging
_logging.basicConfig(level=_logging.INFO)
for _name in ("httpx", "httpcore"):
    _logging.getLogger(_name).setLevel(_logging.WARNING)
`

// writePythonHook writes the hook into a new directory under dir and
// returns the agent's PYTHONPATH: that directory (PYTHONPATH is reserved:
// no secret or project variable sets it).
func writePythonHook(dir string) (string, error) {
	d, err := os.MkdirTemp(dir, "rayito-agent-host-py-")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(d, "sitecustomize.py"), []byte(sitecustomize), 0o444); err != nil {
		return "", err
	}
	if err := os.Chmod(d, 0o555); err != nil {
		return "", err
	}
	return d, nil
}

// pythonPath is the agent's PYTHONPATH: the hook's directory first, then
// what the host's environment had.
func pythonPath(hook string, env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok && v != "" {
			return hook + string(os.PathListSeparator) + v
		}
	}
	return hook
}
