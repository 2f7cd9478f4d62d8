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

func cpCommand(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:      "cp",
		Usage:     "copy files and directories into or out of a sandbox",
		ArgsUsage: "SRC DST (one of them ID:PATH)",
		Flags:     []cli.Flag{tokenFlag, cliutil.JSONFlag},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 2 {
				return cliutil.Usagef("sandbox cp: want SRC and DST, one of them ID:PATH")
			}
			src, dst := cmd.Args().Get(0), cmd.Args().Get(1)
			sid, spath, sremote := splitRemote(src)
			did, dpath, dremote := splitRemote(dst)
			if sremote == dremote {
				return cliutil.Usagef("sandbox cp: exactly one of SRC and DST must be ID:PATH")
			}
			id := sid
			if dremote {
				id = did
			}
			sbx, err := connectID(ctx, cmd, id)
			if err != nil {
				return err
			}
			c := &copier{ctx: ctx, files: sbx.Files, bars: !cmd.Bool("json") && cliutil.IsTerminal(io.Err), errw: io.Err}
			if dremote {
				err = c.upload(src, dpath)
			} else {
				err = c.download(spath, dst)
			}
			if err != nil {
				return err
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(io.Out, c.out)
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
	ctx   context.Context
	files *rayito.Files
	bars  bool
	errw  io.Writer
	out   cpOut
}

func (c *copier) bar(size int64, name string) io.Writer {
	if !c.bars || size < progressMin {
		return io.Discard
	}
	return progressbar.DefaultBytes(size, name)
}

// upload copies a local file or directory tree to remote path dst.
func (c *copier) upload(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return c.uploadFile(src, dst, st)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := path.Join(dst, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			if _, err := c.files.MakeDir(c.ctx, target); err != nil && !isExist(err) {
				return err
			}
			return nil
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return c.uploadFile(p, target, info)
		default:
			fmt.Fprintf(c.errw, "rayito: skipping %s: not a regular file\n", p)
			return nil
		}
	})
}

func (c *copier) uploadFile(src, dst string, st fs.FileInfo) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	r := io.TeeReader(f, c.bar(st.Size(), path.Base(dst)))
	if _, err := c.files.WriteStream(c.ctx, dst, r, rayito.WithMode(uint32(st.Mode().Perm()))); err != nil {
		return err
	}
	c.out.Files++
	c.out.Bytes += st.Size()
	return nil
}

// download copies a remote file or directory tree to local path dst.
func (c *copier) download(src, dst string) error {
	e, err := c.files.Stat(c.ctx, src)
	if err != nil {
		return err
	}
	if e.Type != "dir" {
		return c.downloadFile(e, dst)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := c.files.List(c.ctx, src, 64)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(e.Path, "/") + "/"
	for i := range entries {
		en := &entries[i]
		rel := strings.TrimPrefix(en.Path, base)
		if rel == en.Path || rel == "" || strings.Contains("/"+rel+"/", "/../") {
			continue // not under src: refuse rather than write outside dst
		}
		local := filepath.Join(dst, filepath.FromSlash(rel))
		switch en.Type {
		case "dir":
			if err := os.MkdirAll(local, 0o755); err != nil {
				return err
			}
		case "file":
			if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
				return err
			}
			if err := c.downloadFile(en, local); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *copier) downloadFile(e *rayito.Entry, dst string) error {
	if st, err := os.Stat(dst); err == nil && st.IsDir() {
		dst = filepath.Join(dst, e.Name)
	}
	r, err := c.files.ReadStream(c.ctx, e.Path)
	if err != nil {
		return err
	}
	defer r.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".rayito-cp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(io.MultiWriter(tmp, c.bar(e.Size, e.Name)), r)
	if err == nil {
		err = tmp.Sync()
	}
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
		return err
	}
	c.out.Files++
	c.out.Bytes += n
	return nil
}

func isExist(err error) bool {
	var rpc *rayito.RPCError
	return errors.As(err, &rpc) && rpc.Code.String() == "already_exists"
}
