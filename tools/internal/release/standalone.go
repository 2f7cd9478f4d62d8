package release

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Standalone is a go command environment outside the workspace
// (GOWORK=off), in which the repository's modules resolve by version from
// a file proxy and everything else through the main module cache (read as
// a proxy, so no network is needed for what was already downloaded) and
// then the configured GOPROXY. It has a module cache of its own, because
// the file proxy serves new contents under the same versions as the tree
// changes and the go command never re-downloads a cached version.
type Standalone struct {
	Proxy    string   // the file proxy's directory
	ModCache string   // this environment's own GOMODCACHE
	Extra    []string // more variables, such as GOBIN
}

// Env returns the environment for a go command, based on base (os.Environ
// when nil).
func (s Standalone) Env(base []string) ([]string, error) {
	if base == nil {
		base = os.Environ()
	}
	mainCache, err := goEnv("GOMODCACHE")
	if err != nil {
		return nil, err
	}
	upstream, err := goEnv("GOPROXY")
	if err != nil {
		return nil, err
	}
	proxies := []string{fileURL(s.Proxy)}
	if mainCache != "" && mainCache != s.ModCache {
		proxies = append(proxies, fileURL(filepath.Join(mainCache, "cache", "download")))
	}
	if upstream != "" && upstream != "off" {
		proxies = append(proxies, upstream)
	}
	flags, _ := goEnv("GOFLAGS")
	godebug := "goindex=0"
	if d := os.Getenv("GODEBUG"); d != "" {
		godebug = d + "," + godebug
	}
	env := withoutVars(base, "GOWORK", "GOPROXY", "GONOSUMDB", "GONOSUMCHECK", "GOMODCACHE", "GOFLAGS", "GOPRIVATE", "GONOPROXY", "GODEBUG")
	env = append(env,
		"GOWORK=off",
		"GOPROXY="+strings.Join(proxies, ","),
		// Our module path only: everything else is still checked against
		// the checksum database.
		"GONOSUMDB="+strings.TrimSuffix(PathPrefix, "/"),
		"GOMODCACHE="+s.ModCache,
		// -trimpath: a package's build no longer depends on where its
		// module cache is, so what one environment compiled (make
		// standalone's vet) is reused by another's (the outsider test's
		// builds) for the same module versions.
		"GOFLAGS="+strings.TrimSpace(flags+" -modcacherw -trimpath"),
		// The build cache's module index assumes that a module version's
		// files never change; ours do (the tree under the same version),
		// so a stale index would hide new packages and imports.
		"GODEBUG="+godebug,
	)
	return append(env, s.Extra...), nil
}

// Reset forgets every repository module the environment's module cache
// holds, so that the next command reads them from the proxy again.
func (s Standalone) Reset() error {
	for _, dir := range []string{
		filepath.Join(s.ModCache, "cache", "download", filepath.FromSlash(strings.TrimSuffix(PathPrefix, "/"))),
		filepath.Join(s.ModCache, filepath.FromSlash(strings.TrimSuffix(PathPrefix, "/"))),
	} {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}

// Go runs the go command in dir with the standalone environment and
// returns its combined output.
func (s Standalone) Go(dir string, args ...string) ([]byte, error) {
	env, err := s.Env(nil)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("go %s (in %s): %w", strings.Join(args, " "), dir, err)
	}
	return out, nil
}

// Tidy brings every module's go.mod and go.sum to what `go mod tidy`
// leaves outside the workspace, the siblings resolved from the work tree
// at their manifest versions, in dependency order (a module's go.sum holds
// its siblings' hashes, so each is tidied after the siblings it requires).
// Each module is tidied in a copy whose go.sum has lost its siblings'
// lines (their contents change under the same version as the tree does).
// With check set it changes nothing and returns, for each module that is
// not tidy, what differs.
func (r *Repo) Tidy(s Standalone, check bool) ([]string, error) {
	order, err := r.Ordered()
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, m := range order {
		if err := r.WriteProxy(s.Proxy, FromTree); err != nil {
			return nil, err
		}
		if err := s.Reset(); err != nil {
			return nil, err
		}
		work, err := os.MkdirTemp("", "rayito-tidy-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(work)
		if err := r.copyModule(m, work); err != nil {
			return nil, err
		}
		oldMod, _ := os.ReadFile(filepath.Join(work, "go.mod"))
		oldSum, _ := os.ReadFile(filepath.Join(work, "go.sum"))
		if err := os.WriteFile(filepath.Join(work, "go.sum"), withoutSiblingSums(oldSum), 0o644); err != nil {
			return nil, err
		}
		if out, err := s.Go(work, "mod", "tidy"); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", m.Dir, err, withoutProgress(out))
		}
		newMod, _ := os.ReadFile(filepath.Join(work, "go.mod"))
		newSum, _ := os.ReadFile(filepath.Join(work, "go.sum"))
		if bytes.Equal(oldMod, newMod) && bytes.Equal(oldSum, newSum) {
			continue
		}
		if check {
			stale = append(stale, fmt.Sprintf("%s: go.mod/go.sum not tidy (run make tidy):\n%s%s", m.Dir,
				lineDiff("go.mod", oldMod, newMod), lineDiff("go.sum", oldSum, newSum)))
			continue
		}
		for name, data := range map[string][]byte{"go.mod": newMod, "go.sum": newSum} {
			dst := filepath.Join(r.Root, m.Dir, name)
			if len(data) == 0 {
				if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
					return nil, err
				}
				continue
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				return nil, err
			}
		}
	}
	return stale, nil
}

// copyModule copies module m's files in the work tree to dir.
func (r *Repo) copyModule(m Module, dir string) error {
	files, err := r.treeFiles(m)
	if err != nil {
		return err
	}
	for _, f := range files {
		tf := f.(treeFile)
		fi, err := os.Lstat(tf.abs)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(tf.abs)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(tf.rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// withoutSiblingSums drops the go.sum lines of the repository's modules.
func withoutSiblingSums(sum []byte) []byte {
	var b bytes.Buffer
	for _, l := range strings.SplitAfter(string(sum), "\n") {
		if !strings.HasPrefix(l, PathPrefix) {
			b.WriteString(l)
		}
	}
	return b.Bytes()
}

// lineDiff lists the lines only in old (-) and only in new (+).
func lineDiff(name string, old, new []byte) string {
	in := func(data []byte) map[string]bool {
		set := map[string]bool{}
		for _, l := range strings.Split(string(data), "\n") {
			set[l] = true
		}
		return set
	}
	o, n := in(old), in(new)
	var b strings.Builder
	for _, l := range strings.Split(string(old), "\n") {
		if l != "" && !n[l] {
			fmt.Fprintf(&b, "  %s: - %s\n", name, l)
		}
	}
	for _, l := range strings.Split(string(new), "\n") {
		if l != "" && !o[l] {
			fmt.Fprintf(&b, "  %s: + %s\n", name, l)
		}
	}
	if b.Len() == 0 && !bytes.Equal(old, new) {
		fmt.Fprintf(&b, "  %s: order or blank lines differ\n", name)
	}
	return b.String()
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func fileURL(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return "file://" + filepath.ToSlash(abs)
}

func withoutVars(env []string, names ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// withoutProgress drops the go command's "go: downloading" lines.
func withoutProgress(out []byte) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "go: downloading ") && !strings.HasPrefix(l, "go: finding ") && !strings.HasPrefix(l, "go: found ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
