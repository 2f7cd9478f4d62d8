package image

import (
	"context"
	"time"

	"github.com/rayito-dev/rayito/cli/internal/awsenv"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// LoadAWS loads the AWS configuration and clients as publish does, with
// its 30 s bound.
func LoadAWS(ctx context.Context) (*awsenv.Env, error) { return loadAWS(ctx) }

// Busy reports whether an image in state s has a build or a deletion
// running.
func Busy(s microvmsapi.ImageState) bool { return busy(s) }

// FailedState reports the image states that end a build in failure.
func FailedState(s microvmsapi.ImageState) bool { return failedState(s) }

// LastBuild returns the latest build of the image's version (by creation
// time), or nil when none is listed or the listing fails.
func LastBuild(ctx context.Context, c *microvms.Client, arn, version string) *microvmsapi.MicrovmImageBuild {
	var last *microvmsapi.MicrovmImageBuild
	for bd, err := range c.ListAllMicrovmImageBuilds(ctx, arn, version, microvms.ListBuildsInput{}) {
		if err != nil {
			break
		}
		if last == nil || bd.CreatedAt != nil && last.CreatedAt != nil && bd.CreatedAt.After(last.CreatedAt.Time) {
			last = &bd
		}
	}
	return last
}

// SetPolling sets the back-off of every wait on the service (the first
// poll after first, then doubling up to most apart) and returns what
// restores it. For tests, which poll every few milliseconds.
func SetPolling(first, most time.Duration) (restore func()) {
	old1, old2 := pollFirst, pollMax
	pollFirst, pollMax = first, most
	return func() { pollFirst, pollMax = old1, old2 }
}
