package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFormat(t *testing.T) {
	t.Parallel()
	const sha = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
	info := func(main debug.Module, kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: main}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	devel := debug.Module{Path: "github.com/rayito-dev/rayito/cli", Version: "(devel)"}
	released := debug.Module{Path: "github.com/rayito-dev/rayito/cli", Version: "v0.1.0", Sum: "h1:Zm9vYmFy="}
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{
			"make dist: stamped, no vcs",
			sha, info(devel, "GOOS", "linux", "GOARCH", "arm64"),
			"rayito 0.1.0 (revision " + sha + ", go1.26.8, linux/arm64)",
		},
		{
			"stamped wins over vcs",
			sha, info(devel, "GOOS", "linux", "GOARCH", "amd64", "vcs.revision", "ffff", "vcs.modified", "true"),
			"rayito 0.1.0 (revision " + sha + ", go1.26.8, linux/amd64)",
		},
		{
			"go build in a clean checkout",
			"", info(devel, "GOOS", "darwin", "GOARCH", "arm64", "vcs.revision", sha, "vcs.modified", "false"),
			"rayito 0.1.0 (revision " + sha + ", go1.26.8, darwin/arm64)",
		},
		{
			"go build in a dirty checkout",
			"", info(devel, "GOOS", "linux", "GOARCH", "amd64", "vcs.revision", sha, "vcs.modified", "true"),
			"rayito 0.1.0 (revision " + sha + "-dirty, go1.26.8, linux/amd64)",
		},
		{
			"go install @v0.1.0: module version and sum",
			"", info(released, "GOOS", "linux", "GOARCH", "amd64"),
			"rayito 0.1.0 (revision of tag cli/v0.1.0, module sum h1:Zm9vYmFy=, go1.26.8, linux/amd64)",
		},
		{
			"module version without a sum",
			"", info(debug.Module{Version: "v0.1.0"}, "GOOS", "linux", "GOARCH", "amd64"),
			"rayito 0.1.0 (revision of tag cli/v0.1.0, go1.26.8, linux/amd64)",
		},
		{
			"devel build without vcs",
			"", info(devel, "GOOS", "linux", "GOARCH", "amd64"),
			"rayito 0.1.0 (revision unknown, go1.26.8, linux/amd64)",
		},
		{
			"no build info",
			"", nil,
			"rayito 0.1.0 (revision unknown, " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")",
		},
	} {
		if got := format(tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
