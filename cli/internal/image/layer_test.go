package image

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readRepoFile reads a file of the repository (this package is
// cli/internal/image).
func readRepoFile(rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", filepath.FromSlash(rel)))
	return string(b), err
}

// What sdk/template renders for a template (FROM, steps, a start comment).
const testLayer = `# The template as a Dockerfile layer, written by rayito's SDK (sdk/template).
# COPY sources are under context/ in the template's artifact.
FROM rayito
RUN ["/bin/sh", "-c", "echo hi > /opt/hi"]
COPY --chown=user ["context/app", "/home/user/app"]
COPY ["context", "/srv/all"]
ENV A="1" B="two words"
WORKDIR /home/user/app
USER user
# rayito start (run by the platform when a sandbox starts; not an instruction): {"cmd":"python3 -m http.server"}
`

func TestTemplateLayer(t *testing.T) {
	got, err := TemplateLayer(testLayer)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`RUN ["/bin/sh", "-c", "echo hi > /opt/hi"]`,
		`COPY --chown=user ["template/context/app","/home/user/app"]`,
		`COPY ["template/context","/srv/all"]`,
		`ENV A="1" B="two words"`,
		`WORKDIR /home/user/app`,
		`USER user`,
		`# rayito start (run by the platform when a sandbox starts; not an instruction): {"cmd":"python3 -m http.server"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestTemplateLayerRefused(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"RUN x\n", "before FROM"},
		{"", "no FROM"},
		{"FROM rayito\nFROM other\n", "second FROM"},
		{"FROM rayito\nADD x /x\n", "instruction ADD"},
		{"FROM rayito\nCMD x\n", "instruction CMD"},
		{"FROM rayito\nRUN a \\\n b\n", "line continuation"},
		{"FROM rayito\nCOPY a /a\n", "COPY must be"},
		{"FROM rayito\nCOPY [\"/etc/passwd\", \"/a\"]\n", "under context/"},
		{"FROM rayito\nCOPY [\"context/../x\", \"/a\"]\n", "under context/"},
		{"FROM rayito\nCOPY [\"context/\", \"/a\"]\n", "under context/"},
		{"FROM rayito\nCOPY [\"context/a\", \"rel\"]\n", "absolute"},
		{"FROM rayito\nCOPY --from=x [\"context/a\", \"/a\"]\n", "--chown"},
		{"FROM rayito\nCOPY [\"context/a\", \"/a\"] [\"x\"]\n", "COPY must be"},
		{"FROM rayito\r\nRUN x\r\n", "not text"},
	} {
		_, err := TemplateLayer(c.text)
		var le *LayerError
		if !errors.As(err, &le) || !errors.Is(err, ErrLayer) || le.Base || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want a *LayerError with %q", c.text, err, c.want)
		}
	}
}

func TestInsertLayer(t *testing.T) {
	layer := []string{"RUN [\"/bin/sh\", \"-c\", \"t\"]", "USER root"}
	for _, c := range []struct{ name, base, want string }{
		{"before the final ENTRYPOINT and CMD, with their comment",
			"FROM b\nRUN a \\\n  && b\n\nEXPOSE 9000\n\n# the entrypoint\nENTRYPOINT [\"/r\"]\nCMD [\"-x\"]\n",
			"FROM b\nRUN a \\\n  && b\n\nEXPOSE 9000\n\nRUN [\"/bin/sh\", \"-c\", \"t\"]\nUSER root\n\n# the entrypoint\nENTRYPOINT [\"/r\"]\nCMD [\"-x\"]\n"},
		{"none: at the end", "FROM b\nRUN a\n", "FROM b\nRUN a\nRUN [\"/bin/sh\", \"-c\", \"t\"]\nUSER root\n"},
		{"no final newline", "FROM b\nCMD x", "FROM b\nRUN [\"/bin/sh\", \"-c\", \"t\"]\nUSER root\n\nCMD x"},
		{"a CMD then other lines: before that CMD", "FROM b\nCMD x\nEXPOSE 1\n", "FROM b\nRUN [\"/bin/sh\", \"-c\", \"t\"]\nUSER root\n\nCMD x\nEXPOSE 1\n"},
		{"a continuation that looks like CMD", "FROM b\nRUN a \\\nCMD x\n", "FROM b\nRUN a \\\nCMD x\nRUN [\"/bin/sh\", \"-c\", \"t\"]\nUSER root\n"},
	} {
		got, err := InsertLayer(c.base, layer)
		if err != nil || got != c.want {
			t.Errorf("%s: %v\ngot\n%s\nwant\n%s", c.name, err, got, c.want)
		}
	}
	for _, c := range []struct{ base, want string }{
		{"RUN a\n", "no FROM"},
		{"FROM a AS x\nFROM b\n", "multi-stage"},
		{"# escape=`\nFROM b\n", "escape"},
	} {
		_, err := InsertLayer(c.base, layer)
		var le *LayerError
		if !errors.As(err, &le) || !le.Base || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.base, err, c.want)
		}
	}
}

