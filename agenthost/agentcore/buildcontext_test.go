package agentcore

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func elfOf(machine uint16, class byte) []byte {
	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = class, 1, 1
	binary.LittleEndian.PutUint16(h[16:], 2)
	binary.LittleEndian.PutUint16(h[18:], machine)
	binary.LittleEndian.PutUint32(h[20:], 1)
	binary.LittleEndian.PutUint16(h[52:], 64)
	binary.LittleEndian.PutUint16(h[54:], 56)
	binary.LittleEndian.PutUint16(h[58:], 64)
	return append(h, bytes.Repeat([]byte("x"), 256)...)
}

func write(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// stage is a stage directory as the CLI's stageContext leaves it.
func stage(t *testing.T) string {
	d := t.TempDir()
	write(t, filepath.Join(d, "app", "agent.py"), "print('hi')\n", 0o644)
	write(t, filepath.Join(d, "app", "lib", "util.py"), "X = 1\n", 0o600)
	write(t, filepath.Join(d, "app", "run.sh"), "#!/bin/sh\n", 0o700)
	write(t, filepath.Join(d, "bin", "rayito-agent-host"), string(elfOf(183, 2)), 0o755)
	return d
}

// TestBuildContextDeterministic: the same inputs give the same bytes
// (whatever the files' times and the stage's path), with the Dockerfile
// first, the files in order, 0644 or 0755.
func TestBuildContextDeterministic(t *testing.T) {
	df, err := Dockerfile(DefaultBaseImage, []string{"python3", "agent.py"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := BuildContext(stage(t), df)
	if err != nil {
		t.Fatal(err)
	}
	s2 := stage(t)
	old := mustTime(t)
	if err := os.Chtimes(filepath.Join(s2, "app", "agent.py"), old, old); err != nil {
		t.Fatal(err)
	}
	b, err := BuildContext(s2, df)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) || Sum(a) != Sum(b) {
		t.Fatal("two builds of the same inputs differ")
	}
	zr, err := zip.NewReader(bytes.NewReader(a), int64(len(a)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name+" "+f.Mode().String())
		if !f.Modified.Equal(zipTime) {
			t.Errorf("%s: time %v", f.Name, f.Modified)
		}
	}
	want := "Dockerfile -rw-r--r--|app/agent.py -rw-r--r--|app/lib/util.py -rw-r--r--|app/run.sh -rwxr-xr-x|bin/rayito-agent-host -rwxr-xr-x"
	if got := strings.Join(names, "|"); got != want {
		t.Errorf("entries\n %s\nwant\n %s", got, want)
	}
	rc, _ := zr.File[0].Open()
	got, _ := io.ReadAll(rc)
	if string(got) != df {
		t.Errorf("Dockerfile %q", got)
	}
	if ImageTag(Sum(a)) != Sum(a)[:16] || ContextKey("bot", Sum(a)) != ArtifactPrefix+"bot/"+Sum(a)+".zip" {
		t.Error("tag or key")
	}
	// Another command, another zip.
	df2, _ := Dockerfile(DefaultBaseImage, []string{"python3", "other.py"})
	c, _ := BuildContext(stage(t), df2)
	if bytes.Equal(a, c) {
		t.Error("another Dockerfile, the same zip")
	}
}

func mustTime(t *testing.T) time.Time {
	t.Helper()
	return zipTime.AddDate(10, 0, 0)
}

// TestBuildContextRefuses: a symbolic link or a .git directory in the
// stage is a typed error (stageContext leaves neither).
func TestBuildContextRefuses(t *testing.T) {
	s := stage(t)
	if err := os.Symlink("/etc/passwd", filepath.Join(s, "app", "passwd")); err != nil {
		t.Fatal(err)
	}
	if _, err := BuildContext(s, "FROM x\n"); !errors.Is(err, ErrBuildContext) {
		t.Errorf("symlink: %v", err)
	}
	s = stage(t)
	write(t, filepath.Join(s, "app", ".git", "config"), "[core]\n", 0o644)
	if _, err := BuildContext(s, "FROM x\n"); !errors.Is(err, ErrBuildContext) {
		t.Errorf(".git: %v", err)
	}
}

// TestDockerfile: FROM the pinned base, the host as ENTRYPOINT on 8080
// for agentcore, no token, the command in exec form (JSON: a newline in
// an argument cannot add a Dockerfile instruction).
func TestDockerfile(t *testing.T) {
	df, err := Dockerfile(DefaultBaseImage, []string{"python3", "agent.py", "a\nRUN evil"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(df, "\n"), "\n")
	if lines[0] != "FROM "+DefaultBaseImage || !strings.Contains(DefaultBaseImage, "@sha256:") {
		t.Errorf("FROM: %q", lines[0])
	}
	last := lines[len(lines)-1]
	want := `ENTRYPOINT ["/opt/agent/bin/rayito-agent-host","--target","agentcore","--listen",":8080","--dir","/opt/agent/app","--user","agent","--","python3","agent.py","a\nRUN evil"]`
	if last != want {
		t.Errorf("ENTRYPOINT\n %s\nwant\n %s", last, want)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "RUN evil") || strings.Contains(strings.ToLower(l), "token") {
			t.Errorf("line %q", l)
		}
	}
	if _, err := Dockerfile("python:3.12", nil); !errors.Is(err, ErrBuildContext) {
		t.Errorf("a tag only: %v", err)
	}
}

func TestCheckBaseImage(t *testing.T) {
	d := "@sha256:" + strings.Repeat("0a", 32)
	for _, ok := range []string{DefaultBaseImage, "public.ecr.aws/docker/library/debian" + d, "123456789012.dkr.ecr.us-east-1.amazonaws.com/base:1.2" + d, "localhost:5000/x/y" + d} {
		if err := CheckBaseImage(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "python:3.12", "python" + d, "x/y@sha256:abc", "x/y" + d + "\nRUN x", "x/y " + d, "X/Y" + d, "x/y" + strings.ToUpper(d)} {
		if err := CheckBaseImage(bad); !errors.Is(err, ErrBuildContext) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCheckHostBinary(t *testing.T) {
	if err := CheckHostBinary(bytes.NewReader(elfOf(183, 2))); err != nil {
		t.Errorf("arm64: %v", err)
	}
	for name, b := range map[string][]byte{"amd64": elfOf(62, 2), "arm32": elfOf(40, 1), "text": []byte("#!/bin/sh\n"), "empty": nil} {
		if err := CheckHostBinary(bytes.NewReader(b)); !errors.Is(err, ErrBuildContext) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzCheckBaseImage: --base-image is written into the Dockerfile: what
// is accepted is one line, pinned by digest.
func FuzzCheckBaseImage(f *testing.F) {
	f.Add(DefaultBaseImage)
	f.Add("x/y@sha256:" + strings.Repeat("0", 64) + "\nRUN x")
	f.Add("python:3.12")
	f.Fuzz(func(t *testing.T, ref string) {
		if CheckBaseImage(ref) != nil {
			return
		}
		if strings.ContainsAny(ref, " \t\r\n\"'\\") || !strings.Contains(ref, "@sha256:") || len(ref) > 512 {
			t.Fatalf("accepted %q", ref)
		}
		df, err := Dockerfile(ref, []string{"x"})
		if err != nil || strings.Count(df, "\n") != 7 {
			t.Fatalf("Dockerfile of %q: %v\n%s", ref, err, df)
		}
	})
}

// FuzzCheckHostBinary: --host-binary is parsed as ELF: any bytes give an
// answer, never a panic.
func FuzzCheckHostBinary(f *testing.F) {
	f.Add(elfOf(183, 2))
	f.Add(elfOf(62, 2))
	f.Add([]byte("\x7fELF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = CheckHostBinary(bytes.NewReader(b))
	})
}
