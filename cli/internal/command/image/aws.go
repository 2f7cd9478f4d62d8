package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/cli/internal/awsenv"
	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// The back-off of every wait on the service: the first poll after
// pollFirst, doubling, at most pollMax apart. Tests shorten them.
var (
	pollFirst = 2 * time.Second
	pollMax   = 10 * time.Second
)

// imageNameRE is the service's rule for an image name.
var imageNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// loadAWS loads the AWS configuration and clients (awsenv.Load), bounded
// by a timeout of its own so a stuck credential provider cannot hang the
// command.
func loadAWS(ctx context.Context) (*awsenv.Env, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	env, err := awsenv.Load(lctx)
	if err != nil && ctx.Err() == nil && lctx.Err() != nil {
		return nil, errors.New("loading the AWS configuration and credentials took more than 30s")
	}
	return env, err
}

// checkImageArg validates the NAME (or ARN) argument of list and prune.
func checkImageArg(s string) error {
	if microvms.IsImageARN(s) || imageNameRE.MatchString(s) {
		return nil
	}
	return cliutil.Usagef("%q is neither an image name (1 to 64 letters, digits, '-' or '_') nor an image ARN", s)
}

// resolveImage returns the ARN of the image NAME or ARN names, or an
// error saying it does not exist.
func resolveImage(ctx context.Context, c *microvms.Client, region, nameOrARN string) (string, error) {
	arn, err := c.ResolveImageARN(ctx, nameOrARN)
	if errors.Is(err, microvms.ErrNotFound) {
		return "", fmt.Errorf("image %s not found in %s (see 'rayito image list')", nameOrARN, region)
	}
	return arn, err
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// backoff returns the successive waits: pollFirst, doubling, capped at
// pollMax.
type backoff struct{ next time.Duration }

// step returns the next wait.
func (b *backoff) step() time.Duration {
	if b.next == 0 {
		b.next = pollFirst
	}
	d := b.next
	b.next = min(b.next*2, pollMax)
	return d
}

func (b *backoff) wait(ctx context.Context) error { return sleepCtx(ctx, b.step()) }

// busy reports whether an image in state s has a build or a deletion
// running, during which the service refuses changes.
func busy(s microvmsapi.ImageState) bool {
	return s == microvmsapi.ImageCreating || s == microvmsapi.ImageUpdating
}

// failedState reports the image states that end a build in failure.
func failedState(s microvmsapi.ImageState) bool {
	return s == microvmsapi.ImageCreateFailed || s == microvmsapi.ImageUpdateFailed
}

// gone reports the image states of an image being deleted or deleted.
func gone(s microvmsapi.ImageState) bool {
	return s == microvmsapi.ImageDeleting || s == microvmsapi.ImageDeleted || s == microvmsapi.ImageDeleteFailed
}

// versionLess orders versions oldest first: by number when both are
// numbers (the service numbers them 1, 2, ...), else by creation time,
// else as text.
func versionLess(a, b microvmsapi.MicrovmImageVersion) bool {
	na, ea := strconv.ParseFloat(a.ImageVersion, 64)
	nb, eb := strconv.ParseFloat(b.ImageVersion, 64)
	if ea == nil && eb == nil && na != nb {
		return na < nb
	}
	if a.CreatedAt != nil && b.CreatedAt != nil && !a.CreatedAt.Equal(b.CreatedAt.Time) {
		return a.CreatedAt.Before(b.CreatedAt.Time)
	}
	return a.ImageVersion < b.ImageVersion
}

// listVersions returns every version of arn, oldest first.
func listVersions(ctx context.Context, c *microvms.Client, arn string) ([]microvmsapi.MicrovmImageVersion, error) {
	var vs []microvmsapi.MicrovmImageVersion
	for v, err := range c.ListAllMicrovmImageVersions(ctx, arn, microvms.PageInput{}) {
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	slices.SortStableFunc(vs, func(a, b microvmsapi.MicrovmImageVersion) int {
		switch {
		case versionLess(a, b):
			return -1
		case versionLess(b, a):
			return 1
		}
		return 0
	})
	return vs, nil
}

// progress shows what a wait is at on stderr: on a terminal one line,
// redrawn every second with the elapsed time; otherwise a plain line each
// time the states change. Nothing goes to stdout.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time

	mu   sync.Mutex
	line string // the current states
	last string // the last line printed (not a terminal)
	stop chan struct{}
	done chan struct{}
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, tty: cliutil.IsTerminal(w), start: time.Now()}
	if p.tty {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.tick()
	}
	return p
}

func (p *progress) tick() {
	defer close(p.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.draw()
			p.mu.Unlock()
		}
	}
}

// draw redraws the terminal line; p.mu is held.
func (p *progress) draw() {
	if p.line != "" {
		fmt.Fprintf(p.w, "\r\033[K%s (%s)", p.line, time.Since(p.start).Round(time.Second))
	}
}

// set records the current states.
func (p *progress) set(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.line = line
	if p.tty {
		p.draw()
		return
	}
	if line != p.last {
		p.last = line
		fmt.Fprintf(p.w, "%s (%s)\n", line, time.Since(p.start).Round(time.Second))
	}
}

// finish clears the terminal line.
func (p *progress) finish() {
	if !p.tty {
		return
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line != "" {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// joinInts is "512, 1024, 2048".
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
