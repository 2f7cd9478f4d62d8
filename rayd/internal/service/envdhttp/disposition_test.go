package envdhttp

import (
	"strings"
	"testing"
)

func TestFormFile(t *testing.T) {
	for _, tc := range []struct {
		in       string
		name     string
		filename string
		ok       bool
	}{
		{`form-data; name="file"; filename="/home/user/a/b.txt"`, "file", "/home/user/a/b.txt", true},
		{`form-data; name=file; filename=rel/x.txt`, "file", "rel/x.txt", true},
		{`FORM-DATA;name="file";filename="/tmp/q%22uote.txt"`, "file", `/tmp/q"uote.txt`, true},
		{`form-data; name="file"; filename="/tmp/back\"slash"`, "file", `/tmp/back"slash`, true},
		{`form-data; name="file"; filename="C:\dir\f"`, "file", `C:\dir\f`, true},
		{`form-data; name="file"; filename*=UTF-8''%2Ftmp%2F%C3%A9.txt`, "file", "/tmp/é.txt", true},
		{`form-data; name="file"; filename="/a"; filename*=UTF-8''%2Fb`, "file", "/a", true},
		{`form-data; name="file"`, "file", "", true},
		{`attachment; filename="/x"`, "", "", false},
		{`form-data; name="file"; filename="/x`, "", "", false},
		{`form-data; name="file"; filename="/x%0Ay"`, "", "", false},
		{"form-data; name=\"file\"; filename=\"/x\x00y\"", "", "", false},
		{`form-data; name="file"; filename="/x" junk`, "", "", false},
		{`form-data; name="file"; filename*=latin1''%41`, "", "", false},
	} {
		name, filename, ok := FormFile(tc.in)
		if ok != tc.ok || (ok && (name != tc.name || filename != tc.filename)) {
			t.Errorf("FormFile(%q) = %q, %q, %v; want %q, %q, %v", tc.in, name, filename, ok, tc.name, tc.filename, tc.ok)
		}
	}
}

func FuzzFormFile(f *testing.F) {
	f.Add(`form-data; name="file"; filename="/home/user/a/b.txt"`)
	f.Add(`form-data; name=file; filename*=UTF-8''%2Fx`)
	f.Add(`form-data; name="file"; filename="a\"b\\c%22d"`)
	f.Fuzz(func(t *testing.T, h string) {
		_, filename, ok := FormFile(h)
		if !ok {
			return
		}
		if len(filename) > MaxFilenameLen {
			t.Fatalf("filename of %d bytes", len(filename))
		}
		if strings.ContainsFunc(filename, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("control character in %q", filename)
		}
	})
}
