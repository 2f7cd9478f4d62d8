package e2b

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/checkpoint"
)

func randomString(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkSnapshotDir checks that dir/id is a checkpoint of the open format
// as rayd writes one: a private directory of three private files, a
// manifest that parses and names the archive's size and sha256, an
// archive whose entries have the format's layout and pass its checks. It
// returns the manifest and the archive's headers.
func checkSnapshotDir(t *testing.T, dir, id string) (*checkpoint.Manifest, []tar.Header) {
	t.Helper()
	d := filepath.Join(dir, id)
	fi, err := os.Lstat(d)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("snapshot %s: %v %v", id, fi, err)
	}
	ents, _ := os.ReadDir(d)
	var names []string
	for _, en := range ents {
		fi, _ := en.Info()
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s/%s: %v", id, en.Name(), fi.Mode())
		}
		names = append(names, en.Name())
	}
	if !slices.Equal(names, []string{metaName, checkpoint.ArchiveName, checkpoint.ManifestName}) {
		t.Fatalf("snapshot %s holds %v", id, names)
	}
	mf, _ := os.Open(filepath.Join(d, checkpoint.ManifestName))
	defer mf.Close()
	man, err := checkpoint.ParseManifest(mf)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(d, checkpoint.ArchiveName))
	sum := sha256.Sum256(a)
	if man.Version != 1 || man.SHA256 != hex.EncodeToString(sum[:]) || man.Size != int64(len(a)) || man.CreatedAt.IsZero() {
		t.Fatalf("manifest %+v of an archive of %d bytes", man, len(a))
	}
	plan, err := checkpoint.Scan(bytes.NewReader(a), 0)
	if err != nil || plan.Files != man.Files || plan.Directories != man.Directories || plan.Symlinks != man.Symlinks || plan.ContentBytes != man.ContentBytes {
		t.Fatalf("scan %+v, %v; manifest %+v", plan, err, man)
	}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var hs []tar.Header
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		// rayd's layout: relative names, no root entry, "/" after a
		// directory only, permission bits only, whole seconds, numeric
		// owner only, no other kind.
		if strings.HasPrefix(h.Name, "./") || strings.HasPrefix(h.Name, "/") || h.Name == "" ||
			(h.Typeflag == tar.TypeDir) != strings.HasSuffix(h.Name, "/") ||
			h.Mode&^0o777 != 0 || h.ModTime.Nanosecond() != 0 || h.Uname != "" || h.Gname != "" ||
			(h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeSymlink) {
			t.Fatalf("entry %+v is not laid out as rayd's", h)
		}
		hs = append(hs, *h)
	}
	return man, hs
}

