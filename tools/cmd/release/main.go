// Command release checks the workspace's modules against the release
// manifest (versions.yaml) and prepares releases. Run from the repository
// root (the Makefile does):
//
//	release check-modules      go.mods against imports, manifest and each other; go mod tidy -diff per module
//	release tidy               go mod tidy every module, siblings resolved from the work tree
//	release proxy [-tags] DIR  write a file-based module proxy of the released modules (work tree, or their tags)
//	release env DIR            print the GOWORK=off environment that resolves siblings from the proxy in DIR
//	release plan               print the tags a release would create, or why it cannot
//	release version DIR        print a module's manifest version
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rayito-dev/rayito/tools/internal/release"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: release check-modules|tidy|proxy|env|plan|version (see go doc ./tools/cmd/release)")
		return 2
	}
	root, err := os.Getwd()
	if err != nil {
		return fail(err)
	}
	repo, err := release.Load(root)
	if err != nil {
		return fail(err)
	}
	tmp := filepath.Join(root, ".tmp")
	standalone := release.Standalone{Proxy: filepath.Join(tmp, "modproxy"), ModCache: filepath.Join(tmp, "modcache")}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "check-modules":
		errs := repo.CheckGoMods()
		stale, err := repo.Tidy(standalone, true)
		if err != nil {
			return fail(err)
		}
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, "check-modules:", e)
		}
		for _, s := range stale {
			fmt.Fprintln(os.Stderr, "check-modules:", s)
		}
		if len(errs)+len(stale) > 0 {
			return 1
		}
		fmt.Printf("check-modules: %d modules tidy, siblings at their manifest versions, no cross-module internal imports\n", len(repo.Modules))
	case "tidy":
		if _, err := repo.Tidy(standalone, false); err != nil {
			return fail(err)
		}
	case "proxy":
		fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
		tags := fs.Bool("tags", false, "zip each module from its tag <dir>/<version> instead of the work tree")
		if err := fs.Parse(rest); err != nil || fs.NArg() != 1 {
			fmt.Fprintln(os.Stderr, "usage: release proxy [-tags] DIR")
			return 2
		}
		src := release.FromTree
		if *tags {
			src = release.FromTags
		}
		if err := repo.WriteProxy(fs.Arg(0), src); err != nil {
			return fail(err)
		}
	case "env":
		if len(rest) != 1 {
			fmt.Fprintln(os.Stderr, "usage: release env PROXYDIR")
			return 2
		}
		abs, err := filepath.Abs(rest[0])
		if err != nil {
			return fail(err)
		}
		s := release.Standalone{Proxy: abs, ModCache: filepath.Join(filepath.Dir(abs), "modcache")}
		if err := s.Reset(); err != nil {
			return fail(err)
		}
		env, err := s.Env([]string{})
		if err != nil {
			return fail(err)
		}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Printf("export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
		}
	case "plan":
		p, err := repo.Plan()
		if err != nil {
			return fail(fmt.Errorf("release-plan refused:\n%w", err))
		}
		for _, t := range p.Tags {
			fmt.Println(t)
		}
		for _, t := range p.Unchanged {
			fmt.Fprintf(os.Stderr, "release-plan: %s already tagged, unchanged\n", t)
		}
		for _, u := range p.Unreleased {
			fmt.Fprintf(os.Stderr, "release-plan: not released: %s\n", u)
		}
		if len(p.Tags) == 0 {
			fmt.Fprintln(os.Stderr, "release-plan: nothing to release")
		}
	case "version":
		if len(rest) != 1 {
			fmt.Fprintln(os.Stderr, "usage: release version DIR")
			return 2
		}
		m, ok := repo.Module(rest[0])
		if !ok || !m.Released {
			return fail(fmt.Errorf("%s is not a released module of versions.yaml", rest[0]))
		}
		fmt.Println(m.Version)
	default:
		fmt.Fprintf(os.Stderr, "release: unknown command %q\n", cmd)
		return 2
	}
	return 0
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "release:", err)
	return 1
}
