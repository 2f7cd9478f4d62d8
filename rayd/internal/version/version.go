// Package version holds rayd's version, reported by Health, and the commit
// the binary was built from.
package version

import "runtime/debug"

// Version is rayd's semantic version without the leading v: the rayd entry
// of versions.yaml (`make check-modules` compares them). Health reports it
// as agent_version, which the SDK compares, so it never carries a revision.
const Version = "0.1.0"

// Revision is the commit rayd was built from. `make dist` sets it with
// -ldflags "-X github.com/rayito-dev/rayito/rayd/internal/version.Revision=<sha>";
// otherwise BuildRevision falls back to the build info.
var Revision string

// BuildRevision returns Revision when it was set at link time, else the
// vcs.revision the go command stamped (with "-dirty" when the tree had
// uncommitted changes), else "unknown" (go install module@version, or a
// build with -buildvcs=false).
func BuildRevision() string {
	bi, _ := debug.ReadBuildInfo()
	return revision(Revision, bi)
}

func revision(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if bi == nil {
		return "unknown"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown"
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return rev
}
