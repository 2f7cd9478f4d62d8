package launcher

import (
	"runtime/debug"
	"strings"

	"github.com/rayito-dev/rayito/rayd"
)

// develStamp is the build stamp of a binary that knows neither its
// modules' versions nor its commit (go test): it pairs with any other.
const develStamp = "devel"

// stampModules are the modules whose code runs on both sides of the
// launcher and its init: this package (localvm), rayd and their contracts.
var stampModules = []string{
	"github.com/rayito-dev/rayito/localvm",
	"github.com/rayito-dev/rayito/rayd",
	"github.com/rayito-dev/rayito/proto",
}

// BuildStamp names the code a sandbox's init and rayd come from in this
// binary. A platform starts sandboxes from another binary
// (Options.Binary) only when both stamps agree, or either is develStamp.
// It is, in this order:
//   - "localvm@v0.2.0 rayd@v0.2.0 proto@v0.2.0" when the go command
//     recorded those modules' versions (go install module@version);
//   - "rayd 0.2.0 <revision>" when the binary knows its commit (a release
//     build links it in; a build from a git work tree records it, with
//     "-dirty" after uncommitted changes);
//   - develStamp otherwise (go test, or no version control).
func BuildStamp() string {
	if s := moduleStamp(); s != "" {
		return s
	}
	if rev := rayd.BuildRevision(); rev != "unknown" {
		return "rayd " + rayd.Version + " " + rev
	}
	return develStamp
}

// moduleStamp is the stamp of the stampModules' versions, or "" when one
// of them has none (a build from a work tree: "(devel)").
func moduleStamp() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	var parts []string
	for _, want := range stampModules {
		v := ""
		for _, m := range mods {
			if m.Path == want {
				v = m.Version
				if m.Replace != nil {
					v = m.Replace.Version
				}
			}
		}
		if v == "" || v == "(devel)" {
			return ""
		}
		parts = append(parts, strings.TrimPrefix(want, "github.com/rayito-dev/rayito/")+"@"+v)
	}
	return strings.Join(parts, " ")
}
