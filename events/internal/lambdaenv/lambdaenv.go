// Package lambdaenv reads the three Lambdas' configuration from their
// environment (events/stack/events-webhooks.yaml sets it) and builds their
// dependencies from an aws.Config. It logs nothing.
package lambdaenv

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"
)

// Environment variable names.
const (
	EnvTable        = "RAYITO_EVENTS_TABLE"
	EnvStackKey     = "RAYITO_EVENTS_STACK_KEY_SECRET"
	EnvFailureQueue = "RAYITO_EVENTS_FAILURE_QUEUE_URL"
	EnvGraceSeconds = "RAYITO_EVENTS_RECONCILE_GRACE_SECONDS"
	EnvKeyCacheSecs = "RAYITO_EVENTS_KEY_CACHE_SECONDS"
	defaultKeyCache = 5 * time.Minute
	maxGraceSeconds = 24 * 3600
	maxKeyCacheSecs = 3600
)

// ErrConfig reports a missing or invalid variable.
var ErrConfig = errors.New("lambdaenv: bad configuration")

// Config is every Lambda's configuration; each uses its part.
type Config struct {
	Table        string
	StackKey     string // forwarder: the stack key secret's ARN or name
	FailureQueue string // deliverer: the SQS queue URL
	Grace        time.Duration
	KeyCache     time.Duration
}

// Forwarder, Deliverer and Reconciler name the variables each needs.
var (
	Forwarder  = []string{EnvTable, EnvStackKey}
	Deliverer  = []string{EnvTable, EnvFailureQueue}
	Reconciler = []string{EnvTable}
)

// Load reads the configuration; required names must be set.
func Load(getenv func(string) string, required []string) (Config, error) {
	for _, k := range required {
		if getenv(k) == "" {
			return Config{}, fmt.Errorf("%w: %s is not set", ErrConfig, k)
		}
	}
	c := Config{Table: getenv(EnvTable), StackKey: getenv(EnvStackKey), FailureQueue: getenv(EnvFailureQueue), KeyCache: defaultKeyCache}
	if v := getenv(EnvGraceSeconds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 60 || n > maxGraceSeconds {
			return Config{}, fmt.Errorf("%w: %s must be 60 to %d", ErrConfig, EnvGraceSeconds, maxGraceSeconds)
		}
		c.Grace = time.Duration(n) * time.Second
	}
	if v := getenv(EnvKeyCacheSecs); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxKeyCacheSecs {
			return Config{}, fmt.Errorf("%w: %s must be 0 to %d", ErrConfig, EnvKeyCacheSecs, maxKeyCacheSecs)
		}
		c.KeyCache = time.Duration(n) * time.Second
	}
	return c, nil
}

// Logger is the JSON logger of the summaries, on w (the Lambda's stderr).
func Logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
