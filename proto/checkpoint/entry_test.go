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

func TestCleanPath(t *testing.T) {
	t.Parallel()
	ok := map[string]string{
		"a":           "a",
		"./a/b/":      "a/b",
		"a//b/./c":    "a/b/c",
		"./":          "",
		".":           "",
		"é/ü":         "é/ü",
		`a\..\b`:      `a\..\b`, // a backslash is a name character on Linux
		"..a/b..":     "..a/b..",
		"a/.../b":     "a/.../b",
		".hidden/.x/": ".hidden/.x",
	}
	for in, want := range ok {
		got, err := CleanPath(in)
		if err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := []string{"/abs", "/", "../x", "a/../../x", "a/..", "..", "./../x", "a\x00b", strings.Repeat("a", MaxPathLen+1), strings.Repeat("a/", MaxDepth+1)}
	for _, in := range bad {
		if got, err := CleanPath(in); !errors.Is(err, ErrUnsafe) {
			t.Errorf("CleanPath(%.40q) = %q, %v; want ErrUnsafe", in, got, err)
		}
	}
}

func TestCheckHeader(t *testing.T) {
	t.Parallel()
	mt := time.Unix(1700000000, 0)
	cases := []struct {
		name string
		h    tar.Header
		want Entry
		err  bool
	}{
		{"file", tar.Header{Name: "a/b", Typeflag: tar.TypeReg, Mode: 0o640, Size: 3, ModTime: mt},
			Entry{Kind: KindFile, Path: "a/b", Perm: 0o640, Size: 3, ModTime: mt}, false},
		{"old file type", tar.Header{Name: "f", Typeflag: tar.TypeRegA, Mode: 0o600},
			Entry{Kind: KindFile, Path: "f", Perm: 0o600}, false},
		{"setuid dropped", tar.Header{Name: "s", Typeflag: tar.TypeReg, Mode: 0o4755},
			Entry{Kind: KindFile, Path: "s", Perm: 0o755, Sanitized: true}, false},
		{"setgid sticky dir", tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o3777},
			Entry{Kind: KindDir, Path: "d", Perm: 0o777, Sanitized: true}, false},
		{"symlink anywhere", tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow", Mode: 0o777},
			Entry{Kind: KindSymlink, Path: "l", Perm: 0o777, Target: "/etc/shadow"}, false},
		{"hard link skipped", tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"},
			Entry{Kind: KindSkip, Skip: SkipHardLink, Path: "h"}, false},
		{"char device skipped", tar.Header{Name: "c", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
			Entry{Kind: KindSkip, Skip: SkipSpecial, Path: "c"}, false},
		{"block device skipped", tar.Header{Name: "b", Typeflag: tar.TypeBlock}, Entry{Kind: KindSkip, Skip: SkipSpecial, Path: "b"}, false},
		{"fifo skipped", tar.Header{Name: "p", Typeflag: tar.TypeFifo}, Entry{Kind: KindSkip, Skip: SkipSpecial, Path: "p"}, false},
		{"other skipped", tar.Header{Name: "v", Typeflag: 'V'}, Entry{Kind: KindSkip, Skip: SkipOther, Path: "v"}, false},
		{"root skipped", tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, Entry{Kind: KindSkip, Skip: SkipRoot}, false},
		{"absolute", tar.Header{Name: "/abs", Typeflag: tar.TypeReg}, Entry{}, true},
		{"dotdot", tar.Header{Name: "../x", Typeflag: tar.TypeReg}, Entry{}, true},
		{"dotdot inside", tar.Header{Name: "a/../../x", Typeflag: tar.TypeDir}, Entry{}, true},
		{"dotdot in a skipped kind", tar.Header{Name: "../dev", Typeflag: tar.TypeChar}, Entry{}, true},
		{"negative size", tar.Header{Name: "n", Typeflag: tar.TypeReg, Size: -1}, Entry{}, true},
		{"empty link", tar.Header{Name: "l", Typeflag: tar.TypeSymlink}, Entry{}, true},
		{"NUL in link", tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "a\x00b"}, Entry{}, true},
		{"file named as dir", tar.Header{Name: "f/", Typeflag: tar.TypeReg}, Entry{}, true},
	}
	for _, tc := range cases {
		got, err := CheckHeader(&tc.h)
		if tc.err {
			if !errors.Is(err, ErrUnsafe) {
				t.Errorf("%s: %+v, %v; want ErrUnsafe", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v\nwant %+v", tc.name, got, err, tc.want)
		}
	}
}

// tgz builds a tar.gz of hs; a regular file's content is its name
// repeated to its size.
func tgz(t testing.TB, hs ...tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, h := range hs {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size > 0 {
			if _, err := tw.Write(bytes.Repeat([]byte{'x'}, int(h.Size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestScan(t *testing.T) {
	t.Parallel()
	reg := func(name string, size int64) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}
	}
	good := tgz(t,
		tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755},
		reg("d/f", 10),
		tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "d"},
		tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "d/f"},
		tar.Header{Name: "p", Typeflag: tar.TypeFifo},
		tar.Header{Name: "s", Typeflag: tar.TypeReg, Mode: 0o4755},
		// A link replaced by a directory: what follows goes in the
		// directory.
		tar.Header{Name: "l2", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		tar.Header{Name: "l2/", Typeflag: tar.TypeDir, Mode: 0o700},
		reg("l2/x", 1),
	)
	p, err := Scan(bytes.NewReader(good), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Plan{Files: 3, Directories: 2, Symlinks: 2, ContentBytes: 11, Skipped: Skipped{Special: 1, HardLinks: 1, ModesSanitized: 1}}
	if p != want {
		t.Errorf("plan %+v, want %+v", p, want)
	}
	if _, err := Scan(bytes.NewReader(good), 10); !errors.Is(err, ErrTooBig) || !errors.Is(err, ErrUnsafe) {
		t.Errorf("bound 10: %v, want ErrTooBig", err)
	}

	refused := map[string][]byte{
		"dotdot":   tgz(t, reg("ok", 1), reg("../x", 1)),
		"absolute": tgz(t, reg("/etc/cron.d/x", 1)),
		"through a link of the archive": tgz(t,
			tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
			reg("a/passwd", 1)),
		"through a link, deeper": tgz(t,
			tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755},
			tar.Header{Name: "d/a", Typeflag: tar.TypeSymlink, Linkname: "../.."},
			tar.Header{Name: "d/a/b/", Typeflag: tar.TypeDir, Mode: 0o755}),
		"link through a link": tgz(t,
			tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/"},
			tar.Header{Name: "a/etc", Typeflag: tar.TypeSymlink, Linkname: "x"}),
		"hard link through a link": tgz(t,
			tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/"},
			tar.Header{Name: "a/x", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"}),
		"not gzip":  []byte("plain text, no archive"),
		"truncated": good[:len(good)/2],
		"gzip, not tar": func() []byte {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(bytes.Repeat([]byte("not a tar header "), 100))
			zw.Close()
			return b.Bytes()
		}(),
	}
	for name, a := range refused {
		if _, err := Scan(bytes.NewReader(a), 0); !errors.Is(err, ErrUnsafe) {
			t.Errorf("%s: %v, want ErrUnsafe", name, err)
		}
	}
}

func TestManifest(t *testing.T) {
	t.Parallel()
	m := &Manifest{Version: 1, Format: Format, Archive: ArchiveName, SHA256: strings.Repeat("ab", 32), Size: 42,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Files: 3, Producer: "rayd/test"}
	got, err := ParseManifest(bytes.NewReader(m.Encode()))
	if err != nil || *got != *m {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	// A later field of version 1 is ignored.
	if _, err := ParseManifest(strings.NewReader(`{"version":1,"format":"tar+gzip","archive":"home.tar.gz","sha256":"` + strings.Repeat("0", 64) + `","size":0,"new":true}`)); err != nil {
		t.Errorf("unknown field: %v", err)
	}
	bad := map[string]string{
		"version 2":     `{"version":2,"format":"tar+gzip","archive":"home.tar.gz","sha256":"` + strings.Repeat("0", 64) + `","size":0}`,
		"version 0":     `{"version":0}`,
		"no version":    `{"format":"tar+gzip"}`,
		"not json":      `home.tar.gz`,
		"empty":         ``,
		"version text":  `{"version":"1"}`,
		"upper sha":     `{"version":1,"format":"tar+gzip","archive":"home.tar.gz","sha256":"` + strings.Repeat("A", 64) + `","size":0}`,
		"short sha":     `{"version":1,"format":"tar+gzip","archive":"home.tar.gz","sha256":"abc","size":0}`,
		"other archive": `{"version":1,"format":"tar+gzip","archive":"../x","sha256":"` + strings.Repeat("0", 64) + `","size":0}`,
		"other format":  `{"version":1,"format":"zip","archive":"home.tar.gz","sha256":"` + strings.Repeat("0", 64) + `","size":0}`,
		"negative size": `{"version":1,"format":"tar+gzip","archive":"home.tar.gz","sha256":"` + strings.Repeat("0", 64) + `","size":-1}`,
		"too large":     `{"version":1,"pad":"` + strings.Repeat("x", MaxManifestSize) + `"}`,
	}
	for name, in := range bad {
		if _, err := ParseManifest(strings.NewReader(in)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
}

// FuzzCheckHeader: whatever the header, CheckHeader either refuses it or
// returns an entry that stays under the root: a clean relative path with
// no "..", permission bits only, a link target without NUL.
func FuzzCheckHeader(f *testing.F) {
	for _, s := range []string{"a", "./a/b/", "../x", "/abs", "a/../b", "a//b/.", "", ".", "é", "a\x00b"} {
		f.Add(s, byte(tar.TypeReg), int64(0o4755), int64(1), "t")
		f.Add(s, byte(tar.TypeSymlink), int64(0o777), int64(0), "/etc/shadow")
		f.Add(s, byte(tar.TypeLink), int64(0), int64(0), "../../etc/shadow")
	}
	f.Fuzz(func(t *testing.T, name string, typ byte, mode, size int64, link string) {
		e, err := CheckHeader(&tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: size, Linkname: link})
		if err != nil {
			if !errors.Is(err, ErrUnsafe) {
				t.Fatalf("error %v is not ErrUnsafe", err)
			}
			if strings.Contains(err.Error(), name) && len(name) > 3 {
				t.Fatalf("the error quotes the name: %v", err)
			}
			return
		}
		checkSafe(t, e)
	})
}

func checkSafe(t *testing.T, e Entry) {
	t.Helper()
	p := e.Path
	if strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//") || strings.IndexByte(p, 0) >= 0 || len(p) > MaxPathLen {
		t.Fatalf("unsafe path %q", p)
	}
	for c := range strings.SplitSeq(p, "/") {
		if p != "" && (c == ".." || c == "." || c == "") {
			t.Fatalf("unsafe component in %q", p)
		}
	}
	if p == "" && e.Kind != KindSkip {
		t.Fatalf("the root as %v", e.Kind)
	}
	if e.Perm&^fs.ModePerm != 0 {
		t.Fatalf("mode %o has more than permission bits", e.Perm)
	}
	if e.Kind == KindSymlink && (e.Target == "" || strings.IndexByte(e.Target, 0) >= 0) {
		t.Fatalf("bad target %q", e.Target)
	}
	if e.Kind == KindFile && e.Size < 0 {
		t.Fatalf("negative size")
	}
}

// FuzzScan: any bytes, gzip-compressed, through the whole-archive check:
// no panic, only ErrUnsafe as an error, and when accepted, every entry
// safe and none under a link the archive made.
func FuzzScan(f *testing.F) {
	f.Add(tgz(f, tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, tar.Header{Name: "a/passwd", Typeflag: tar.TypeReg, Size: 1}))
	f.Add(tgz(f, tar.Header{Name: "d/", Typeflag: tar.TypeDir}, tar.Header{Name: "d/f", Typeflag: tar.TypeReg, Size: 5}))
	f.Add(tgz(f, tar.Header{Name: "../x", Typeflag: tar.TypeReg}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		// Fuzz the tar layer: the seed corpus is already gzip; make
		// both shapes reach the tar reader.
		inputs := [][]byte{raw}
		if zr, err := gzip.NewReader(bytes.NewReader(raw)); err == nil {
			zr.Close()
		} else {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(raw)
			zw.Close()
			inputs = append(inputs, b.Bytes())
		}
		for _, in := range inputs {
			links := map[string]bool{}
			err := Walk(bytes.NewReader(in), func(e Entry, _ io.Reader) error {
				checkSafe(t, e)
				if underLink(links, e.Path) {
					t.Fatalf("%q accepted under a link", e.Path)
				}
				if e.Kind == KindSymlink {
					links[e.Path] = true
				} else if e.Kind == KindDir || e.Kind == KindFile {
					delete(links, e.Path)
				}
				return nil
			})
			if err != nil && !errors.Is(err, ErrUnsafe) {
				t.Fatalf("error %v is not ErrUnsafe", err)
			}
		}
	})
}
