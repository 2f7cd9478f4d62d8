package agent

import "time"

// SetBuildPoll sets the image build's poll interval for a test; the
// returned func restores it.
func SetBuildPoll(d time.Duration) func() {
	old := buildPoll
	buildPoll = d
	return func() { buildPoll = old }
}
