package release

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Plan is what a release would do.
type Plan struct {
	Tags       []string // the tags it creates, in dependency order
	Unchanged  []string // released modules already tagged at their version, unchanged since
	Unreleased []string // "dir: why" for modules that are never tagged
}

// Plan works out the release: every released module whose manifest
// version has no tag yet gets one. It refuses (returning every problem) a
// module that changed since the tag of its manifest version (its version
// must be bumped first), and a module of the plan that requires a sibling
// at a version that is neither tagged nor the one the plan tags.
func (r *Repo) Plan() (*Plan, error) {
	order, err := r.Ordered()
	if err != nil {
		return nil, err
	}
	p := &Plan{}
	planned := map[string]string{} // dir -> version
	var errs []error
	for _, m := range order {
		if !m.Released {
			p.Unreleased = append(p.Unreleased, m.Dir+": "+m.Why)
			continue
		}
		if !r.tagged(m.Tag()) {
			p.Tags = append(p.Tags, m.Tag())
			planned[m.Dir] = m.Version
			continue
		}
		if changed, err := r.changedSince(m.Tag(), m.Dir); err != nil {
			errs = append(errs, err)
		} else if changed {
			errs = append(errs, fmt.Errorf("%s changed since %s: bump its version in versions.yaml", m.Dir, m.Tag()))
		} else {
			p.Unchanged = append(p.Unchanged, m.Tag())
		}
	}
	for _, m := range order {
		if _, ok := planned[m.Dir]; !ok {
			continue
		}
		reqs, err := r.siblingReqs(m)
		if err != nil {
			return nil, err
		}
		for _, req := range reqs {
			if planned[req.sib.Dir] == req.version || r.tagged(req.sib.Dir+"/"+req.version) {
				continue
			}
			errs = append(errs, fmt.Errorf("%s requires %s %s, which is neither tagged nor in this release", m.Dir, req.sib.Dir, req.version))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

func (r *Repo) tagged(tag string) bool {
	_, err := r.git("rev-parse", "-q", "--verify", "refs/tags/"+tag)
	return err == nil
}

// changedSince says whether dir differs between tag and the work tree.
func (r *Repo) changedSince(tag, dir string) (bool, error) {
	cmd := exec.Command("git", "diff", "--quiet", tag, "--", dir)
	cmd.Dir = r.Root
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return true, nil
	default:
		return false, fmt.Errorf("git diff %s -- %s: %w", tag, dir, err)
	}
}

// Snapshot copies the work tree (tracked files and untracked ones that
// .gitignore does not ignore) into a new repository at dst, commits it
// and tags every released module at its manifest version there, as a
// release would. It returns the copy.
func (r *Repo) Snapshot(dst string) (*Repo, error) {
	out, err := r.git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" {
			continue
		}
		src := filepath.Join(r.Root, filepath.FromSlash(rel))
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or not a regular file
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		to := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
			return nil, err
		}
	}
	snap := &Repo{Root: dst, Modules: r.Modules}
	if _, err := snap.git("init", "-q", "-b", "main"); err != nil {
		return nil, err
	}
	if _, err := snap.git("add", "-A"); err != nil {
		return nil, err
	}
	if _, err := snap.git("-c", "user.name=release", "-c", "user.email=release@localhost", "-c", "commit.gpgsign=false",
		"commit", "-q", "--no-verify", "-m", "snapshot"); err != nil {
		return nil, err
	}
	for _, m := range snap.Released() {
		if _, err := snap.git("tag", m.Tag()); err != nil {
			return nil, err
		}
	}
	return snap, nil
}