// gnuTar is a tar stream as GNU tar makes one of a HOME: the root as
// "./" first, then "./"-prefixed names, owner names, sub-second times,
// and kinds the format does not hold.
func gnuTar(t testing.TB, hs ...tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		h.Format = tar.FormatGNU
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bytes.Repeat([]byte{'x'}, int(h.Size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	// GNU tar pads to its record size.
	b.Write(make([]byte, 10240-b.Len()%10240))
	return b.Bytes()
}

// TestSnapshotLayout: the sandbox's tar is re-packed as rayd's Checkpoint
// lays a HOME out; what the format does not hold is left out.
func TestSnapshotLayout(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(o *Options) { o.SnapshotDir = dir })
	src := e.create(nil)
	mt := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	u := func(h tar.Header) tar.Header {
		h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime = 1000, 1000, "user", "user", mt
		return h
	}
	e.f.boxes[src.SandboxID].tarOut = gnuTar(t,
		u(tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o750}),
		u(tar.Header{Name: "./d/", Typeflag: tar.TypeDir, Mode: 0o2775}),
		u(tar.Header{Name: "./d/f", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 5}),
		tar.Header{Name: "./d/root-owned", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1, ModTime: mt, Uname: "root"},
		u(tar.Header{Name: "./l", Typeflag: tar.TypeSymlink, Linkname: "d/f", Mode: 0o777}),
		u(tar.Header{Name: "./h", Typeflag: tar.TypeLink, Linkname: "./d/f"}),
		u(tar.Header{Name: "./p", Typeflag: tar.TypeFifo, Mode: 0o644}),
		u(tar.Header{Name: "./null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}),
		u(tar.Header{Name: "./" + strings.Repeat("long/", 30) + "x", Typeflag: tar.TypeReg, Mode: 0o600, Size: 2}),
	)
	snap := e.snapshot(src.SandboxID, nil)
	man, hs := checkSnapshotDir(t, dir, snap.SnapshotID)
	type ent struct {
		name string
		typ  byte
		mode int64
	}
	var got []ent
	for _, h := range hs {
		if h.Uid != 1000 || h.Gid != 1000 || !h.ModTime.Equal(mt) {
			t.Errorf("%s: owner %d:%d, time %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		got = append(got, ent{h.Name, h.Typeflag, h.Mode})
	}
	want := []ent{{"d/", tar.TypeDir, 0o775}, {"d/f", tar.TypeReg, 0o755}, {"d/root-owned", tar.TypeReg, 0o644},
		{"l", tar.TypeSymlink, 0o777}, {strings.Repeat("long/", 30) + "x", tar.TypeReg, 0o600}}
	if !slices.Equal(got, want) {
		t.Fatalf("entries\n%v\nwant\n%v", got, want)
	}
	if man.Files != 3 || man.Directories != 1 || man.Symlinks != 1 || man.ContentBytes != 8 {
		t.Fatalf("manifest %+v", man)
	}

	// A sandbox whose tar names a path out of HOME: no snapshot at all.
	for _, bad := range []tar.Header{
		{Name: "../x", Typeflag: tar.TypeReg, Size: 1},
		{Name: "/etc/passwd", Typeflag: tar.TypeReg, Size: 1},
	} {
		e.f.boxes[src.SandboxID].tarOut = gnuTar(t, tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, bad)
		e.do("POST", "/sandboxes/"+src.SandboxID+"/snapshots", nil).errBody(t, 500, "is not usable")
	}
	e.f.boxes[src.SandboxID].tarOut = gnuTar(t,
		tar.Header{Name: "./a", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		tar.Header{Name: "./a/passwd", Typeflag: tar.TypeReg, Size: 1})
	e.do("POST", "/sandboxes/"+src.SandboxID+"/snapshots", nil).errBody(t, 500, "through a symbolic link")
	e.f.boxes[src.SandboxID].tarOut = []byte("not a tar archive at all, not at all, not at all")
	e.do("POST", "/sandboxes/"+src.SandboxID+"/snapshots", nil).errBody(t, 500, "is not usable")
	// A tar that ends well without an archive (not GNU tar's, an
	// option it does not know): no empty snapshot.
	e.f.boxes[src.SandboxID].tarOut = []byte{}
	e.do("POST", "/sandboxes/"+src.SandboxID+"/snapshots", nil).errBody(t, 500, "sent no archive")
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d entries in the snapshot dir, want the one snapshot", len(ents))
	}
}

// writeCheckpoint writes dir/id as a checkpoint of the open format with
// the shared package's layout (as rayd's Pack), the archive of hs (a
// regular file's content is "x" repeated), and its manifest.
func writeCheckpoint(t *testing.T, dir, id string, hs ...*tar.Header) {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, checkpoint.GzipLevel)
	tw := tar.NewWriter(zw)
	for _, h := range hs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte{'x'}, int(h.Size)))
		}
	}
	tw.Close()
	zw.Close()
	sum := sha256.Sum256(b.Bytes())
	man := &checkpoint.Manifest{Version: 1, Format: checkpoint.Format, Archive: checkpoint.ArchiveName, SHA256: hex.EncodeToString(sum[:]),
		Size: int64(b.Len()), CreatedAt: time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC), Producer: "rayd/test"}
	d := filepath.Join(dir, id)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, checkpoint.ArchiveName), b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, checkpoint.ManifestName), man.Encode(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotFromCheckpoint: a checkpoint written by another program
// (rayd's layout, no e2b.json) copied into the snapshot directory is a
// snapshot of the default template; what reaches the sandbox is checked
// and sanitized, and a crafted one reaches nothing.
func TestSnapshotFromCheckpoint(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(o *Options) {
		o.SnapshotDir = dir
		o.Templates = map[string]string{"base": "img-base", "other": "img-other"}
	})
	mt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := checkpoint.Owner{UID: 1000, GID: 1000}
	hard := checkpoint.FileHeader("hard", 0o644, mt, 0, o)
	hard.Typeflag, hard.Linkname = tar.TypeLink, "/etc/shadow"
	dev := checkpoint.FileHeader("dev", 0o666, mt, 0, o)
	dev.Typeflag, dev.Devmajor, dev.Devminor = tar.TypeBlock, 8, 0
	fifo := checkpoint.FileHeader("fifo", 0o644, mt, 0, o)
	fifo.Typeflag = tar.TypeFifo
	suid := checkpoint.FileHeader("bin/suid", 0o755, mt, 4, o)
	suid.Mode = 0o6755
	writeCheckpoint(t, dir, "snap-from-rayd",
		checkpoint.DirHeader("bin", 0o755, mt, o),
		suid,
		checkpoint.FileHeader("notes.txt", 0o640, mt, 3, o),
		checkpoint.SymlinkHeader("link", "/etc/passwd", 0o777, mt, o),
		hard, dev, fifo,
	)
	var listed []snapshotOut
	e.do("GET", "/snapshots", nil).json(t, &listed)
	if len(listed) != 1 || listed[0].SnapshotID != "snap-from-rayd" || listed[0].Names == nil || len(listed[0].Names) != 0 {
		t.Fatalf("listed %+v", listed)
	}
	made := e.create(map[string]string{"templateID": "snap-from-rayd"})
	if made.TemplateID != DefaultTemplateID || e.f.specs[len(e.f.specs)-1].Template != "img-base" {
		t.Fatalf("create from a checkpoint: %+v, spec %+v", made, e.f.specs[len(e.f.specs)-1])
	}
	if got := e.f.filesOf(made.SandboxID); !maps.Equal(got, map[string]string{"bin/suid": "xxxx", "notes.txt": "xxx"}) {
		t.Fatalf("restored files %v", got)
	}
	type ent struct {
		name string
		typ  byte
		mode int64
		link string
	}
	var got []ent
	for _, h := range e.f.boxes[made.SandboxID].received {
		got = append(got, ent{h.Name, h.Typeflag, h.Mode, h.Linkname})
	}
	// The setuid and setgid bits dropped; the hard link, device and FIFO
	// never sent.
	want := []ent{{"bin/", tar.TypeDir, 0o755, ""}, {"bin/suid", tar.TypeReg, 0o755, ""}, {"notes.txt", tar.TypeReg, 0o640, ""}, {"link", tar.TypeSymlink, 0o777, "/etc/passwd"}}
	if !slices.Equal(got, want) {
		t.Fatalf("sent to the sandbox\n%v\nwant\n%v", got, want)
	}

	// Crafted checkpoints: refused before any sandbox is made.
	crafted := map[string][]*tar.Header{
		"snap-dotdot":   {checkpoint.FileHeader("../x", 0o644, mt, 1, o)},
		"snap-absolute": {checkpoint.FileHeader("/etc/cron.d/x", 0o644, mt, 1, o)},
		"snap-via-link": {checkpoint.SymlinkHeader("a", "/etc", 0o777, mt, o), checkpoint.FileHeader("a/passwd", 0o644, mt, 1, o)},
	}
	for id, hs := range crafted {
		writeCheckpoint(t, dir, id, hs...)
	}
	specs := len(e.f.specs)
	for _, id := range slices.Sorted(maps.Keys(crafted)) {
		e.do("POST", "/v2/sandboxes", map[string]string{"templateID": id}).errBody(t, 400, "cannot be restored")
	}
	if len(e.f.specs) != specs {
		t.Fatalf("crafted checkpoints made %d sandboxes", len(e.f.specs)-specs)
	}
}

