package doctor

import (
	"context"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/rayito-dev/rayito/cli/internal/platform"
)

// Env is everything the checks take from the machine; tests replace any of
// it with fakes, so the checks' classification runs without root.
type Env struct {
	Getenv   func(string) string
	Geteuid  func() int
	LookPath func(string) (string, error)
	ReadFile func(string) ([]byte, error)
	// Exists reports whether a path exists.
	Exists func(string) bool
	// Writable reports whether this user may write path (access(2)).
	Writable func(string) bool
	// OpenRW opens path read-write and closes it (a device's usability).
	OpenRW func(string) error
	// FSType is statfs(2)'s f_type of path.
	FSType func(string) (int64, error)
	// Run runs a program to its end: ctx bounds it.
	Run func(ctx context.Context, path string, args ...string) error
	// RunInUserNS runs path in a new user namespace (CLONE_NEWUSER)
	// mapping this user to its root.
	RunInUserNS func(ctx context.Context, path string) error
	// Listen tries to listen on addr and closes the listener at once.
	Listen func(addr string) error
	// Answers reports whether a Rayito platform answers at endpoint.
	Answers func(ctx context.Context, endpoint string) bool
	// Netfilter probes nf_tables over a NETLINK_NETFILTER socket.
	Netfilter func(ctx context.Context) error
	// Sandbox creates a sandbox on the platform `rayito run` uses, runs
	// `true` in it and kills it.
	Sandbox func(ctx context.Context, getenv func(string) string) (SandboxResult, error)
	// AWS resolves the AWS configuration.
	AWS func(ctx context.Context) (AWSResult, error)
}

// SandboxResult is what the test sandbox reported.
type SandboxResult struct {
	// Isolation is the sandbox's isolation: full, rootless or none.
	Isolation string
	// InProcess: the platform was started in this process (no platform
	// answered at the endpoint).
	InProcess bool
	Endpoint  string
	// Startup is how long finding (or starting) the platform took.
	Startup time.Duration
	// Elapsed is create + run + kill.
	Elapsed time.Duration
}

func realEnv(getenv func(string) string) *Env {
	return &Env{
		Getenv:   getenv,
		Geteuid:  os.Geteuid,
		LookPath: exec.LookPath,
		ReadFile: os.ReadFile,
		Exists: func(p string) bool {
			_, err := os.Stat(p)
			return err == nil
		},
		Writable: writable,
		OpenRW: func(p string) error {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err == nil {
				f.Close()
			}
			return err
		},
		FSType: fsType,
		Run: func(ctx context.Context, path string, args ...string) error {
			cmd := exec.CommandContext(ctx, path, args...)
			cmd.Dir = "/"
			return cmd.Run()
		},
		RunInUserNS: runInUserNS,
		Listen: func(addr string) error {
			ln, err := net.Listen("tcp", addr)
			if err == nil {
				ln.Close()
			}
			return err
		},
		Answers:   platform.Answers,
		Netfilter: netfilterProbe,
		Sandbox:   sandboxProbe,
		AWS:       awsProbe,
	}
}