// The image's own Dockerfile.in: the layer lands before ENTRYPOINT.
func TestInsertLayerImage(t *testing.T) {
	b, err := readRepoFile("image/Dockerfile.in")
	if err != nil {
		t.Skip("image/Dockerfile.in not found: ", err)
	}
	got, err := InsertLayer(b, []string{"USER root"})
	if err != nil {
		t.Fatal(err)
	}
	i, j := strings.Index(got, "\nUSER root\n"), strings.Index(got, "\nENTRYPOINT [")
	if i < 0 || j < 0 || i > j || !strings.Contains(got[:j], "EXPOSE 9000 8080") || !strings.HasSuffix(got, "CMD [\"-egress=on\"]\n") {
		t.Errorf("merged:\n%s", got)
	}
}

// FuzzTemplateLayer: no panic; what passes has one instruction a line,
// no FROM, and every COPY source under template/context.
func FuzzTemplateLayer(f *testing.F) {
	f.Add(testLayer)
	f.Add("FROM rayito\nCOPY [\"context/a\", \"/a\"]\n")
	f.Add("FROM x\nCOPY --chown=root [\"context\", \"/\"]\n")
	f.Fuzz(func(t *testing.T, s string) {
		lines, err := TemplateLayer(s)
		if err != nil {
			if !errors.Is(err, ErrLayer) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, l := range lines {
			if strings.Contains(l, "\n") {
				t.Fatalf("a line with a newline: %q", l)
			}
			kw, rest, _ := strings.Cut(strings.TrimSpace(l), " ")
			switch strings.ToUpper(kw) {
			case "FROM", "ADD", "CMD", "ENTRYPOINT":
				t.Fatalf("instruction %q passed", kw)
			case "COPY":
				rest = strings.TrimPrefix(strings.TrimPrefix(rest, "--chown=root "), "--chown=user ")
				if !strings.HasPrefix(rest, `["template/context`) || strings.Contains(rest, "..") && strings.Contains(rest, `/../`) {
					t.Fatalf("COPY source outside template/context: %q", l)
				}
			}
		}
		if _, err := InsertLayer("FROM b\nCMD x\n", lines); err != nil {
			t.Fatalf("InsertLayer: %v", err)
		}
	})
}

// FuzzInsertLayer: no panic; the base's lines all stay, in order.
func FuzzInsertLayer(f *testing.F) {
	f.Add("FROM b\nRUN a \\\n  b\n# c\nENTRYPOINT x\nCMD y\n")
	f.Add("FROM b")
	f.Fuzz(func(t *testing.T, base string) {
		got, err := InsertLayer(base, []string{"USER root"})
		if err != nil {
			if !errors.Is(err, ErrLayer) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if strings.Count(got, "USER root\n") != strings.Count(base, "USER root\n")+1 {
			t.Fatalf("the layer is not in:\n%s", got)
		}
		rest := strings.Replace(got, "USER root\n", "", 1)
		if strings.ReplaceAll(rest, "\n", "") != strings.ReplaceAll(base, "\n", "") {
			t.Fatalf("the base changed:\n%q\n%q", base, got)
		}
	})
}

// Build with a template: its entries under template/, modes fixed, its
// layer in the Dockerfile; a bad name or a clash with the tree refused.
func TestBuildWithTemplate(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, 0o022, Epoch)
	tmpl := &Template{
		Layer: []string{"USER root"},
		Files: []TemplateFile{
			{Name: "context/"},
			{Name: "context/run.sh", Exec: true, Data: []byte("#!/bin/sh\n")},
			{Name: "context/big", Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("big\n")), nil }},
			{Name: "context/empty"},
		},
	}
	data, sum := build(t, dir, Options{Template: tmpl})
	if _, again := build(t, dir, Options{Template: tmpl}); again != sum {
		t.Error("not deterministic")
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		got[f.Name] = f.Mode().String() + " " + string(b)
	}
	for name, want := range map[string]string{
		"template/":               "drwxr-xr-x ",
		"template/context/":       "drwxr-xr-x ",
		"template/context/run.sh": "-rwxr-xr-x #!/bin/sh\n",
		"template/context/big":    "-rw-r--r-- big\n",
		"template/context/empty":  "-rw-r--r-- ",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	if df := got[DockerfileName]; !strings.HasSuffix(df, "COPY a.txt /a.txt\nUSER root\n") {
		t.Errorf("Dockerfile %q", df)
	}

	for _, name := range []string{"../x", "/abs", "a/../b", "", "a//b"} {
		var buf bytes.Buffer
		_, err := Build(&buf, dir, Options{Template: &Template{Files: []TemplateFile{{Name: name}}}})
		if !errors.Is(err, ErrLayer) || buf.Len() != 0 {
			t.Errorf("%q: %v, %d bytes", name, err, buf.Len())
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "template"), 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Build(&buf, dir, Options{Template: tmpl}); err == nil || !strings.Contains(err.Error(), "two entries") {
		t.Errorf("a template/ in the tree: %v", err)
	}
}
