package version

import (
	"regexp"
	"runtime/debug"
	"testing"
)

func TestVersionIsPlainSemver(t *testing.T) {
	t.Parallel()
	// Health.agent_version carries Version and the SDK compares it: no
	// leading v, no pre-release or build suffix.
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(Version) {
		t.Fatalf("Version = %q, want MAJOR.MINOR.PATCH", Version)
	}
}

func TestRevision(t *testing.T) {
	t.Parallel()
	vcs := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"stamped wins", "abc123", vcs("vcs.revision", "def456", "vcs.modified", "true"), "abc123"},
		{"vcs clean", "", vcs("vcs.revision", "def456", "vcs.modified", "false"), "def456"},
		{"vcs dirty", "", vcs("vcs.revision", "def456", "vcs.modified", "true"), "def456-dirty"},
		{"no vcs", "", vcs("GOOS", "linux"), "unknown"},
		{"no build info", "", nil, "unknown"},
	} {
		if got := revision(tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%s: revision = %q, want %q", tc.name, got, tc.want)
		}
	}
}
