package image

import (
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/rayito-dev/rayito/cli/internal/command/image/imagetest"
	"github.com/rayito-dev/rayito/sdk/microvms/microvmstest"
)

const (
	testBucket = imagetest.Bucket
	testRole   = imagetest.Role
)

// world is one test's AWS (imagetest.World).
type world struct {
	*imagetest.World
	t   *testing.T
	mv  *microvmstest.Server
	s3  *s3mem.Backend
	dir string // an image source tree
}

func newWorld(t *testing.T, polls int) *world {
	t.Helper()
	w := imagetest.New(t, polls)
	t.Cleanup(SetPolling(time.Millisecond, 4*time.Millisecond))
	return &world{World: w, t: t, mv: w.MV, s3: w.S3, dir: w.Dir}
}

func writeTree(t *testing.T, dir string, files map[string]string) { imagetest.WriteTree(t, dir, files) }

// result is one run of the CLI.
type result struct {
	out, err string
	code     int
}

// run runs `rayito image ARGS...` in process, with env as the CLI's own
// environment (Factory.Env; the AWS SDK reads the process's).
func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	r := imagetest.Run(t, Command, func(k string) string { return env[k] }, args...)
	return result{r.Out, r.Err, r.Code}
}

func (w *world) run(args ...string) result {
	w.t.Helper()
	return run(w.t, nil, args...)
}

func (w *world) puts() int { return w.Puts() }

func (w *world) ops() []string { return w.Ops() }
