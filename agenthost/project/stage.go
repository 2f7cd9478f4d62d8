package project

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// MaxStageBytes bounds the project files a deploy copies.
const MaxStageBytes = 256 << 20

// ErrStage matches every *StageError.
var ErrStage = errors.New("agent project staging")

// StageError is a project Stage refuses: unreadable, or over MaxStageBytes.
type StageError struct{ Detail string }

func (e *StageError) Error() string { return e.Detail }

// Is matches ErrStage.
func (e *StageError) Is(target error) bool { return target == ErrStage }

// Staged is what Stage copied.
type Staged struct {
	// Files is the number of regular files copied.
	Files int
	// Skipped are the project-relative paths (slash-separated) of what
	// is neither a regular file nor a directory (symbolic links,
	// sockets, devices): never followed, never copied.
	Skipped []string
}

// Stage copies a project into a build context: the regular files and
// directories of dir under ctxDir/app (modes 0644, or 0755 for a file any
// of whose execute bits is set: the same project gives the same context),
// leaving out .git and the directories named in skipDirs wherever they
// are, and host (when not "") as ctxDir/bin/rayito-agent-host, 0755. A
// link is never followed: it is reported in Skipped, for the caller to
// skip (the MicroVM deploy) or refuse (the CDK construct). The rayito
// agent deploy of both targets and the CDK construct stage through it.
func Stage(dir, host, ctxDir string, skipDirs ...string) (*Staged, error) {
	out := &Staged{}
	app := filepath.Join(ctxDir, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		return nil, err
	}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return &StageError{Detail: "the project directory cannot be read"}
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		switch {
		case d.IsDir() && (d.Name() == ".git" || contains(skipDirs, d.Name())):
			return filepath.SkipDir
		case d.IsDir():
			return os.Mkdir(filepath.Join(app, rel), 0o755)
		case !d.Type().IsRegular():
			out.Skipped = append(out.Skipped, filepath.ToSlash(rel))
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if total += info.Size(); total > MaxStageBytes {
			return &StageError{Detail: fmt.Sprintf("the project's files are over %d MiB", MaxStageBytes>>20)}
		}
		out.Files++
		mode := os.FileMode(0o644)
		if info.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		return CopyFile(p, filepath.Join(app, rel), mode)
	})
	if err != nil {
		return nil, err
	}
	if host == "" {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Join(ctxDir, "bin"), 0o755); err != nil {
		return nil, err
	}
	return out, CopyFile(host, filepath.Join(ctxDir, "bin", HostBinary), 0o755)
}

// HostBinary is the agent host's file name (in a context's bin/).
const HostBinary = "rayito-agent-host"

// CopyFile copies the regular file src to the new file dst with mode
// (refusing to replace one).
func CopyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil || !st.Mode().IsRegular() {
		return &StageError{Detail: "not a regular file: " + filepath.Base(src)}
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
