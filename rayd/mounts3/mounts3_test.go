package mounts3

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rayito-dev/rayito/rayd/internal/s3mount/wire"
)

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"bucket"},
		{"bucket", "/mnt/x"}, // only a FUSE descriptor rayd mounted
		{"--no-such-flag", "bucket", "/dev/fd/3"},
	} {
		var stderr bytes.Buffer
		if code := Main(args, &stderr); code != wire.ExitUsage {
			t.Errorf("%q: exit %d", args, code)
		}
		if strings.Contains(stderr.String(), "bucket") && !strings.Contains(stderr.String(), "BUCKET") {
			t.Errorf("%q: stderr names the bucket: %q", args, stderr.String())
		}
	}
}
