package template

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestDockerignoreSemantics holds Compile to Docker's .dockerignore
// semantics: each case makes a context with files, a .dockerignore, copies
// the whole context and checks which files are in the artifact.
func TestDockerignoreSemantics(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		ignore   string
		excluded []string
		included []string
	}{
		{"double star also matches the root", "**/.env\n",
			[]string{".env", "a/.env", "a/b/.env"}, []string{"a/env.txt", ".envrc"}},
		{"negation after a wildcard", "*.md\n!README.md\n",
			[]string{"docs.md", "CHANGES.md"}, []string{"README.md", "sub/x.md"}},
		{"a directory pattern excludes its contents", "build\n",
			[]string{"build/out.bin", "build/sub/x"}, []string{"buildx.txt", "src/build.go"}},
		{"negation re-includes under an excluded directory", "logs\n!logs/keep.log\n",
			[]string{"logs/a.log", "logs/sub/b.log"}, []string{"logs/keep.log"}},
		{"a leading slash is the context root", "/secret.txt\n",
			[]string{"secret.txt"}, []string{"sub/secret.txt"}},
		{"dot-dot is cleaned", "foo/../bar.txt\n",
			[]string{"bar.txt"}, []string{"foo/bar.txt"}},
		{"a byte order mark is stripped", "\uFEFF*.log\n",
			[]string{"a.log"}, []string{"a.txt"}},
		{"comments are skipped", "# *.txt\n*.tmp\n",
			[]string{"a.tmp"}, []string{"a.txt"}},
		{"double star in the middle", "a/**/z.txt\n",
			[]string{"a/z.txt", "a/b/z.txt", "a/b/c/z.txt"}, []string{"b/z.txt", "a/y.txt"}},
		{"a trailing slash is cleaned", "tmp/\n",
			[]string{"tmp/x", "tmp/y/z"}, []string{"tmpfile", "x/tmp"}},
		{"exclude everything but one file", "*\n!keep\n",
			[]string{"other", "sub/x", ".dockerignore"}, []string{"keep"}},
		{"the .dockerignore file can exclude itself", ".dockerignore\n",
			[]string{".dockerignore"}, []string{"a.txt"}},
		{"the .dockerignore file is copied unless excluded", "*.tmp\n",
			[]string{"a.tmp"}, []string{".dockerignore", "a.txt"}},
		{"the Dockerfile is an ordinary file", "Dockerfile\n",
			[]string{"Dockerfile"}, []string{"Dockerfile.dev", "sub/Dockerfile"}},
		{"surrounding whitespace is trimmed", "   *.bak   \n\n\t\n",
			[]string{"a.bak"}, []string{"a.txt"}},
		{"a star does not cross a slash", "*/*.c\n",
			[]string{"a/x.c"}, []string{"x.c", "a/b/x.c"}},
		{"question mark is one character", "file?.txt\n",
			[]string{"file1.txt"}, []string{"file10.txt", "file.txt"}},
		{"character classes", "[ab].txt\n",
			[]string{"a.txt", "b.txt"}, []string{"c.txt"}},
		{"the last matching pattern wins", "!important.log\n*.log\n",
			[]string{"important.log", "x.log"}, []string{"x.txt"}},
		{"exclude, re-include, exclude again", "docs\n!docs/keep\ndocs/keep/secret\n",
			[]string{"docs/other", "docs/keep/secret"}, []string{"docs/keep/a"}},
		{"everything but a directory tree", "**\n!src/**\n",
			[]string{"x", "other/y"}, []string{"src/a.go", "src/b/c.go"}},
		{"a backslash escapes a leading hash", "\\#notcomment\n",
			[]string{"#notcomment"}, []string{"notcomment"}},
		{"a negation with a leading slash", "*.txt\n!/keep.txt\n",
			[]string{"a.txt"}, []string{"keep.txt"}},
		{"a negation elsewhere does not reach into an excluded directory", "node_modules\n!README.md\n",
			[]string{"node_modules/x/y", "node_modules/README.md/z"}, []string{"README.md", "src/README.md"}},
		{"a wildcard negation reaches into an excluded directory", "a\n!a/*/keep\n",
			[]string{"a/b/other", "a/top"}, []string{"a/b/keep", "a/c/keep"}},
		{"a .git directory", ".git\n",
			[]string{".git/config", ".git/objects/ab/cd"}, []string{".gitignore", "a/.git-keep"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			files := map[string]string{IgnoreFile: tc.ignore}
			for _, f := range append(slices.Clone(tc.excluded), tc.included...) {
				if f != IgnoreFile {
					files[f] = "x"
				}
			}
			writeTree(t, dir, files)
			a, err := Compile(t.Context(), FromBaseImage("python:3.12").Copy(".", "/app"), dir, WithWarn(func(string) {}))
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got := contextFiles(t, a)
			for _, f := range tc.excluded {
				if slices.Contains(got, f) {
					t.Errorf("%s is in the artifact; want it excluded (artifact: %v)", f, got)
				}
			}
			for _, f := range tc.included {
				if !slices.Contains(got, f) {
					t.Errorf("%s is not in the artifact; want it included (artifact: %v)", f, got)
				}
			}
		})
	}
}

func TestDockerignoreErrors(t *testing.T) {
	t.Parallel()
	for name, ignore := range map[string]string{
		"a lone negation": "!\n",
		"a bad class":     "[a-\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{IgnoreFile: ignore, "a": "x"})
			_, err := Compile(t.Context(), FromBaseImage("alpine").Copy(".", "/app"), dir)
			var e *Error
			if !errors.Is(err, ErrContextPath) || !errors.As(err, &e) || e.Path != IgnoreFile {
				t.Fatalf("err = %v; want ErrContextPath naming %s", err, IgnoreFile)
			}
		})
	}
	t.Run("a link", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"real": "*.x\n", IgnoreFile: "->real"})
		_, err := Compile(t.Context(), FromBaseImage("alpine").Copy(".", "/app"), dir)
		if !errors.Is(err, ErrUnsafeSymlink) {
			t.Fatalf("err = %v; want ErrUnsafeSymlink", err)
		}
	})
	t.Run("an excluded copy source", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{IgnoreFile: "secret.txt\nbuild\n", "secret.txt": "s", "build/x": "b"})
		for _, src := range []string{"secret.txt", "build"} {
			_, err := Compile(t.Context(), FromBaseImage("alpine").Copy(src, "/x"), dir)
			if !errors.Is(err, ErrContextPath) || !strings.Contains(err.Error(), "excluded") {
				t.Errorf("Copy(%s): err = %v; want ErrContextPath (excluded)", src, err)
			}
		}
	})
}
