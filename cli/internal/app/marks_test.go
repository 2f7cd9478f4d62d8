package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Flags that mean something on one backend only say so in one way, at
// the end of their usage: "(AWS only)" or "(local only)". The table
// names those that must; any other mention of either is the mark itself.
func TestBackendMarks(t *testing.T) {
	t.Parallel()
	want := map[string]rayito.Backend{
		"rayito --endpoint":                        rayito.BackendLocal,
		"rayito run --unisolated":                  rayito.BackendLocal,
		"rayito sandbox create --execution-role":   rayito.BackendAWS,
		"rayito sandbox create --template-version": rayito.BackendAWS,
		"rayito sandbox create --ingress":          rayito.BackendAWS,
		"rayito sandbox create --egress":           rayito.BackendAWS,
		"rayito run --execution-role":              rayito.BackendAWS,
		"rayito run --template-version":            rayito.BackendAWS,
		"rayito run --ingress":                     rayito.BackendAWS,
		"rayito run --egress":                      rayito.BackendAWS,
		// reincarnate creates a sandbox with create's flags (the same
		// CheckCreateOptions refuses them locally).
		"rayito sandbox reincarnate --execution-role":   rayito.BackendAWS,
		"rayito sandbox reincarnate --template-version": rayito.BackendAWS,
		"rayito sandbox reincarnate --ingress":          rayito.BackendAWS,
		"rayito sandbox reincarnate --egress":           rayito.BackendAWS,
		// Lifecycle events: the local platform holds its own stack key.
		"rayito sandbox create --events-stack-key":      rayito.BackendAWS,
		"rayito sandbox reincarnate --events-stack-key": rayito.BackendAWS,
		// Pre-signed transfers: the local platform uses its own store.
		"rayito sandbox cp --bucket":           rayito.BackendAWS,
		"rayito sandbox url upload --bucket":   rayito.BackendAWS,
		"rayito sandbox url download --bucket": rayito.BackendAWS,
	}
	root := NewRoot(&cliutil.Factory{IO: cliutil.IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, Env: func(string) string { return "" }})
	_ = root.Run(context.Background(), []string{"rayito", "--help"})
	seen := map[string]bool{}
	var walk func(c *cli.Command)
	walk = func(c *cli.Command) {
		for _, fl := range c.Flags {
			name := c.FullName() + " --" + fl.Names()[0]
			got := cliutil.OnlyOn(fl)
			usage := ""
			if df, ok := fl.(cli.DocGenerationFlag); ok {
				usage = df.GetUsage()
			}
			if mentions := strings.Contains(strings.ToLower(usage), "aws only") || strings.Contains(strings.ToLower(usage), "local only"); mentions && got == "" {
				t.Errorf("%s: usage mentions a backend mark, not as its end (%q or %q): %q", name, cliutil.AWSOnly, cliutil.LocalOnly, usage)
			}
			if w, ok := want[name]; ok {
				seen[name] = true
				if got != w {
					t.Errorf("%s: marked %q, want %q", name, got, w)
				}
			} else if got != "" {
				t.Errorf("%s: marked %q; add it to the table (and see that create or run refuses it)", name, got)
			}
		}
		for _, sub := range c.Commands {
			walk(sub)
		}
	}
	walk(root)
	for name := range want {
		if !seen[name] {
			t.Errorf("%s: no such flag", name)
		}
	}
}
