package image

import (
	"os"
	"path/filepath"
	"testing"
)

// A refused tree leaves --out as it was and no temporary file beside it.
func TestWriteZipRefusedLeavesNothing(t *testing.T) {
	src, outDir := t.TempDir(), t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Dockerfile.in", "FROM x@sha256:@@BASE_DIGEST@@\n")
	write("base.digest", "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n")
	write("requirements.lock", "ipykernel==6.29.5 --hash=sha256:abababababababababababababababababababababababababababababababab\n")
	out := filepath.Join(outDir, "a.zip")
	if _, _, err := writeZip(src, out); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(out)
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "passwd")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := writeZip(src, out); err == nil {
		t.Fatal("a tree with a link was zipped")
	}
	ents, _ := os.ReadDir(outDir)
	if len(ents) != 1 || ents[0].Name() != "a.zip" {
		t.Errorf("out dir holds %v, want only a.zip", ents)
	}
	if now, _ := os.ReadFile(out); string(now) != string(old) {
		t.Error("the old zip changed")
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
}
