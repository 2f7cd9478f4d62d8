// Package image is `rayito image`: the MicroVM image's code artifact
// (zip), and the images of the AWS account: publish, list and prune.
package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	build "github.com/rayito-dev/rayito/cli/internal/image"
)

// Command returns `rayito image`.
func Command(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:     "image",
		Usage:    "build the image artifact; publish, list and prune the MicroVM images of your AWS account",
		Commands: []*cli.Command{zipCommand(f), publishCommand(f), listCommand(f), pruneCommand(f)},
	}
}

// zipOut is `image zip --json`.
type zipOut struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

func zipCommand(f *cliutil.Factory) *cli.Command {
	return &cli.Command{
		Name:  "zip",
		Usage: "write the image artifact: a deterministic zip with the Dockerfile at its root",
		Description: "Builds the zip CreateMicrovmImage takes as its code artifact from DIR: the\n" +
			"Dockerfile is DIR/" + build.TemplateName + " with its FROM pinned to the digest in DIR/" + build.DigestName + "\n" +
			"(one line sha256:<64 hex>; get it with `" + build.DigestCommand + "`),\n" +
			"and every other file of DIR goes in as it is. The same tree gives the same bytes.\n" +
			"A symbolic link anywhere in DIR is refused. .dockerignore is not read.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Value: "image", Usage: "the image's source `DIR`"},
			&cli.StringFlag{Name: "out", Value: "rayito-image.zip", Usage: "the zip `FILE` to write (replaced atomically)"},
			cliutil.JSONFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return cliutil.Usagef("zip takes no arguments")
			}
			dir, out := cmd.String("dir"), cmd.String("out")
			if err := checkPaths(dir, out); err != nil {
				return err
			}
			sum, size, err := writeZip(dir, out)
			if err != nil {
				return classify(err)
			}
			if cmd.Bool("json") {
				return cliutil.PrintJSON(f.IO.Out, zipOut{Path: out, SHA256: sum, Bytes: size})
			}
			_, err = fmt.Fprintf(f.IO.Out, "%s  %s (%d bytes)\n", sum, out, size)
			return err
		},
	}
}

// checkPaths refuses, before anything is written, a DIR that is not a
// directory, an --out that exists and is not a regular file, and an
// --out inside DIR (the zip would be part of its own input).
func checkPaths(dir, out string) error {
	if dir == "" {
		return cliutil.Usagef("--dir is empty")
	}
	if out == "" {
		return cliutil.Usagef("--out is empty")
	}
	st, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return cliutil.Usagef("--dir %s: no such directory", dir)
	case err != nil:
		return err
	case st.Mode()&fs.ModeSymlink == 0 && !st.IsDir():
		return cliutil.Usagef("--dir %s: not a directory", dir)
	}
	if st, err := os.Lstat(out); err == nil && !st.Mode().IsRegular() {
		return cliutil.Usagef("--out %s exists and is not a regular file: refusing to replace it", out)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(absDir, absOut); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return cliutil.Usagef("--out %s is inside --dir %s: the zip would be part of its own input", out, dir)
	}
	return nil
}

// writeZip builds dir into a temporary file beside out and renames it to
// out once complete: out is either the old file or the whole new one.
func writeZip(dir, out string) (sum string, size int64, err error) {
	return writeZipWith(dir, out, build.Options{})
}

// writeZipWith is writeZip with the builder's options.
func writeZipWith(dir, out string, opts build.Options) (sum string, size int64, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*.tmp")
	if err != nil {
		return "", 0, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<20)
	if sum, err = build.Build(w, dir, opts); err != nil {
		return "", 0, err
	}
	if err = w.Flush(); err != nil {
		return "", 0, err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return "", 0, err
	}
	if err = tmp.Sync(); err != nil {
		return "", 0, err
	}
	st, err := tmp.Stat()
	if err != nil {
		return "", 0, err
	}
	if err = tmp.Close(); err != nil {
		return "", 0, err
	}
	if err = os.Rename(tmp.Name(), out); err != nil {
		return "", 0, err
	}
	return sum, st.Size(), nil
}

// classify makes a missing or malformed digest, lock or template a usage error
// (exit 2); a refused tree (a link, a device) and I/O failures stay
// failures (exit 1).
func classify(err error) error {
	var (
		de *build.DigestError
		te *build.TemplateError
		le *build.LockError
	)
	if errors.As(err, &de) || errors.As(err, &te) || errors.As(err, &le) {
		return cliutil.Usage(err)
	}
	return err
}
