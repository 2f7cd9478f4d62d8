package microvmsapi

import (
	"archive/zip"
	"bytes"
	"errors"
	"testing"
)

func zipOf(tb testing.TB, files map[string]string) []byte {
	tb.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			tb.Fatal(err)
		}
		_, _ = w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func TestCheckCodeArtifact(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		raw   []byte
		ok    bool
	}{
		{"dockerfile at the root", map[string]string{"Dockerfile": "FROM x\n", "bin/rayd": "x"}, nil, true},
		{"no dockerfile", map[string]string{"bin/rayd": "x"}, nil, false},
		{"nested dockerfile", map[string]string{"a/Dockerfile": "x"}, nil, false},
		{"climbs", map[string]string{"Dockerfile": "x", "../etc/passwd": "x"}, nil, false},
		{"dot element", map[string]string{"Dockerfile": "x", "a/./b": "x"}, nil, false},
		{"absolute", map[string]string{"Dockerfile": "x", "/etc/passwd": "x"}, nil, false},
		{"backslash", map[string]string{"Dockerfile": "x", `a\b`: "x"}, nil, false},
		{"not a zip", nil, []byte("PK\x03\x04 not really"), false},
		{"empty", nil, []byte{}, false},
	} {
		b := tc.raw
		if tc.files != nil {
			b = zipOf(t, tc.files)
		}
		err := CheckCodeArtifact(bytes.NewReader(b), int64(len(b)))
		var ie *InvalidInputError
		if tc.ok != (err == nil) || (err != nil && !errors.As(err, &ie)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// FuzzCheckCodeArtifact: any bytes are accepted or refused with an
// *InvalidInputError, never a panic; an accepted one is a zip the
// standard library reads, with a Dockerfile at its root and no entry that
// climbs out.
func FuzzCheckCodeArtifact(f *testing.F) {
	f.Add(zipOf(f, map[string]string{"Dockerfile": "FROM x\n", "bin/rayd": "x"}))
	f.Add(zipOf(f, map[string]string{"../Dockerfile": "x"}))
	f.Add(zipOf(f, map[string]string{"a/Dockerfile": "x"}))
	f.Add([]byte("PK\x03\x04"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckCodeArtifact(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			var ie *InvalidInputError
			if !errors.As(err, &ie) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		zr, zerr := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if zerr != nil {
			t.Fatalf("accepted what archive/zip cannot read: %v", zerr)
		}
		found := false
		for _, e := range zr.File {
			found = found || e.Name == "Dockerfile"
			if len(e.Name) > 0 && (e.Name[0] == '/' || bytes.Contains([]byte(e.Name), []byte(".."))) && e.Name != "Dockerfile" {
				for _, el := range bytes.Split([]byte(e.Name), []byte("/")) {
					if string(el) == ".." {
						t.Fatalf("accepted an entry that climbs out")
					}
				}
				if e.Name[0] == '/' {
					t.Fatalf("accepted an absolute entry")
				}
			}
		}
		if !found {
			t.Fatal("accepted without a Dockerfile")
		}
	})
}
