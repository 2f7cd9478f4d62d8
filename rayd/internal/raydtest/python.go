package raydtest

import (
	"sync"
	"testing"

	"github.com/rayito-dev/rayito/rayd/internal/proc"
)

var (
	ipykernelOnce sync.Once
	ipykernelErr  string
)

// RequireIPyKernel skips unless a python3 with ipykernel and matplotlib
// is installed (Debian's python3-ipykernel; `make deps` installs it as
// root).
func RequireIPyKernel(t *testing.T) {
	t.Helper()
	ipykernelOnce.Do(func() {
		for _, py := range []string{"/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"} {
			// Through the shared supervisor: its reaper waits for every
			// child of the test binary.
			p, err := Supervisor().Start(proc.Spec{Path: py, Args: []string{py, "-c", "import ipykernel_launcher, matplotlib"}, Env: []string{}, Dir: "/"})
			if err != nil {
				continue
			}
			<-p.Done()
			if x, _ := p.Exit(); x.Status == proc.StatusExited && x.ExitCode == 0 {
				return
			}
		}
		ipykernelErr = "no python3 with ipykernel and matplotlib (install python3-ipykernel python3-matplotlib: make deps as root)"
	})
	if ipykernelErr != "" {
		t.Skip(ipykernelErr)
	}
}
