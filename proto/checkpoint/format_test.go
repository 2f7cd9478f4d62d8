package checkpoint

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"
)

// FuzzParseManifest: whatever the bytes, ParseManifest refuses them with
// ErrUnsupported (quoting none of them) or returns a manifest that is
// version 1 of the format, names home.tar.gz, a well-formed sha256 and a
// size, and encodes back to a manifest that parses the same.
func FuzzParseManifest(f *testing.F) {
	good := &Manifest{Version: 1, Format: Format, Archive: ArchiveName, SHA256: strings.Repeat("0a", 32), Size: 7,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Files: 1, Producer: "test"}
	f.Add(good.Encode())
	for _, s := range []string{`{"version":1}`, `{"version":2}`, `{"version":1,"format":"tar+gzip","archive":"home.tar.gz","sha256":"` + strings.Repeat("f", 64) + `","size":1,"version":2}`, `[]`, `null`, `{"version":1e400}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ParseManifest(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v is not ErrUnsupported", err)
			}
			if len(in) > 8 && strings.Contains(err.Error(), string(in)) {
				t.Fatalf("the error quotes the input: %v", err)
			}
			return
		}
		if m.Version != Version || m.Format != Format || m.Archive != ArchiveName || !ValidSHA256(m.SHA256) || m.Size < 0 {
			t.Fatalf("accepted %+v", m)
		}
		again, err := ParseManifest(bytes.NewReader(m.Encode()))
		if err != nil || again.SHA256 != m.SHA256 || again.Size != m.Size {
			t.Fatalf("re-encoded: %+v, %v", again, err)
		}
	})
}

// TestHeaders: the writer's layout, read back through Walk as written.
func TestHeaders(t *testing.T) {
	t.Parallel()
	mt := time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)
	o := Owner{UID: 1000, GID: 1001}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, GzipLevel)
	tw := tar.NewWriter(zw)
	write := func(h *tar.Header, body string) {
		t.Helper()
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			if _, err := io.WriteString(tw, body); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(DirHeader("d", 0o2755|fs.ModeDir, mt, o), "")
	write(FileHeader("d/f", 0o4750, mt, 3, o), "abc")
	write(SymlinkHeader("l", "d/f", 0o777|fs.ModeSymlink, mt, o), "")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()

	// The raw headers: names, modes (permission bits only), whole seconds,
	// numeric owner only.
	zr, _ := gzip.NewReader(bytes.NewReader(b.Bytes()))
	tr := tar.NewReader(zr)
	want := []struct {
		name string
		typ  byte
		mode int64
	}{{"d/", tar.TypeDir, 0o755}, {"d/f", tar.TypeReg, 0o750}, {"l", tar.TypeSymlink, 0o777}}
	for _, w := range want {
		h, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != w.name || h.Typeflag != w.typ || h.Mode != w.mode || !h.ModTime.Equal(mt.Truncate(time.Second)) ||
			h.Uid != 1000 || h.Gid != 1001 || h.Uname != "" || h.Gname != "" {
			t.Errorf("header %+v, want %+v", h, w)
		}
	}
	var got []string
	err := Walk(bytes.NewReader(b.Bytes()), func(e Entry, body io.Reader) error {
		s := e.Path
		if body != nil {
			c, _ := io.ReadAll(body)
			s += "=" + string(c)
		}
		got = append(got, s)
		return nil
	})
	if err != nil || strings.Join(got, ",") != "d,d/f=abc,l" {
		t.Fatalf("walk: %v, %v", got, err)
	}
	p, err := Scan(bytes.NewReader(b.Bytes()), 0)
	if err != nil || p.Files != 1 || p.Directories != 1 || p.Symlinks != 1 || p.ContentBytes != 3 || p.Skipped != (Skipped{}) {
		t.Fatalf("scan: %+v, %v", p, err)
	}
}
