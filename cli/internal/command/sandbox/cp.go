package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// progressMin is the size from which cp shows a progress bar on a terminal.
const progressMin = 1 << 20

type cpOut struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

func cpCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "cp",
		Usage: "copy files and directories into or out of a sandbox",
		Description: "Like docker cp and scp: a DST that is a directory, or ends in '/', receives SRC inside it;\n" +
			"otherwise SRC is copied to DST. A directory SRC is copied recursively (SRC/. copies its\n" +
			"contents). DST's parent directory must exist unless -p is given.",
		ArgsUsage: "SRC DST (one of them ID:PATH)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "parents", Aliases: []string{"p"}, Usage: "create DST's missing parent directories"},
			tokenFlag(), cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 2 {
				return cliutil.Usagef("want SRC and DST, one of them ID:PATH")
			}
			src, dst := cmd.Args().Get(0), cmd.Args().Get(1)
			sid, spath, sremote := splitRemote(src)
			did, dpath, dremote := splitRemote(dst)
			if sremote == dremote {
				return cliutil.Usagef("exactly one of SRC and DST must be ID:PATH")
			}
			id, rpath := sid, spath
			if dremote {
				id, rpath = did, dpath
			}
			if rpath == "" {
				return cliutil.Usagef("%s: the path after ':' is empty", id)
			}
			sbx, err := connectID(ctx, cmd, f, id)
			if err != nil {
				return err
			}
			c := &copier{ctx: ctx, id: sbx.ID(), files: sbx.Files, parents: cmd.Bool("parents"),
				bars: !cmd.Bool("json") && cliutil.IsTerminal(f.IO.Err), errw: f.IO.Err}
			if dremote {
				err = c.upload(src, dpath)
			} else {
				err = c.download(spath, dst)
			}
			if err != nil {
				return err
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, c.out)
			}
			return nil
		},
	}
}

// splitRemote tells "ID:PATH" from a local path. A local path with a colon
// can be written ./a:b.
func splitRemote(s string) (id, p string, remote bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 || strings.ContainsRune(s[:i], '/') {
		return "", s, false
	}
	return s[:i], s[i+1:], true
}

type copier struct {
	ctx     context.Context
	id      string
	files   *rayito.Files
	parents bool
	bars    bool
	errw    io.Writer
	out     cpOut
}

// cpError is a failure on one side of the copy, named by its path
// (ID:PATH for the sandbox's side).
type cpError struct {
	path string
	msg  string
}

func (e *cpError) Error() string { return "cp: " + e.path + ": " + e.msg }

// localErr words a local failure without Go's operation names or the
// names of temporary files.
func localErr(p string, err error) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &cpError{p, "no such file or directory"}
	case errors.As(err, &errno):
		return &cpError{p, errno.Error()}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &cpError{p, pe.Err.Error()}
	}
	return &cpError{p, err.Error()}
}

func (c *copier) remoteErr(p string, err error) error {
	if errors.Is(err, rayito.ErrNotFound) {
		return &cpError{c.id + ":" + p, "no such file or directory"}
	}
	return &cpError{c.id + ":" + p, cliutil.Describe(err)}
}

func (c *copier) bar(size int64, name string) io.Writer {
	if !c.bars || size < progressMin {
		return io.Discard
	}
	return progressbar.DefaultBytes(size, name)
}

// contentsOf reports whether p asks for a directory's contents ("dir/.").
func contentsOf(p string) bool {
	return p == "." || strings.HasSuffix(p, "/.")
}

// remoteStat returns the remote entry at p, or nil when it does not exist.
func (c *copier) remoteStat(p string) (*rayito.Entry, error) {
	e, err := c.files.Stat(c.ctx, p)
	if errors.Is(err, rayito.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, c.remoteErr(p, err)
	}
	return e, nil
}

// remoteParent checks that the directory dir exists in the sandbox, making
// it with --parents, and returns its absolute path (a relative dir is
// under the user's HOME).
func (c *copier) remoteParent(dir string) (string, error) {
	e, err := c.remoteStat(dir)
	switch {
	case err != nil:
		return "", err
	case e != nil && e.Type == "dir":
		return e.Path, nil
	case e != nil:
		return "", &cpError{c.id + ":" + dir, "not a directory"}
	case !c.parents:
		return "", &cpError{c.id + ":" + dir, "no such directory (-p creates it)"}
	}
	e, err = c.files.MakeDir(c.ctx, dir)
	if err != nil && !isExist(err) {
		return "", c.remoteErr(dir, err)
	}
	if e == nil {
		return c.remoteParent(dir)
	}
	return e.Path, nil
}

// upload copies a local file or directory tree to remote path dst.
func (c *copier) upload(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return localErr(src, err)
	}
	target, err := c.remoteTarget(dst, filepath.Base(filepath.Clean(src)), st.IsDir() && contentsOf(src))
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return c.uploadFile(src, target, st)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return localErr(p, err)
		}
		rel, _ := filepath.Rel(src, p)
		to := path.Join(target, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			if _, err := c.files.MakeDir(c.ctx, to); err != nil && !isExist(err) {
				return c.remoteErr(to, err)
			}
			return nil
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return localErr(p, err)
			}
			return c.uploadFile(p, to, info)
		default:
			fmt.Fprintf(c.errw, "rayito: cp: skipping %s: not a regular file\n", p)
			return nil
		}
	})
}

