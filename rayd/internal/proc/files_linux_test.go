package proc

import (
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"
)

// Spec.Files: the child gets exactly the given descriptors as 0, 1 and 2
// (it writes to the caller's file, reads the caller's input), rayd keeps
// none of its output, and the process ends with its exit code as usual.
func TestStartWithFiles(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	dir := t.TempDir()
	in, err := os.CreateTemp(dir, "in")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WriteString("from the caller\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	out, _ := os.Create(dir + "/out")
	errf, _ := os.Create(dir + "/err")
	before := openFDs(t)
	p := start(t, s, Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "read l; echo \"out: $l\"; echo err >&2; exit 7"}, Env: testEnv,
		Files: []*os.File{in, out, errf}})
	o := collect(t, p, 0)
	waitDone(t, p, 5*time.Second)
	if o.stdout.Len() != 0 || o.stderr.Len() != 0 || len(o.events) != 0 {
		t.Fatalf("rayd kept output: %q %q", o.stdout.String(), o.stderr.String())
	}
	if ex, ok := p.Exit(); !ok || ex.ExitCode != 7 {
		t.Fatalf("exit %+v %v", ex, ok)
	}
	for f, want := range map[string]string{"out": "out: from the caller\n", "err": "err\n"} {
		if b, _ := os.ReadFile(dir + "/" + f); string(b) != want {
			t.Errorf("%s: %q, want %q", f, b, want)
		}
	}
	// The caller's files are still its own, and nothing else is open.
	for _, f := range []*os.File{in, out, errf} {
		if _, err := f.Stat(); err != nil {
			t.Errorf("the caller's file was closed: %v", err)
		}
		f.Close()
	}
	if after := openFDs(t); after > before {
		t.Errorf("descriptors: %d before, %d after", before, after)
	}
	for name, bad := range map[string]Spec{
		"two files":  {Path: "/bin/true", Files: []*os.File{in, out}},
		"a nil file": {Path: "/bin/true", Files: []*os.File{in, nil, out}},
		"with stdin": {Path: "/bin/true", Files: []*os.File{in, out, errf}, Stdin: true},
		"with a pty": {Path: "/bin/true", Files: []*os.File{in, out, errf}, PTY: &PTYConfig{}},
	} {
		if _, err := s.Start(bad); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