// TestSnapshotIntegrity: a snapshot whose archive or manifest was changed
// is refused before any sandbox is made, saying why and naming no path.
func TestSnapshotIntegrity(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(o *Options) { o.SnapshotDir = dir; o.MaxCopyBytes = 1 << 20 })
	src := e.create(nil)
	e.f.writeFile(src.SandboxID, "a.txt", "alpha")
	snapshot := func() (string, string) {
		id := e.snapshot(src.SandboxID, nil).SnapshotID
		return id, filepath.Join(dir, id)
	}
	refused := func(id string, code int, want string) {
		t.Helper()
		specs := len(e.f.specs)
		r := e.do("POST", "/v2/sandboxes", map[string]string{"templateID": id})
		r.errBody(t, code, want)
		if strings.Contains(string(r.body), dir) {
			t.Fatalf("the error names a path: %s", r.body)
		}
		if len(e.f.specs) != specs {
			t.Fatalf("a refused snapshot made a sandbox")
		}
	}

	// One byte of the archive changed.
	id, d := snapshot()
	a, _ := os.ReadFile(filepath.Join(d, checkpoint.ArchiveName))
	a[len(a)/2] ^= 1
	os.WriteFile(filepath.Join(d, checkpoint.ArchiveName), a, 0o600)
	refused(id, 400, "does not match the sha256 of its manifest")
	// Shorter than its manifest says.
	os.WriteFile(filepath.Join(d, checkpoint.ArchiveName), a[:len(a)-1], 0o600)
	refused(id, 400, "size is not its manifest's")
	// The archive gone.
	os.Remove(filepath.Join(d, checkpoint.ArchiveName))
	refused(id, 400, "that is missing")

	// The manifest: version 2, a malformed sha256, none at all.
	id, d = snapshot()
	mp := filepath.Join(d, checkpoint.ManifestName)
	m, _ := os.ReadFile(mp)
	os.WriteFile(mp, bytes.Replace(m, []byte(`"version": 1`), []byte(`"version": 2`), 1), 0o600)
	refused(id, 400, "not version 1")
	os.WriteFile(mp, bytes.Replace(m, []byte(`"sha256": "`), []byte(`"sha256": "X`), 1), 0o600)
	refused(id, 400, "not version 1")
	os.Remove(mp)
	refused(id, 400, "has no manifest.json")
	// An incomplete snapshot is not listed; deleteSnapshot removes it.
	var listed []snapshotOut
	e.do("GET", "/snapshots", nil).json(t, &listed)
	for _, s := range listed {
		if s.SnapshotID == id {
			t.Fatal("a snapshot without its manifest is listed")
		}
	}
	if r := e.do("DELETE", "/templates/"+id, nil); r.code != 204 {
		t.Fatalf("delete an incomplete snapshot: %d %s", r.code, r.body)
	}

	// The archive's files larger than a copy may be.
	big := e.create(nil)
	e.f.writeFile(big.SandboxID, "big", strings.Repeat("x", 2<<20))
	writeCheckpoint(t, dir, "snap-big", checkpoint.FileHeader("big", 0o644, time.Now(), 2<<20, checkpoint.Owner{}))
	refused("snap-big", 413, "larger than the 1 MiB")

	// The former layout (<id>.tar beside <id>.json): not listed, refused
	// with a message saying so, deleted on request.
	os.WriteFile(filepath.Join(dir, "snap-old.tar"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "snap-old.json"), []byte(`{"snapshotID":"snap-old"}`), 0o600)
	refused("snap-old", 400, "former layout")
	if r := e.do("DELETE", "/templates/snap-old", nil); r.code != 204 {
		t.Fatalf("delete an old snapshot: %d %s", r.code, r.body)
	}
	if _, err := os.Lstat(filepath.Join(dir, "snap-old.tar")); !os.IsNotExist(err) {
		t.Fatalf("the old snapshot's archive: %v", err)
	}
	// A link in the directory is not a snapshot.
	other := t.TempDir()
	writeCheckpoint(t, other, "snap-x")
	os.Symlink(filepath.Join(other, "snap-x"), filepath.Join(dir, "snap-link"))
	refused("snap-link", 400, "not found")
	if fi, err := os.Lstat(filepath.Join(other, "snap-x")); err != nil || !fi.IsDir() {
		t.Fatal(err)
	}
}