// remoteTarget is where a source named base lands for DST dst: inside dst
// when it is a directory or ends in '/', else dst itself (its parent must
// exist). contents copies a directory's contents into an existing dst.
func (c *copier) remoteTarget(dst, base string, contents bool) (string, error) {
	trailing := strings.HasSuffix(dst, "/")
	clean := path.Clean(dst)
	e, err := c.remoteStat(clean)
	if err != nil {
		return "", err
	}
	switch {
	case e != nil && e.Type == "dir" && contents:
		return e.Path, nil
	case e != nil && e.Type == "dir":
		return path.Join(e.Path, base), nil
	case e != nil && trailing:
		return "", &cpError{c.id + ":" + dst, "not a directory"}
	case e == nil && trailing:
		dir, err := c.remoteParent(clean)
		if err != nil {
			return "", err
		}
		return path.Join(dir, base), nil
	}
	dir, err := c.remoteParent(path.Dir(clean))
	if err != nil {
		return "", err
	}
	return path.Join(dir, path.Base(clean)), nil
}

func (c *copier) uploadFile(src, dst string, st fs.FileInfo) error {
	f, err := os.Open(src)
	if err != nil {
		return localErr(src, err)
	}
	defer f.Close()
	r := io.TeeReader(f, c.bar(st.Size(), path.Base(dst)))
	if _, err := c.files.WriteStream(c.ctx, dst, r, rayito.WithMode(uint32(st.Mode().Perm()))); err != nil {
		return c.remoteErr(dst, err)
	}
	c.out.Files++
	c.out.Bytes += st.Size()
	return nil
}

// localTarget is remoteTarget for a local DST.
func (c *copier) localTarget(dst, base string, contents bool) (string, error) {
	trailing := strings.HasSuffix(dst, "/") || strings.HasSuffix(dst, string(filepath.Separator))
	clean := filepath.Clean(dst)
	st, err := os.Stat(clean)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", localErr(clean, err)
	}
	switch {
	case exists && st.IsDir() && contents:
		return clean, nil
	case exists && st.IsDir():
		return filepath.Join(clean, base), nil
	case exists && trailing:
		return "", &cpError{dst, "not a directory"}
	case !exists && trailing:
		if err := c.localParent(clean); err != nil {
			return "", err
		}
		return filepath.Join(clean, base), nil
	}
	if err := c.localParent(filepath.Dir(clean)); err != nil {
		return "", err
	}
	return clean, nil
}

func (c *copier) localParent(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && st.IsDir():
		return nil
	case err == nil:
		return &cpError{dir, "not a directory"}
	case !errors.Is(err, fs.ErrNotExist):
		return localErr(dir, err)
	case !c.parents:
		return &cpError{dir, "no such directory (-p creates it)"}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return localErr(dir, err)
	}
	return nil
}

// download copies a remote file or directory tree to local path dst.
func (c *copier) download(src, dst string) error {
	contents := contentsOf(src)
	src = path.Clean(src)
	e, err := c.files.Stat(c.ctx, src)
	if err != nil {
		return c.remoteErr(src, err)
	}
	target, err := c.localTarget(dst, e.Name, e.Type == "dir" && contents)
	if err != nil {
		return err
	}
	if e.Type != "dir" {
		return c.downloadFile(e, target)
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return localErr(target, err)
	}
	entries, err := c.files.List(c.ctx, src, 64)
	if err != nil {
		return c.remoteErr(src, err)
	}
	base := strings.TrimSuffix(e.Path, "/") + "/"
	for i := range entries {
		en := &entries[i]
		rel := strings.TrimPrefix(en.Path, base)
		if rel == en.Path || rel == "" || strings.Contains("/"+rel+"/", "/../") {
			continue // not under src: refuse rather than write outside dst
		}
		local := filepath.Join(target, filepath.FromSlash(rel))
		switch en.Type {
		case "dir":
			if err := os.MkdirAll(local, 0o755); err != nil {
				return localErr(local, err)
			}
		case "file":
			if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
				return localErr(filepath.Dir(local), err)
			}
			if err := c.downloadFile(en, local); err != nil {
				return err
			}
		}
	}
	return nil
}

// downloadFile writes remote file e to dst through a temporary file in
// dst's directory, renamed into place; errors name dst, never the
// temporary file.
func (c *copier) downloadFile(e *rayito.Entry, dst string) error {
	r, err := c.files.ReadStream(c.ctx, e.Path)
	if err != nil {
		return c.remoteErr(e.Path, err)
	}
	defer r.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".rayito-cp-*")
	if err != nil {
		return localErr(filepath.Dir(dst), err)
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(io.MultiWriter(tmp, c.bar(e.Size, e.Name)), r)
	if err != nil {
		_ = tmp.Close()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return localErr(dst, err)
		}
		return c.remoteErr(e.Path, err)
	}
	err = tmp.Sync()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), fs.FileMode(e.Mode).Perm())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return localErr(dst, err)
	}
	c.out.Files++
	c.out.Bytes += n
	return nil
}

func isExist(err error) bool {
	var rpc *rayito.RPCError
	return errors.As(err, &rpc) && rpc.Code == rayito.CodeAlreadyExists
}
