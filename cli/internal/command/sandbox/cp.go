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
	// Links: symbolic links recreated (out of a sandbox).
	Links int `json:"links,omitempty"`
	// Skipped: what was not copied (each also said on stderr).
	Skipped []string `json:"skipped,omitempty"`
}

func cpCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "cp",
		Usage: "copy files and directories into or out of a sandbox",
		Description: "Like docker cp and scp: a DST that is a directory, or ends in '/', receives SRC inside it;\n" +
			"otherwise SRC is copied to DST. A directory SRC is copied recursively (SRC/. copies its\n" +
			"contents). DST's parent directory must exist unless -p is given. An ID may be a unique\n" +
			"prefix of one. A SRC that is a symbolic link is followed. Inside a directory copied out of\n" +
			"a sandbox, symbolic links are recreated as links, as docker cp does; copied in, they are\n" +
			"skipped (a sandbox's files cannot be links). FIFOs, sockets and devices are skipped; what\n" +
			"is skipped is said on stderr (and listed by --json). Files keep their mode, less the umask\n" +
			"and any set-id bit. Nothing is written through a symbolic link found below DST.",
		ArgsUsage: "SRC DST (one of them ID:PATH)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "parents", Aliases: []string{"p"}, Usage: "create DST's missing parent directories"},
			&cli.StringFlag{Name: "via", Value: "auto", Usage: "how files move, a `WAY`: direct, s3 (pre-signed URLs) or auto (s3 from 8 MiB with --bucket)"},
			bucketFlag(),
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
			via := cmd.String("via")
			if via != "auto" && via != "direct" && via != "s3" {
				return cliutil.Usagef("--via is auto, direct or s3, not %q", via)
			}
			extra, err := transferOptions(cmd)
			if err != nil {
				return err
			}
			sbx, err := connectID(ctx, cmd, f, id, extra...)
			if err != nil {
				return err
			}
			c := &copier{ctx: ctx, id: sbx.ID(), files: sbx.Files, parents: cmd.Bool("parents"),
				bars: !cmd.Bool("json") && cliutil.IsTerminal(f.IO.Err), errw: f.IO.Err, via: via}
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
	// via is --via: "direct", "s3" or "auto" (the SDK's PrefersURL).
	via string
}

