package daemon

import "time"

// TestKnobs are settings only tests change (package daemontest sets them
// for the service tests); the zero value is production's.
type TestKnobs struct {
	// DetachGrace replaces CodeService's detach grace.
	DetachGrace time.Duration
	// KernelSpecDirs replaces CodeService's kernelspec directories.
	KernelSpecDirs []string
}

// SetTestKnobs installs k in c, keeping the package's own test knobs.
func (c *Config) SetTestKnobs(k TestKnobs) {
	kn := c.knobs.get()
	kn.detachGrace = k.DetachGrace
	kn.kernelSpecDirs = k.KernelSpecDirs
	c.knobs = &kn
}

// SetOnTerminated makes f run when the platform's /terminate hook has
// ended the sandbox (a test's harness then stops serving). Call it before
// Serve.
func (d *Daemon) SetOnTerminated(f func()) { d.onTerminated = f }
