// Package version says which rayito this binary is: the release version
// and the commit it was built from, for `rayito --version`.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the CLI's semantic version without the leading v: the cli
// entry of versions.yaml (`make check-modules` compares them).
const Version = "0.1.0"

// Revision is the commit the binary was built from. `make dist` sets it with
// -ldflags "-X github.com/rayito-dev/rayito/cli/internal/version.Revision=<sha>";
// otherwise String falls back to the build info.
var Revision string

// String describes the binary, e.g.
// "rayito 0.1.0 (revision 1a2b3c4d5e6f…, go1.26.8, linux/amd64)".
func String() string {
	bi, _ := debug.ReadBuildInfo()
	return format(Revision, bi)
}

// format builds String from the link-time revision and the build info.
// The revision is the stamped one, else the go command's vcs.revision
// ("-dirty" when the tree had changes). A `go install …/cli/cmd/rayito@v0.1.0`
// build has no VCS information: then it names the release tag the module
// version comes from (which names the revision) and the module sum the go
// command verified.
func format(stamped string, bi *debug.BuildInfo) string {
	set := map[string]string{"GOOS": runtime.GOOS, "GOARCH": runtime.GOARCH}
	goVersion := runtime.Version()
	if bi != nil {
		for _, s := range bi.Settings {
			set[s.Key] = s.Value
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
	}
	var parts []string
	switch rev := set["vcs.revision"]; {
	case stamped != "":
		parts = append(parts, "revision "+stamped)
	case rev != "" && set["vcs.modified"] == "true":
		parts = append(parts, "revision "+rev+"-dirty")
	case rev != "":
		parts = append(parts, "revision "+rev)
	case bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)":
		// The go command records no revision for a module-mode install;
		// the release tag names it, the module sum pins its contents.
		parts = append(parts, "revision of tag cli/"+bi.Main.Version)
		if bi.Main.Sum != "" {
			parts = append(parts, "module sum "+bi.Main.Sum)
		}
	default:
		parts = append(parts, "revision unknown")
	}
	parts = append(parts, goVersion, set["GOOS"]+"/"+set["GOARCH"])
	return fmt.Sprintf("rayito %s (%s)", Version, strings.Join(parts, ", "))
}