// throughURL reports whether a file of size bytes moves through the
// transfer store (cp_url.go).
func (c *copier) throughURL(size int64) bool {
	return c.via == "s3" || c.via == "auto" && c.files.PrefersURL(size)
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

// upload copies a local file or directory tree to remote path dst. A
// SRC that is a symbolic link is followed; inside a directory, symbolic
// links (which a sandbox's files cannot be made into), FIFOs, sockets and
// devices are skipped and said so on stderr.
func (c *copier) upload(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return localErr(src, err)
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return &cpError{src, "not a regular file or directory"}
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
		case d.Type()&fs.ModeSymlink != 0:
			c.skip(p, "a symbolic link (not followed, and a sandbox's files cannot be links)")
			return nil
		default:
			c.skip(p, "not a regular file, directory or symbolic link")
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
	// O_NONBLOCK: a FIFO put in the file's place does not block the open
	// (and is refused below); reads of a regular file ignore it.
	f, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return localErr(src, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return &cpError{src, "not a regular file"}
	}
	r := io.TeeReader(f, c.bar(st.Size(), path.Base(dst)))
	var werr error
	if c.throughURL(st.Size()) {
		_, werr = c.files.UploadThroughURL(c.ctx, dst, r, st.Size(), rayito.WithMode(uint32(st.Mode().Perm())))
	} else {
		_, werr = c.files.WriteStream(c.ctx, dst, r, rayito.WithMode(uint32(st.Mode().Perm())))
	}
	if werr != nil {
		return c.remoteErr(dst, werr)
	}
	c.out.Files++
	c.out.Bytes += st.Size()
	return nil
}

// localTarget is where a source named base lands for a local DST dst,
// as the directory the user named (dst or its parent, which may be
// reached through symbolic links) and the slash path below it ("" when
// a directory's contents go into dst itself). contents copies a
// directory's contents into an existing dst.
func (c *copier) localTarget(dst, base string, contents bool) (dir, rel string, err error) {
	trailing := strings.HasSuffix(dst, "/") || strings.HasSuffix(dst, string(filepath.Separator))
	clean := filepath.Clean(dst)
	st, err := os.Stat(clean)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", localErr(clean, err)
	}
	switch {
	case exists && st.IsDir() && contents:
		return clean, "", nil
	case exists && st.IsDir():
		return clean, base, nil
	case exists && trailing:
		return "", "", &cpError{dst, "not a directory"}
	case !exists && trailing:
		if err := c.localParent(clean); err != nil {
			return "", "", err
		}
		return clean, base, nil
	}
	if err := c.localParent(filepath.Dir(clean)); err != nil {
		return "", "", err
	}
	return filepath.Dir(clean), filepath.Base(clean), nil
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

// maxLinkHops bounds the symbolic links followed for one path, as the
// kernel's ELOOP does.
const maxLinkHops = 40

// remoteRealPath resolves the symbolic links of the sandbox path p (an
// absolute path, as Stat gives it) one component at a time, as the
// kernel does for a read in the sandbox, and returns the path of what it
// leads to.
func (c *copier) remoteRealPath(p string) (string, error) {
	resolved, rest, hops := "/", strings.Split(strings.TrimPrefix(p, "/"), "/"), 0
	for len(rest) > 0 {
		comp := rest[0]
		rest = rest[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, comp)
		e, err := c.files.Stat(c.ctx, next)
		if err != nil {
			return "", err
		}
		if e.Type != "symlink" {
			resolved = next
			continue
		}
		if hops++; hops > maxLinkHops {
			return "", errTooManyLinks
		}
		if path.IsAbs(e.SymlinkTarget) {
			resolved = "/"
		}
		rest = append(strings.Split(e.SymlinkTarget, "/"), rest...)
	}
	return resolved, nil
}

var errTooManyLinks = errors.New("too many levels of symbolic links")

// download copies a remote file or directory tree to local path dst. A
// SRC that is a symbolic link is followed, as cat and scp do: the content
// and the mode are those of the file it leads to (or it is the directory
// it leads to). Inside a directory, symbolic links are recreated as
// links, as docker cp does, never followed on either side; anything
// else that is neither a regular file nor a directory (a FIFO, a socket,
// a device) is skipped and said so on stderr.
func (c *copier) download(src, dst string) error {
	contents := contentsOf(src)
	src = path.Clean(src)
	e, err := c.files.Stat(c.ctx, src)
	if err != nil {
		return c.remoteErr(src, err)
	}
	name := e.Name
	if e.Type == "symlink" {
		real, err := c.remoteRealPath(e.Path)
		if errors.Is(err, errTooManyLinks) {
			return &cpError{c.id + ":" + src, err.Error()}
		}
		if err == nil {
			e, err = c.files.Stat(c.ctx, real)
		}
		if err != nil {
			return c.remoteErr(src, err)
		}
	}
	if e.Type != "file" && e.Type != "dir" {
		return &cpError{c.id + ":" + src, "not a regular file or directory"}
	}
	dir, rel, err := c.localTarget(dst, name, e.Type == "dir" && contents)
	if err != nil {
		return err
	}
	l, err := openLocalDir(dir)
	if err != nil {
		return err
	}
	if e.Type == "file" {
		err = c.downloadFile(l, e, rel)
	} else {
		err = l.mkdirs(rel, fs.FileMode(e.Mode))
		if err == nil {
			err = c.downloadTree(l, e.Path, rel)
		}
	}
	if cerr := l.close(); err == nil {
		err = cerr
	}
	return err
}

// listDepth is how deep one listing goes; a directory at that depth is
// listed again.
const listDepth = 64

// downloadTree copies the contents of remote directory src into slash
// path rel of l.
func (c *copier) downloadTree(l *localDir, src, rel string) error {
	entries, err := c.files.List(c.ctx, src, listDepth)
	if err != nil {
		return c.remoteErr(src, err)
	}
	base := strings.TrimSuffix(src, "/") + "/"
	for i := range entries {
		en := &entries[i]
		sub := strings.TrimPrefix(en.Path, base)
		if sub == en.Path || sub == "" || path.Clean(sub) != sub || strings.HasPrefix(sub, "../") || sub == ".." || path.IsAbs(sub) {
			continue // not under src: refuse rather than write outside dst
		}
		to := path.Join(rel, sub)
		switch en.Type {
		case "dir":
			if err := l.mkdirs(to, fs.FileMode(en.Mode)); err != nil {
				return err
			}
			if strings.Count(sub, "/")+1 == listDepth {
				if err := c.downloadTree(l, en.Path, to); err != nil {
					return err
				}
			}
		case "file":
			if err := c.downloadFile(l, en, to); err != nil {
				return err
			}
		case "symlink":
			if err := l.symlink(to, en.SymlinkTarget); err != nil {
				return err
			}
			c.out.Links++
		default:
			c.skip(c.id+":"+en.Path, "not a regular file, directory or symbolic link")
		}
	}
	return nil
}

// skip says on stderr that p was not copied, and why.
func (c *copier) skip(p, why string) {
	fmt.Fprintf(c.errw, "rayito: cp: skipping %s: %s\n", p, why)
	c.out.Skipped = append(c.out.Skipped, p)
}

// downloadFile writes remote file e to slash path rel of l with e's mode
// (set-id bits dropped, the umask applied); errors name the destination,
// never the temporary file.
func (c *copier) downloadFile(l *localDir, e *rayito.Entry, rel string) error {
	var r io.ReadCloser
	var err error
	if c.throughURL(e.Size) {
		r, err = c.readThroughURL(e.Path)
	} else {
		r, err = c.files.ReadStream(c.ctx, e.Path)
	}
	if err != nil {
		return c.remoteErr(e.Path, err)
	}
	defer r.Close()
	n, err := l.writeFile(rel, io.TeeReader(r, c.bar(e.Size, e.Name)), fs.FileMode(e.Mode))
	if err != nil {
		var ce *cpError
		if errors.As(err, &ce) {
			return err
		}
		return c.remoteErr(e.Path, err)
	}
	c.out.Files++
	c.out.Bytes += n
	return nil
}

func isExist(err error) bool {
	var rpc *rayito.RPCError
	return errors.As(err, &rpc) && rpc.Code == rayito.CodeAlreadyExists
}
