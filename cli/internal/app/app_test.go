package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/version"
)

func TestVersionFlag(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--version", "-v"} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), []string{"rayito", flag}, cliutil.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
		if code != cliutil.ExitOK {
			t.Fatalf("%s: exit %d, stderr %q", flag, code, errOut.String())
		}
		if got, want := out.String(), version.String()+"\n"; got != want {
			t.Errorf("%s: printed %q, want %q", flag, got, want)
		}
		if !strings.HasPrefix(out.String(), "rayito "+version.Version+" (revision ") {
			t.Errorf("%s: printed %q, want the version and the revision", flag, out.String())
		}
	}
}
