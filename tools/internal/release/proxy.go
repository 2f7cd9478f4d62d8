package release

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// Source says where a file proxy takes module contents from.
type Source int

const (
	// FromTree zips each module as it is in the work tree: tracked files
	// and untracked ones that .gitignore does not ignore.
	FromTree Source = iota
	// FromTags zips each module from its tag <dir>/<version> (git archive).
	FromTags
)

// WriteProxy writes a file-based Go module proxy (GOPROXY=file://dir)
// serving every released module at its manifest version: list, .info,
// .mod and .zip files, as `go help goproxy` lays them out. An existing dir
// is replaced.
func (r *Repo) WriteProxy(dir string, src Source) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for _, m := range r.Released() {
		if err := r.writeProxyModule(dir, m, src); err != nil {
			return fmt.Errorf("proxy: %s: %w", m.Dir, err)
		}
	}
	return nil
}

func (r *Repo) writeProxyModule(dir string, m Module, src Source) error {
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	mv := module.Version{Path: m.Path, Version: m.Version}
	var zipBuf bytes.Buffer
	var goMod []byte
	when := time.Unix(0, 0).UTC()
	switch src {
	case FromTree:
		files, err := r.treeFiles(m)
		if err != nil {
			return err
		}
		if err := modzip.Create(&zipBuf, mv, files); err != nil {
			return err
		}
		if goMod, err = os.ReadFile(filepath.Join(r.Root, m.Dir, "go.mod")); err != nil {
			return err
		}
	case FromTags:
		tag := m.Tag()
		if err := modzip.CreateFromVCS(&zipBuf, mv, r.Root, tag, m.Dir); err != nil {
			return err
		}
		if goMod, err = r.git("show", tag+":"+m.Dir+"/go.mod"); err != nil {
			return err
		}
		out, err := r.git("log", "-1", "--format=%ct", tag)
		if err != nil {
			return err
		}
		var secs int64
		if _, err := fmt.Sscan(string(out), &secs); err == nil {
			when = time.Unix(secs, 0).UTC()
		}
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, when})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"list":              []byte(m.Version + "\n"),
		m.Version + ".info": info,
		m.Version + ".mod":  goMod,
		m.Version + ".zip":  zipBuf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// treeFiles lists module m's files in the work tree, as git sees them.
func (r *Repo) treeFiles(m Module) ([]modzip.File, error) {
	out, err := r.git("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", m.Dir+"/")
	if err != nil {
		return nil, err
	}
	var files []modzip.File
	seen := map[string]bool{}
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" || seen[rel] {
			continue
		}
		seen[rel] = true
		abs := filepath.Join(r.Root, filepath.FromSlash(rel))
		if _, err := os.Lstat(abs); err != nil {
			continue // tracked but deleted in the work tree
		}
		files = append(files, treeFile{rel: strings.TrimPrefix(rel, m.Dir+"/"), abs: abs})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path() < files[j].Path() })
	return files, nil
}

type treeFile struct{ rel, abs string }

func (f treeFile) Path() string                 { return path.Clean(f.rel) }
func (f treeFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.abs) }
func (f treeFile) Open() (io.ReadCloser, error) { return os.Open(f.abs) }

// git runs git in the repository and returns its standard output.
func (r *Repo) git(args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.Root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
