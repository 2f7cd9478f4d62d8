package e2b

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Caps of the files E2B's SDK uploads for COPY steps (a tar, gzipped or
// not, of the paths a COPY names, relative to its context).
const (
	// MaxTemplateUploadBytes caps one upload as sent.
	MaxTemplateUploadBytes = 512 << 20
	// MaxTemplateFilesBytes caps the files of one upload once unpacked.
	MaxTemplateFilesBytes = 1 << 30
	// MaxTemplateFilesEntries caps the entries of one upload.
	MaxTemplateFilesEntries = 100_000
)

// ErrTemplateFiles is what every refusal of an uploaded archive matches.
var ErrTemplateFiles = errors.New("e2b: template files refused")

func filesErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrTemplateFiles, fmt.Sprintf(format, args...))
}

// tarVisitor receives each checked entry: a directory (r nil) or a
// regular file with its contents.
type tarVisitor func(name string, dir bool, mode fs.FileMode, r io.Reader) error

// walkTemplateFiles reads an uploaded archive and checks every entry
// before handing it to visit: a tar, gzipped or not; only directories and
// regular files (a symbolic or hard link, a device, a fifo is refused);
// names clean, relative and inside the context (no "..", no absolute
// path, no NUL or backslash); no name twice; at most
// MaxTemplateFilesEntries entries and maxBytes bytes of files. It returns
// the bytes of files. Errors match ErrTemplateFiles and never name an
// entry.
func walkTemplateFiles(r io.Reader, maxBytes int64, visit tarVisitor) (int64, error) {
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return 0, filesErr("not a gzip stream")
		}
		defer zr.Close()
		zr.Multistream(false)
		src = zr
	}
	tr := tar.NewReader(src)
	seen := map[string]bool{}
	var total int64
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, filesErr("not a tar archive")
		}
		n++
		if n > MaxTemplateFilesEntries {
			return 0, filesErr("more than %d entries", MaxTemplateFilesEntries)
		}
		name, ok := cleanTarName(h.Name)
		if !ok {
			return 0, filesErr("an entry's name is not a clean relative path inside the context")
		}
		if seen[name] {
			return 0, filesErr("an entry is in the archive twice")
		}
		seen[name] = true
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := visit(name, true, mode|0o700, nil); err != nil {
				return 0, err
			}
		case tar.TypeReg:
			if h.Size < 0 || total+h.Size > maxBytes {
				return 0, filesErr("the files are larger than %d bytes", maxBytes)
			}
			total += h.Size
			if err := visit(name, false, mode|0o600, io.LimitReader(tr, h.Size)); err != nil {
				return 0, err
			}
		case tar.TypeSymlink, tar.TypeLink:
			return 0, filesErr("links are not supported in a template's files (copy what they point to)")
		default:
			return 0, filesErr("only files and directories are supported in a template's files")
		}
	}
	if n == 0 {
		return 0, filesErr("the archive is empty")
	}
	return total, nil
}

// cleanTarName: "./a/b/" is "a/b"; absolute names, "..", empty parts,
// NUL and backslashes are refused.
func cleanTarName(name string) (string, bool) {
	if name == "" || len(name) > 4096 || strings.ContainsAny(name, "\x00\\") || strings.HasPrefix(name, "/") {
		return "", false
	}
	name = strings.TrimSuffix(name, "/")
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	if name == "" || name == "." {
		return "", false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return "", false
		}
	}
	return name, path.Clean(name) == name
}

// checkTemplateFiles checks an uploaded archive whole without keeping it.
func checkTemplateFiles(r io.Reader) error {
	_, err := walkTemplateFiles(r, MaxTemplateFilesBytes, func(_ string, _ bool, _ fs.FileMode, r io.Reader) error {
		if r != nil {
			if _, err := io.Copy(io.Discard, r); err != nil {
				return filesErr("the archive is truncated")
			}
		}
		return nil
	})
	return err
}

// extractTemplateFiles unpacks an archive into dir (which must exist,
// empty) through an os.Root: nothing lands outside it whatever the
// archive says. A file's parent directories are made as needed. At most
// maxBytes of files; it returns how many it wrote.
func extractTemplateFiles(r io.Reader, dir string, maxBytes int64) (int64, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	return walkTemplateFiles(r, maxBytes, func(name string, isDir bool, mode fs.FileMode, r io.Reader) error {
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return filesErr("a directory cannot be made")
			}
		}
		if isDir {
			if err := root.Mkdir(name, mode); err != nil && !errors.Is(err, fs.ErrExist) {
				return filesErr("a directory cannot be made")
			}
			fi, err := root.Lstat(name)
			if err != nil || !fi.IsDir() {
				return filesErr("a directory cannot be made")
			}
			return nil
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return filesErr("a file cannot be written (a name used twice?)")
		}
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return filesErr("a file cannot be written")
		}
		return nil
	})
}
