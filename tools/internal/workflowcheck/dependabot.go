package workflowcheck

import (
	"fmt"
	"slices"
	"sort"

	"go.yaml.in/yaml/v3"
)

// Cooldowns Dependabot waits before it proposes a freshly published
// version (security updates do not wait, by Dependabot's design).
const (
	CooldownDays      = 7
	CooldownMajorDays = 14
)

type dependabotConfig struct {
	Version int
	Updates []struct {
		Ecosystem   string   `yaml:"package-ecosystem"`
		Directory   string   `yaml:"directory"`
		Directories []string `yaml:"directories"`
		Cooldown    *struct {
			DefaultDays     int `yaml:"default-days"`
			SemverMajorDays int `yaml:"semver-major-days"`
		} `yaml:"cooldown"`
	}
}

// CheckDependabot checks .github/dependabot.yml: gomod updates cover
// exactly goDirs, github-actions covers "/", npm covers exactly npmDirs
// (the directories holding a package.json; none is fine), and every
// entry has the cooldown. Directories are written as Dependabot wants
// them: "/proto".
func CheckDependabot(file string, data []byte, goDirs, npmDirs []string) []string {
	p := &problems{file: file}
	var c dependabotConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		p.add("", "does not parse: %v", err)
		return p.list
	}
	if c.Version != 2 {
		p.add("version", "%d: must be 2", c.Version)
	}
	dirs := map[string][]string{}
	for i, u := range c.Updates {
		where := fmt.Sprintf("updates[%d] (%s)", i, u.Ecosystem)
		d := u.Directories
		if u.Directory != "" {
			d = append(d, u.Directory)
		}
		dirs[u.Ecosystem] = append(dirs[u.Ecosystem], d...)
		switch {
		case u.Cooldown == nil:
			p.add(where, "no cooldown: wait %d days (%d for a major) before proposing a new version", CooldownDays, CooldownMajorDays)
		case u.Cooldown.DefaultDays < CooldownDays:
			p.add(where, "cooldown default-days %d: at least %d", u.Cooldown.DefaultDays, CooldownDays)
		case u.Ecosystem != "github-actions" && u.Cooldown.SemverMajorDays < CooldownMajorDays:
			// github-actions has no semver cooldowns: default-days covers it.
			p.add(where, "cooldown semver-major-days %d: at least %d", u.Cooldown.SemverMajorDays, CooldownMajorDays)
		}
	}
	same := func(eco string, want []string) {
		got := slices.Clone(dirs[eco])
		want = slices.Clone(want)
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			p.add("updates", "%s directories %v: want %v", eco, got, want)
		}
	}
	same("gomod", goDirs)
	same("github-actions", []string{"/"})
	same("npm", npmDirs)
	return p.list
}
