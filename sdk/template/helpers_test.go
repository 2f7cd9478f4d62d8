package template

import (
	"archive/zip"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// writeTree makes files under dir: a value starting with "->" makes a
// symbolic link to the rest; a name ending with "/" makes a directory.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(name, "/")))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(name, "/"):
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(content, "->"):
			if err := os.Symlink(strings.TrimPrefix(content, "->"), p); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// zipEntry is what a test reads back from an artifact.
type readEntry struct {
	mode fs.FileMode
	data string
	hdr  *zip.FileHeader
}

func readZip(t *testing.T, a *Artifact) (map[string]readEntry, []string) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := a.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]readEntry{}
	var names []string
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = readEntry{mode: f.Mode(), data: string(b), hdr: &f.FileHeader}
		names = append(names, f.Name)
	}
	return out, names
}

// contextFiles lists the artifact's context entries that are not
// directories, relative to the context.
func contextFiles(t *testing.T, a *Artifact) []string {
	t.Helper()
	ents, _ := readZip(t, a)
	var out []string
	for n := range ents {
		if strings.HasPrefix(n, "context/") && !strings.HasSuffix(n, "/") {
			out = append(out, strings.TrimPrefix(n, "context/"))
		}
	}
	sort.Strings(out)
	return out
}
