package app

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
)

// helpOf renders what `rayito ARGS...` prints, in a fresh command tree.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	f := &cliutil.Factory{IO: cliutil.IO{In: strings.NewReader(""), Out: &out, Err: &errOut}, Env: func(string) string { return "" }}
	if err := NewRoot(f).Run(context.Background(), append([]string{"rayito"}, args...)); err != nil {
		t.Fatalf("rayito %s: %v (stderr %q)", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// commandPaths lists the path (names below the root) of every command of
// the tree, hidden ones included, the root first.
func commandPaths() [][]string {
	root := NewRoot(&cliutil.Factory{IO: cliutil.IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, Env: func(string) string { return "" }})
	// A run sets the tree up (urfave adds the completion command then).
	_ = root.Run(context.Background(), []string{"rayito", "--help"})
	var paths [][]string
	var walk func(path []string, c *cli.Command)
	walk = func(path []string, c *cli.Command) {
		paths = append(paths, path)
		for _, sub := range c.Commands {
			walk(append(append([]string(nil), path...), sub.Name), sub)
		}
	}
	walk(nil, root)
	return paths
}

// Every help screen of every command, and `help environment`, fits in
// HelpWidth columns.
func TestHelpFitsWidth(t *testing.T) {
	t.Parallel()
	paths := commandPaths()
	if len(paths) < 40 {
		t.Fatalf("only %d commands found in the tree", len(paths))
	}
	check := func(name, help string) {
		t.Helper()
		for i, line := range strings.Split(help, "\n") {
			if n := utf8.RuneCountInString(line); n > HelpWidth {
				t.Errorf("%s: line %d is %d columns wide (over %d):\n%s", name, i+1, n, HelpWidth, line)
			}
		}
	}
	for _, path := range paths {
		name := strings.Join(append([]string{"rayito"}, path...), " ")
		help := helpOf(t, append(append([]string(nil), path...), "--help")...)
		if !strings.Contains(help, "NAME:\n   "+name) {
			t.Errorf("%s --help did not print its help:\n%s", name, help)
		}
		check(name+" --help", help)
	}
	check("rayito help environment", helpOf(t, "help", "environment"))
}

// A flag that takes a value names it in capitals (`--token TOKEN`), not
// by its Go type (`--token string`).
func TestHelpNamesFlagValues(t *testing.T) {
	t.Parallel()
	for _, path := range commandPaths() {
		help := helpOf(t, append(append([]string(nil), path...), "--help")...)
		for _, line := range strings.Split(help, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || !strings.HasPrefix(f[0], "--") {
				continue
			}
			switch strings.TrimSuffix(f[1], ",") {
			case "string", "duration", "int", "uint", "float", "value", "bool":
				t.Errorf("rayito %s --help: %q names its value by type", strings.Join(path, " "), strings.TrimSpace(line))
			}
		}
	}
}

func TestFitWidth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"short", "short"},
		// A flag's usage goes on under itself.
		{"   --x V  aaa bbb ccc ddd", "   --x V  aaa bbb\n          ccc ddd"},
		// A paragraph goes on at its indent.
		{"   aaa bbb ccc ddd eee fff", "   aaa bbb ccc ddd\n   eee fff"},
		// A word longer than the room stays whole.
		{"   --x V  aaaaaaaaaaaaaaaaaaaaaaaaa b", "   --x V  aaaaaaaaaaaaaaaaaaaaaaaaa\n          b"},
		// A default and a backend mark stay whole.
		{"   --x V  aaa bbbbb (default: 2)", "   --x V  aaa bbbbb\n          (default: 2)"},
		{"   --x V  aaa bbbbb (AWS only)", "   --x V  aaa bbbbb\n          (AWS only)"},
		// A first column wider than half: the usage goes under it.
		{"   --xxxxxxxxxx V  aaa bbb", "   --xxxxxxxxxx V\n         aaa bbb"},
	} {
		if got := fitWidth(tc.in, 20); got != tc.want {
			t.Errorf("fitWidth(%q, 20) =\n%s\nwant\n%s", tc.in, got, tc.want)
		}
	}
}

// TestEnvironmentListsEveryVariable: every RAYITO_* variable the CLI, the
// SDK, the local platform or the E2B gateway names in its code is in
// `rayito help environment` (RAYITO_GIT_USERNAME and _PASSWORD were
// missing), except the ones the SDK sets inside a sandbox for git's
// credential helper.
func TestEnvironmentListsEveryVariable(t *testing.T) {
	internal := map[string]bool{"RAYITO_GIT_PROTOCOL": true, "RAYITO_GIT_HOST": true}
	listed := map[string]bool{}
	for _, v := range environment {
		for _, name := range strings.Split(v.name, ", ") {
			listed[name] = true
		}
	}
	re := regexp.MustCompile(`"(RAYITO_[A-Z0-9_]+)"`)
	for _, dir := range []string{"../../../cli", "../../../sdk", "../../../localvm", "../../../e2b", "../../../proto/localplatform"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllSubmatch(b, -1) {
				if name := string(m[1]); !listed[name] && !internal[name] {
					t.Errorf("%s reads %s, which `rayito help environment` does not list", p, name)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Every command that does something takes --json (the groups, help and
// shell completion scripts excepted).
func TestEveryCommandTakesJSON(t *testing.T) {
	t.Parallel()
	for _, path := range commandPaths() {
		if len(path) == 0 || path[0] == "help" || path[0] == "completion" {
			continue
		}
		help := helpOf(t, append(append([]string(nil), path...), "--help")...)
		if strings.Contains(help, "COMMANDS:") {
			continue
		}
		if !strings.Contains(help, "--json") {
			t.Errorf("rayito %s takes no --json", strings.Join(path, " "))
		}
	}
}