// FuzzRepack: whatever a sandbox's tar sends, repackHome fails or writes
// an archive of the format that passes its checks, holding what the
// counts say.
func FuzzRepack(f *testing.F) {
	f.Add(gnuTar(f, tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, tar.Header{Name: "./a", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 3}))
	f.Add(gnuTar(f, tar.Header{Name: "./l", Typeflag: tar.TypeSymlink, Linkname: "/"}, tar.Header{Name: "./l/x", Typeflag: tar.TypeReg, Size: 1}))
	f.Add(gnuTar(f, tar.Header{Name: "../x", Typeflag: tar.TypeReg, Size: 1}))
	f.Add(gnuTar(f, tar.Header{Name: "./h", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"}, tar.Header{Name: "./d/", Typeflag: tar.TypeDir}))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		c, err := repackHome(func(w io.Writer) error { _, err := w.Write(in); return err }, &out, 1<<20)
		if err != nil {
			return
		}
		p, err := checkpoint.Scan(bytes.NewReader(out.Bytes()), 0)
		if err != nil {
			t.Fatalf("the re-packed archive is refused: %v", err)
		}
		if p.Files != c.files || p.Directories != c.dirs || p.Symlinks != c.symlinks || p.ContentBytes != c.content || p.Skipped != (checkpoint.Skipped{}) {
			t.Fatalf("plan %+v, counts %+v", p, c)
		}
	})
}

// TestSnapshotChangedDuringRestore: an archive changed in place after it
// was checked (same size, same file) fails the restore before tar in
// the sandbox sees the archive's end.
func TestSnapshotChangedDuringRestore(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(o *Options) { o.SnapshotDir = dir })
	src := e.create(nil)
	e.f.writeFile(src.SandboxID, "a.txt", randomString(t, 64<<10))
	id := e.snapshot(src.SandboxID, nil).SnapshotID
	a, err := e.srv.snaps.verify(id, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p := filepath.Join(dir, id, checkpoint.ArchiveName)
	b, _ := os.ReadFile(p)
	b[len(b)-10] ^= 1 // the gzip trailer: every entry still reads
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(b, 0)
	f.Close()
	dst, err := e.f.create(context.Background(), createSpec{})
	if err != nil {
		t.Fatal(err)
	}
	err = e.srv.restoreSnapshot(context.Background(), dst, a)
	if err == nil || !strings.Contains(err.Error(), "changed while it was restored") {
		t.Fatalf("restore of a changed archive: %v", err)
	}
	if len(e.f.filesOf(dst.ID())) != 0 {
		t.Fatal("files of a changed archive were extracted")
	}
}
